/*
 * corpus: edge cases of every call the supervisor emulates, run natively
 * (runc) and under cordon's supervisor (both platforms) by
 * tests/deputy/main.rs, which compares the two outputs line by line.
 *
 * Every case prints one line "NAME ok VALUE" or "NAME err ERRNO"; the
 * resulting tree follows as "tree:PATH TYPE MODE SIZE NLINK UID GID"
 * lines. Cases run as root with Docker's default capabilities, and the
 * "user-" ones as uid/gid 1000 (in a child), so permission checks are
 * the caller's. Usage: corpus DIR (an empty, writable directory).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <ftw.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static const char *ename(int e)
{
    static char buf[32];
    const char *n = strerrorname_np(e);
    if (n)
        return n;
    snprintf(buf, sizeof buf, "E%d", e);
    return buf;
}

#include "report.h"

/* An open's result: "ok" for any fd (numbers may differ), closed. */
static void opened(const char *name, int fd)
{
    if (fd < 0) {
        line("%s err %s", name, ename(errno));
        return;
    }
    line("%s ok fd", name);
    close(fd);
}

/* The mode (permission bits) of PATH, or its errno. */
static void mode_of(const char *name, const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        line("%s err %s", name, ename(errno));
    else
        line("%s ok %o", name, st.st_mode & 07777);
}

static int touch(const char *path, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0)
        return -1;
    if (write(fd, "data", 4) != 4) {
        close(fd);
        return -1;
    }
    return close(fd);
}

static long openat2_(int dirfd, const char *path, unsigned long long flags, unsigned long long mode,
                     unsigned long long resolve, size_t size)
{
    struct open_how how = {.flags = flags, .mode = mode, .resolve = resolve};
    return syscall(SYS_openat2, dirfd, path, &how, size);
}

static void opens(void)
{
    char longname[300], longpath[PATH_MAX + 16];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    memset(longpath, 'p', sizeof longpath - 1);
    longpath[sizeof longpath - 1] = 0;
    for (size_t i = 100; i < sizeof longpath - 1; i += 100)
        longpath[i] = '/';

    opened("open-missing", open("o/missing", O_RDONLY));
    opened("open-creat-new", open("o/new", O_WRONLY | O_CREAT, 0644));
    opened("open-excl-existing", open("o/file", O_WRONLY | O_CREAT | O_EXCL, 0644));
    opened("open-excl-dangling", open("o/dangling", O_WRONLY | O_CREAT | O_EXCL, 0644));
    opened("open-creat-dangling", open("o/dangling2", O_WRONLY | O_CREAT, 0600));
    opened("open-directory-file", open("o/file", O_RDONLY | O_DIRECTORY));
    opened("open-directory-dir", open("o/dir", O_RDONLY | O_DIRECTORY));
    opened("open-wronly-dir", open("o/dir", O_WRONLY));
    opened("open-rdwr-dir", open("o/dir", O_RDWR));
    opened("open-nofollow-link", open("o/link", O_RDONLY | O_NOFOLLOW));
    opened("open-nofollow-path-link", open("o/link", O_PATH | O_NOFOLLOW));
    opened("open-nofollow-dirlink", open("o/dirlink/file", O_RDONLY | O_NOFOLLOW));
    opened("open-tmpfile", open("o/dir", O_TMPFILE | O_RDWR, 0600));
    opened("open-tmpfile-rdonly", open("o/dir", O_TMPFILE | O_RDONLY, 0600));
    opened("open-tmpfile-file", open("o/file", O_TMPFILE | O_RDWR, 0600));
    opened("open-tmpfile-missing", open("o/nodir", O_TMPFILE | O_RDWR, 0600));
    opened("open-name-too-long", open(longname, O_RDONLY));
    opened("open-path-too-long", open(longpath, O_RDONLY));
    opened("open-file-slash", open("o/file/", O_RDONLY));
    opened("open-creat-missing-slash", open("o/newdir/", O_WRONLY | O_CREAT, 0644));
    opened("open-dir-slash", open("o/dir/", O_RDONLY));
    opened("open-dir-slashes", open("o//dir///", O_RDONLY));
    opened("open-trunc-rdonly", open("o/trunc", O_RDONLY | O_TRUNC));
    opened("open-loop", open("o/loop1", O_RDONLY));
    opened("open-file-dotdot", open("o/file/../file", O_RDONLY));
    opened("open-empty", open("", O_RDONLY));
    opened("open-excl-dir", open("o/dir", O_WRONLY | O_CREAT | O_EXCL, 0644));
    opened("open-creat-dir", open("o/dir", O_RDONLY | O_CREAT, 0644));
    opened("open-directory-creat", open("o/dc", O_RDONLY | O_DIRECTORY | O_CREAT, 0755));
    opened("open-append", open("o/file", O_WRONLY | O_APPEND));
    opened("open-dev-null", open("/dev/null", O_WRONLY));
    opened("open-dev-full", open("/dev/full", O_RDWR));
    opened("open-fifo-nonblock-rd", open("o/fifo", O_RDONLY | O_NONBLOCK));
    opened("open-fifo-nonblock-wr", open("o/fifo", O_WRONLY | O_NONBLOCK));
    opened("open-socket-file", open("o/sock", O_RDONLY));
    opened("open-proc-self-fd-dir", open("/proc/self/fd", O_RDONLY | O_DIRECTORY));
    opened("open-dot", open(".", O_RDONLY));
    opened("open-dotdot-root", open("/..", O_RDONLY));
    opened("creat-existing-trunc", creat("o/trunc2", 0600));
    opened("creat-mode", creat("o/created", 0777));
    mode_of("mode-created", "o/created");
    mode_of("mode-open-creat-new", "o/new");
    mode_of("mode-creat-dangling-target", "o/target2");
    umask(077);
    opened("open-umask-077", open("o/umask", O_WRONLY | O_CREAT, 0666));
    mode_of("mode-umask-077", "o/umask");
    umask(022);

    int dir = open("o/dir", O_RDONLY | O_DIRECTORY);
    int file = open("o/file", O_RDONLY);
    opened("openat-dirfd", openat(dir, "inner", O_RDONLY));
    opened("openat-file-dirfd", openat(file, "x", O_RDONLY));
    opened("openat-bad-dirfd", openat(9999, "x", O_RDONLY));
    opened("openat-abs-ignores-dirfd", openat(9999, "/dev/null", O_RDONLY));
    opened("openat-empty-dirfd", openat(dir, "", O_RDONLY));
    opened("openat2-beneath-escape", openat2_(dir, "../file", O_RDONLY, 0, RESOLVE_BENEATH, sizeof(struct open_how)));
    opened("openat2-beneath-abs", openat2_(dir, "/dev/null", O_RDONLY, 0, RESOLVE_BENEATH, sizeof(struct open_how)));
    opened("openat2-in-root-dotdot", openat2_(dir, "../../inner", O_RDONLY, 0, RESOLVE_IN_ROOT, sizeof(struct open_how)));
    opened("openat2-no-xdev", openat2_(AT_FDCWD, "/proc/self/status", O_RDONLY, 0, RESOLVE_NO_XDEV, sizeof(struct open_how)));
    opened("openat2-mode-no-creat", openat2_(AT_FDCWD, "o/file", O_RDONLY, 0644, 0, sizeof(struct open_how)));
    opened("openat2-mode-too-big", openat2_(AT_FDCWD, "o/big", O_WRONLY | O_CREAT, 010000, 0, sizeof(struct open_how)));
    opened("openat2-small-size", openat2_(AT_FDCWD, "o/file", O_RDONLY, 0, 0, 8));
    opened("openat2-nosym-link", openat2_(AT_FDCWD, "o/link", O_RDONLY, 0, RESOLVE_NO_SYMLINKS, sizeof(struct open_how)));
    opened("openat2-creat", openat2_(AT_FDCWD, "o/o2", O_WRONLY | O_CREAT | O_EXCL, 0640, 0, sizeof(struct open_how)));
    mode_of("mode-openat2-creat", "o/o2");
    close(dir);
    close(file);
}

static void trees(void)
{
    char longname[300];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    int file = open("t/file", O_RDONLY);

    res("mkdir-existing", mkdir("t/dir", 0755));
    res("mkdir-missing-parent", mkdir("t/no/sub", 0755));
    res("mkdir-slashes", mkdir("t/m1//", 0755));
    res("mkdir-on-file", mkdir("t/file", 0755));
    res("mkdir-on-dangling", mkdir("t/dangling", 0755));
    res("mkdir-mode", mkdir("t/m2", 0777));
    mode_of("mode-mkdir", "t/m2");
    res("mkdir-setgid-mode", mkdir("t/m3", 02775));
    mode_of("mode-mkdir-setgid", "t/m3");
    res("mkdir-too-long", mkdir(longname, 0755));
    res("mkdirat-file-dirfd", mkdirat(file, "x", 0755));
    res("mkdir-dot", mkdir("t/dir/.", 0755));

    res("rmdir-nonempty", rmdir("t/full"));
    res("rmdir-file", rmdir("t/file"));
    res("rmdir-missing", rmdir("t/missing"));
    res("rmdir-link-to-dir", rmdir("t/dirlink"));
    res("rmdir-dot-suffix", rmdir("t/empty/."));
    res("rmdir-slash", rmdir("t/empty2/"));
    res("rmdir-root", rmdir("/"));

    res("unlink-dir", unlink("t/dir"));
    res("unlink-missing", unlink("t/missing"));
    res("unlink-link", unlink("t/filelink"));
    res("unlinkat-removedir-file", unlinkat(AT_FDCWD, "t/file2", AT_REMOVEDIR));
    res("unlinkat-bad-flag", unlinkat(AT_FDCWD, "t/file2", 0x1));
    res("unlink-file-slash", unlink("t/file2/"));
    res("unlinkat-file-dirfd", unlinkat(file, "x", 0));

    res("rename-file-over-file", rename("t/r1", "t/r2"));
    res("rename-file-over-dir", rename("t/r2", "t/dir"));
    res("rename-dir-over-file", rename("t/rd1", "t/file2"));
    res("rename-dir-over-full", rename("t/rd1", "t/full"));
    res("rename-dir-over-empty", rename("t/rd1", "t/rd2"));
    res("rename-dir-into-itself", rename("t/rd2", "t/rd2/sub"));
    res("rename-missing", rename("t/missing", "t/x"));
    res("rename-missing-parent", rename("t/r2", "t/no/x"));
    res("renameat2-noreplace-existing", syscall(SYS_renameat2, AT_FDCWD, "t/file2", AT_FDCWD, "t/r2", RENAME_NOREPLACE));
    res("renameat2-noreplace-new", syscall(SYS_renameat2, AT_FDCWD, "t/r2", AT_FDCWD, "t/r3", RENAME_NOREPLACE));
    res("renameat2-exchange-missing", syscall(SYS_renameat2, AT_FDCWD, "t/r3", AT_FDCWD, "t/missing", RENAME_EXCHANGE));
    res("renameat2-exchange", syscall(SYS_renameat2, AT_FDCWD, "t/r3", AT_FDCWD, "t/dir", RENAME_EXCHANGE));
    res("renameat2-both-flags", syscall(SYS_renameat2, AT_FDCWD, "t/r3", AT_FDCWD, "t/dir", RENAME_EXCHANGE | RENAME_NOREPLACE));
    res("renameat2-bad-flag", syscall(SYS_renameat2, AT_FDCWD, "t/r3", AT_FDCWD, "t/x", 0x100));
    res("rename-same", rename("t/file2", "t/file2"));
    res("rename-hardlinks", rename("t/h1", "t/h2"));
    res("rename-link", rename("t/filelink2", "t/filelink3"));
    res("rename-file-slash", rename("t/file2/", "t/x"));
    res("rename-to-dot", rename("t/file2", "t/dir/."));

    res("link-dir", link("t/dir", "t/dirhard"));
    res("link-existing", link("t/file", "t/file2"));
    res("link-missing", link("t/missing", "t/x"));
    res("link-symlink", link("t/filelink3", "t/hardlink-to-link"));
    res("linkat-follow", linkat(AT_FDCWD, "t/filelink3", AT_FDCWD, "t/hardlink-followed", AT_SYMLINK_FOLLOW));
    res("linkat-bad-flag", linkat(AT_FDCWD, "t/file", AT_FDCWD, "t/x", 0x1));
    res("link-file-slash", link("t/file/", "t/x"));
    res("link-new-in-missing", link("t/file", "t/no/x"));

    res("symlink-existing", symlink("file", "t/file2"));
    res("symlink-empty-target", symlink("", "t/s-empty"));
    res("symlink-in-missing", symlink("file", "t/no/s"));
    res("symlink-new", symlink("../o/file", "t/s-new"));
    res("symlinkat-file-dirfd", symlinkat("x", file, "s"));
    char buf[8];
    memset(buf, 0, sizeof buf);
    long n = readlink("t/s-new", buf, 4);
    line("readlink-short ok %ld %.*s", n, n > 0 ? (int)n : 0, buf);
    res("readlink-file", readlink("t/file", buf, sizeof buf));
    res("readlink-missing", readlink("t/missing", buf, sizeof buf));
    res("readlink-zero-buf", readlink("t/s-new", buf, 0));
    int lfd = open("t/s-new", O_PATH | O_NOFOLLOW);
    res("readlinkat-empty-path", readlinkat(lfd, "", buf, sizeof buf));
    close(lfd);

    res("mknod-fifo", mknod("t/fifo2", S_IFIFO | 0644, 0));
    res("mknod-reg", mknod("t/reg", S_IFREG | 0600, 0));
    res("mknod-existing", mknod("t/fifo2", S_IFIFO | 0644, 0));
    res("mknod-null", mknod("t/null", S_IFCHR | 0666, makedev(1, 3)));
    res("mknod-bad-type", mknod("t/bad", 0170000 | 0644, 0));
    res("mknod-sock", mknod("t/sock2", S_IFSOCK | 0644, 0));
    res("mknod-dir-type", mknod("t/ddd", S_IFDIR | 0755, 0));
    mode_of("mode-mknod-fifo", "t/fifo2");
    close(file);
}

static void metas(void)
{
    struct stat st;
    struct statx stx;
    res("chmod-missing", chmod("m/missing", 0600));
    res("chmod-link-follows", chmod("m/link", 0600));
    mode_of("mode-chmod-target", "m/file");
    res("fchmodat-nofollow-link", fchmodat(AT_FDCWD, "m/link", 0600, AT_SYMLINK_NOFOLLOW));
    res("fchmodat-bad-flag", fchmodat(AT_FDCWD, "m/file", 0600, 0x2));
    res("chmod-setuid", chmod("m/file2", 04755));
    mode_of("mode-chmod-setuid", "m/file2");
    res("chown-keep", chown("m/file", -1, -1));
    res("chown-other", chown("m/file", 1000, 1000));
    res("lchown-link", lchown("m/link", 1000, 1000));
    res("fchownat-bad-flag", fchownat(AT_FDCWD, "m/file", 0, 0, 0x2));
    res("chown-missing", chown("m/missing", 0, 0));
    res("truncate-dir", truncate("m/dir", 0));
    res("truncate-negative", truncate("m/file", -1));
    res("truncate-missing", truncate("m/missing", 0));
    res("truncate-link", truncate("m/link", 2));
    res("truncate-grow", truncate("m/file2", 100));
    res("stat-missing", stat("m/missing", &st));
    res("lstat-link", lstat("m/link", &st));
    line("lstat-link-type ok %o", st.st_mode & S_IFMT);
    res("stat-file-slash", stat("m/file/", &st));
    res("stat-link-dir-slash", stat("m/dirlink/", &st));
    res("access-missing", access("m/missing", F_OK));
    res("access-bad-mode", access("m/file", 0x10));
    res("faccessat-eaccess", faccessat(AT_FDCWD, "m/file", R_OK, AT_EACCESS));
    res("faccessat-bad-flag", faccessat(AT_FDCWD, "m/file", R_OK, 0x1));
    res("faccessat2-nofollow", syscall(SYS_faccessat2, AT_FDCWD, "m/link", F_OK, AT_SYMLINK_NOFOLLOW));
    int fd = open("m/file", O_RDONLY);
    res("statx-empty-path", statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx));
    res("statx-reserved-mask", statx(AT_FDCWD, "m/file", 0, 0x80000000U, &stx));
    res("newfstatat-bad-flag", fstatat(AT_FDCWD, "m/file", &st, 0x1));
    res("fstatat-empty-no-flag", fstatat(fd, "", &st, 0));
    close(fd);

    struct timespec ts[2] = {{.tv_sec = 1000000000, .tv_nsec = 0}, {.tv_sec = 1000000000, .tv_nsec = 0}};
    struct timespec bad[2] = {{.tv_sec = 0, .tv_nsec = 1000000000}, {.tv_sec = 0, .tv_nsec = 0}};
    struct timespec omit[2] = {{.tv_sec = 0, .tv_nsec = UTIME_OMIT}, {.tv_sec = 0, .tv_nsec = UTIME_OMIT}};
    res("utimensat-missing", utimensat(AT_FDCWD, "m/missing", ts, 0));
    res("utimensat-set", utimensat(AT_FDCWD, "m/file", ts, 0));
    res("utimensat-bad-nsec", utimensat(AT_FDCWD, "m/file", bad, 0));
    res("utimensat-omit", utimensat(AT_FDCWD, "m/file", omit, 0));
    res("utimensat-nofollow", utimensat(AT_FDCWD, "m/link", ts, AT_SYMLINK_NOFOLLOW));
    res("utimensat-bad-flag", utimensat(AT_FDCWD, "m/file", ts, 0x1));
    if (stat("m/file", &st) == 0)
        line("mtime-after ok %ld", (long)st.st_mtime);
    struct timeval tv[2] = {{.tv_sec = 2000000000, .tv_usec = 0}, {.tv_sec = 2000000000, .tv_usec = 0}};
    res("utimes-set", utimes("m/file2", tv));
    res("utimes-bad-usec", utimes("m/file2", (struct timeval[2]){{0, 2000000}, {0, 0}}));

    res("setxattr-user", setxattr("m/file", "user.a", "1", 1, 0));
    res("setxattr-create-existing", setxattr("m/file", "user.a", "2", 1, XATTR_CREATE));
    res("setxattr-replace-missing", setxattr("m/file", "user.b", "2", 1, XATTR_REPLACE));
    res("setxattr-bad-namespace", setxattr("m/file", "foo.a", "1", 1, 0));
    res("setxattr-bad-flags", setxattr("m/file", "user.c", "1", 1, 0x4));
    res("lsetxattr-link-user", lsetxattr("m/link", "user.a", "1", 1, 0));
    res("setxattr-missing", setxattr("m/missing", "user.a", "1", 1, 0));
    char longattr[300];
    memcpy(longattr, "user.", 5);
    memset(longattr + 5, 'x', sizeof longattr - 6);
    longattr[sizeof longattr - 1] = 0;
    res("setxattr-name-too-long", setxattr("m/file", longattr, "1", 1, 0));
    res("setxattr-trusted", setxattr("m/file", "trusted.a", "1", 1, 0));
    res("removexattr-missing", removexattr("m/file", "user.zz"));
    res("removexattr-present", removexattr("m/file", "user.a"));
    res("lremovexattr-link", lremovexattr("m/link", "user.a"));
    char val[8];
    res("getxattr-after-remove", getxattr("m/file", "user.a", val, sizeof val));
    fd = open("m/file2", O_RDONLY);
    res("fsetxattr-rdonly-fd", fsetxattr(fd, "user.f", "1", 1, 0));
    res("fchmod-rdonly-fd", fchmod(fd, 0640));
    res("fchown-rdonly-fd", fchown(fd, 0, 0));
    close(fd);
    int pfd = open("m/file2", O_PATH);
    res("fchmod-opath-fd", fchmod(pfd, 0600));
    res("fsetxattr-opath-fd", fsetxattr(pfd, "user.g", "1", 1, 0));
    close(pfd);
}

static void sockets(void)
{
    struct sockaddr_un a;
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    res("bind-new", bind(s, (struct sockaddr *)&a, unaddr(&a, "k/sock")));
    res("listen", listen(s, 1));
    int s2 = socket(AF_UNIX, SOCK_STREAM, 0);
    res("bind-existing", bind(s2, (struct sockaddr *)&a, unaddr(&a, "k/sock")));
    res("bind-missing-dir", bind(s2, (struct sockaddr *)&a, unaddr(&a, "k/no/sock")));
    res("bind-on-file", bind(s2, (struct sockaddr *)&a, unaddr(&a, "k/file")));
    res("bind-dangling", bind(s2, (struct sockaddr *)&a, unaddr(&a, "k/dangling")));
    res("bind-trailing-slash", bind(s2, (struct sockaddr *)&a, unaddr(&a, "k/s2/")));
    struct sockaddr_un big;
    memset(&big, 0, sizeof big);
    big.sun_family = AF_UNIX;
    memset(big.sun_path, 'x', sizeof big.sun_path);
    res("bind-unterminated", bind(s2, (struct sockaddr *)&big, sizeof big));
    res("bind-short-len", bind(s2, (struct sockaddr *)&a, 1));
    res("bind-again", bind(s, (struct sockaddr *)&a, unaddr(&a, "k/other")));
    mode_of("mode-bound-socket", "k/sock");
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    res("connect-ok", connect(c, (struct sockaddr *)&a, unaddr(&a, "k/sock")));
    close(c);
    c = socket(AF_UNIX, SOCK_STREAM, 0);
    res("connect-missing", connect(c, (struct sockaddr *)&a, unaddr(&a, "k/missing")));
    res("connect-file", connect(c, (struct sockaddr *)&a, unaddr(&a, "k/file")));
    res("connect-dir", connect(c, (struct sockaddr *)&a, unaddr(&a, "k")));
    res("connect-link", connect(c, (struct sockaddr *)&a, unaddr(&a, "k/socklink")));
    close(c);
    int d = socket(AF_UNIX, SOCK_DGRAM, 0);
    res("sendto-stream-socket", sendto(d, "x", 1, 0, (struct sockaddr *)&a, unaddr(&a, "k/sock")));
    res("sendto-missing", sendto(d, "x", 1, 0, (struct sockaddr *)&a, unaddr(&a, "k/missing")));
    close(d);
    close(s);
    close(s2);
}

/* As uid/gid 1000: the permission checks are the caller's. */
static void as_user(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(1000, 1000, 1000) < 0 || setresuid(1000, 1000, 1000) < 0)
            _exit(3);
        struct stat st;
        struct sockaddr_un a;
        opened("user-open-noread", open("u/noread", O_RDONLY));
        opened("user-open-path-noread", open("u/noread", O_PATH));
        opened("user-open-nosearch", open("u/nosearch/file", O_RDONLY));
        opened("user-creat-nowrite-dir", open("u/ro/new", O_WRONLY | O_CREAT, 0644));
        opened("user-open-noatime", open("u/rootfile", O_RDONLY | O_NOATIME));
        opened("user-open-trunc-nowrite", open("u/rootfile", O_WRONLY | O_TRUNC));
        res("user-mkdir-nowrite", mkdir("u/ro/d", 0755));
        res("user-mkdir-sticky", mkdir("u/sticky/mine", 0755));
        res("user-unlink-sticky-other", unlink("u/sticky/rootfile"));
        res("user-rename-sticky-other", rename("u/sticky/rootfile", "u/sticky/x"));
        res("user-rename-sticky-own", rename("u/sticky/mine", "u/sticky/mine2"));
        res("user-rmdir-nowrite", rmdir("u/ro/sub"));
        res("user-chmod-other", chmod("u/rootfile", 0777));
        res("user-chown-other", chown("u/own", 0, 0));
        res("user-chmod-own", chmod("u/own", 0600));
        res("user-chmod-own-setgid", chmod("u/own", 02755));
        if (stat("u/own", &st) == 0)
            line("user-mode-setgid-cleared ok %o", st.st_mode & 07777);
        res("user-truncate-nowrite", truncate("u/rootfile", 0));
        res("user-access-w", access("u/rootfile", W_OK));
        res("user-access-r", access("u/rootfile", R_OK));
        res("user-stat-nosearch", stat("u/nosearch/file", &st));
        res("user-link-other", link("u/rootfile", "u/sticky/hl"));
        res("user-utimensat-now-other", utimensat(AT_FDCWD, "u/rootfile", NULL, 0));
        struct timespec ts[2] = {{.tv_sec = 1, .tv_nsec = 0}, {.tv_sec = 1, .tv_nsec = 0}};
        res("user-utimensat-set-other", utimensat(AT_FDCWD, "u/rootfile", ts, 0));
        res("user-utimensat-now-writable", utimensat(AT_FDCWD, "u/writable", NULL, 0));
        res("user-utimensat-set-writable", utimensat(AT_FDCWD, "u/writable", ts, 0));
        res("user-setxattr-other", setxattr("u/rootfile", "user.a", "1", 1, 0));
        res("user-setxattr-own", setxattr("u/own", "user.a", "1", 1, 0));
        res("user-mknod-char", mknod("u/sticky/null", S_IFCHR | 0666, makedev(1, 3)));
        res("user-mknod-fifo", mknod("u/sticky/fifo", S_IFIFO | 0644, 0));
        res("user-symlink-nowrite", symlink("x", "u/ro/s"));
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        res("user-bind-nowrite", bind(s, (struct sockaddr *)&a, unaddr(&a, "u/ro/sock")));
        res("user-bind-sticky", bind(s, (struct sockaddr *)&a, unaddr(&a, "u/sticky/sock")));
        close(s);
        int c = socket(AF_UNIX, SOCK_STREAM, 0);
        res("user-connect-nowrite-sock", connect(c, (struct sockaddr *)&a, unaddr(&a, "u/rootsock")));
        close(c);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    line("user-child ok %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static int tree_line(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)type;
    (void)ftw;
    char kind = S_ISDIR(st->st_mode) ? 'd' : S_ISLNK(st->st_mode) ? 'l' : S_ISREG(st->st_mode) ? 'f'
              : S_ISFIFO(st->st_mode) ? 'p' : S_ISSOCK(st->st_mode) ? 's' : S_ISCHR(st->st_mode) ? 'c' : '?';
    long size = S_ISDIR(st->st_mode) ? 0 : (long)st->st_size;
    line("tree:%s %c %o %ld %ld %d %d", path, kind, st->st_mode & 07777, size, (long)st->st_nlink,
         (int)st->st_uid, (int)st->st_gid);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || chdir(argv[1]) < 0)
        return 2;
    umask(022);
    /* o/: opens */
    if (mkdir("o", 0755) < 0 || touch("o/file", 0644) < 0 || mkdir("o/dir", 0755) < 0 ||
        touch("o/dir/inner", 0644) < 0 || symlink("missing-target", "o/dangling") < 0 ||
        symlink("target2", "o/dangling2") < 0 || symlink("file", "o/link") < 0 || symlink("dir", "o/dirlink") < 0 ||
        touch("o/trunc", 0644) < 0 || touch("o/trunc2", 0644) < 0 || symlink("loop2", "o/loop1") < 0 ||
        symlink("loop1", "o/loop2") < 0 || mkfifo("o/fifo", 0644) < 0 || mknod("o/sock", S_IFSOCK | 0644, 0) < 0)
        return 2;
    /* t/: tree changes */
    if (mkdir("t", 0755) < 0 || touch("t/file", 0644) < 0 || touch("t/file2", 0644) < 0 || mkdir("t/dir", 0755) < 0 ||
        mkdir("t/full", 0755) < 0 || touch("t/full/x", 0644) < 0 || mkdir("t/empty", 0755) < 0 ||
        mkdir("t/empty2", 0755) < 0 || symlink("dir", "t/dirlink") < 0 || symlink("file", "t/filelink") < 0 ||
        symlink("file", "t/filelink2") < 0 || symlink("nowhere", "t/dangling") < 0 || touch("t/r1", 0644) < 0 ||
        touch("t/r2", 0600) < 0 || mkdir("t/rd1", 0755) < 0 || mkdir("t/rd2", 0755) < 0 || touch("t/h1", 0644) < 0 ||
        link("t/h1", "t/h2") < 0)
        return 2;
    /* m/: metadata */
    if (mkdir("m", 0755) < 0 || touch("m/file", 0644) < 0 || touch("m/file2", 0644) < 0 || mkdir("m/dir", 0755) < 0 ||
        symlink("file", "m/link") < 0 || symlink("dir", "m/dirlink") < 0)
        return 2;
    /* k/: sockets */
    if (mkdir("k", 0755) < 0 || touch("k/file", 0644) < 0 || symlink("nowhere", "k/dangling") < 0 ||
        symlink("sock", "k/socklink") < 0)
        return 2;
    /* u/: for uid 1000 */
    if (mkdir("u", 0755) < 0 || touch("u/noread", 0600) < 0 || mkdir("u/nosearch", 0700) < 0 ||
        touch("u/nosearch/file", 0644) < 0 || mkdir("u/ro", 0755) < 0 || mkdir("u/ro/sub", 0755) < 0 ||
        mkdir("u/sticky", 01777) < 0 || touch("u/sticky/rootfile", 0644) < 0 || touch("u/rootfile", 0644) < 0 ||
        touch("u/own", 0644) < 0 || chown("u/own", 1000, 1000) < 0 || touch("u/writable", 0666) < 0 ||
        chmod("u/writable", 0666) < 0 || chmod("u/sticky", 01777) < 0)
        return 2;
    {
        struct sockaddr_un a;
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        if (s < 0 || bind(s, (struct sockaddr *)&a, unaddr(&a, "u/rootsock")) < 0 || listen(s, 1) < 0 ||
            chmod("u/rootsock", 0755) < 0)
            return 2;
    }
    opens();
    trees();
    metas();
    sockets();
    as_user();
    nftw(".", tree_line, 16, FTW_PHYS);
    return 0;
}
