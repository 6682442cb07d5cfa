/*
 * deputy: the calls a container makes that the supervisor performs for it,
 * one subcommand each, run inside cordon containers by tests/deputy/main.rs
 * (compiled there with `gcc -static`, bind-mounted read-only at /home).
 *
 * Every step prints one line "NAME RESULT", RESULT being "ok <value>" or
 * "err <ERRNO_NAME>"; the suite compares them with what runc gives and
 * checks the host side (files, modes, times, xattrs) itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static const char *ename(int e)
{
    switch (e) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EEXIST: return "EEXIST";
    case EINVAL: return "EINVAL";
    case EBADF: return "EBADF";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ENOTSUP: return "ENOTSUP";
    case ENOTTY: return "ENOTTY";
    case EROFS: return "EROFS";
    case EXDEV: return "EXDEV";
    case ENOSYS: return "ENOSYS";
    case ENETUNREACH: return "ENETUNREACH";
    case EADDRINUSE: return "EADDRINUSE";
    case ENODATA: return "ENODATA";
    case EMFILE: return "EMFILE";
    case EIO: return "EIO";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case ENOTEMPTY: return "ENOTEMPTY";
    case EBUSY: return "EBUSY";
    case EFBIG: return "EFBIG";
    case ELOOP: return "ELOOP";
    default: {
        static char buf[32];
        snprintf(buf, sizeof buf, "E%d", e);
        return buf;
    }
    }
}

#include "report.h"

/* unix PATH: connect (stream) and sendto (datagram) to PATH; a stream
 * connection reads one line from the server. */
static int cmd_unix(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    struct sockaddr_un a;
    socklen_t len = unaddr(&a, argv[2]);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (res("connect", connect(s, (struct sockaddr *)&a, len)) == 0) {
        char buf[64] = {0};
        ssize_t n = read(s, buf, sizeof buf - 1);
        if (n > 0)
            buf[strcspn(buf, "\n")] = 0;
        line("read %s", n > 0 ? buf : "-");
    }
    close(s);
    int d = socket(AF_UNIX, SOCK_DGRAM, 0);
    res("sendto", sendto(d, "x", 1, 0, (struct sockaddr *)&a, len));
    struct msghdr m = {0};
    struct iovec v = {.iov_base = "y", .iov_len = 1};
    m.msg_name = &a;
    m.msg_namelen = len;
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    res("sendmsg", sendmsg(d, &m, 0));
    return 0;
}

/* peercred: a server on /tmp/pc.sock (stream) and /tmp/pc.dgram (datagram,
 * SO_PASSCRED); a child becomes uid/gid 1000 and connects and sends; the
 * server prints what the kernel says the peer is. Then the child sends its
 * own credentials explicitly, and someone else's. */
static int cmd_peercred(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct sockaddr_un a, b;
    socklen_t la = unaddr(&a, "/tmp/pc.sock"), lb = unaddr(&b, "/tmp/pc.dgram");
    unlink(a.sun_path);
    unlink(b.sun_path);
    int srv = socket(AF_UNIX, SOCK_STREAM, 0);
    int dg = socket(AF_UNIX, SOCK_DGRAM, 0);
    int one = 1;
    if (res("bind", bind(srv, (struct sockaddr *)&a, la)) < 0 || listen(srv, 4) < 0)
        return 1;
    res("bind-dgram", bind(dg, (struct sockaddr *)&b, lb));
    setsockopt(dg, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
    chmod(a.sun_path, 0777);
    chmod(b.sun_path, 0777);
    struct sockaddr_un got;
    socklen_t gl = sizeof got;
    getsockname(srv, (struct sockaddr *)&got, &gl);
    line("getsockname ok %s", got.sun_path);
    pid_t child = fork();
    if (child == 0) {
        if (setgid(1000) || setuid(1000))
            _exit(3);
        int c = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(c, (struct sockaddr *)&a, la) < 0)
            _exit(4);
        struct sockaddr_un p;
        socklen_t pl = sizeof p;
        getpeername(c, (struct sockaddr *)&p, &pl);
        line("getpeername ok %s", p.sun_path);
        int d = socket(AF_UNIX, SOCK_DGRAM, 0);
        sendto(d, "x", 1, 0, (struct sockaddr *)&b, lb);
        /* Explicit credentials: its own, then root's. */
        for (int i = 0; i < 2; i++) {
            struct ucred uc = {.pid = getpid(), .uid = i ? 0 : 1000, .gid = i ? 0 : 1000};
            char cbuf[CMSG_SPACE(sizeof uc)];
            struct msghdr m = {0};
            struct iovec v = {.iov_base = "z", .iov_len = 1};
            m.msg_name = &b;
            m.msg_namelen = lb;
            m.msg_iov = &v;
            m.msg_iovlen = 1;
            m.msg_control = cbuf;
            m.msg_controllen = sizeof cbuf;
            struct cmsghdr *h = CMSG_FIRSTHDR(&m);
            h->cmsg_level = SOL_SOCKET;
            h->cmsg_type = SCM_CREDENTIALS;
            h->cmsg_len = CMSG_LEN(sizeof uc);
            memcpy(CMSG_DATA(h), &uc, sizeof uc);
            res(i ? "scm-root" : "scm-own", sendmsg(d, &m, 0));
        }
        _exit(0);
    }
    int conn = accept(srv, NULL, NULL);
    struct ucred uc;
    socklen_t ul = sizeof uc;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0)
        line("peercred ok uid=%u gid=%u", uc.uid, uc.gid);
    int st;
    waitpid(child, &st, 0);
    for (int i = 0; i < 2; i++) {
        char data[4], cbuf[CMSG_SPACE(sizeof(struct ucred))];
        struct iovec v = {.iov_base = data, .iov_len = sizeof data};
        struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
        if (recvmsg(dg, &m, MSG_DONTWAIT) < 0) {
            line("passcred%d err %s", i, ename(errno));
            continue;
        }
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        if (h && h->cmsg_type == SCM_CREDENTIALS) {
            memcpy(&uc, CMSG_DATA(h), sizeof uc);
            line("passcred%d ok uid=%u gid=%u", i, uc.uid, uc.gid);
        }
    }
    return 0;
}

/* devices: mknod a block device (the host's loop0) and a char device
 * (/dev/mem) below /tmp, then open them. */
static int cmd_devices(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    unlink("/tmp/loop0");
    unlink("/tmp/mem");
    res("mknod-block", mknod("/tmp/loop0", S_IFBLK | 0600, makedev(7, 0)));
    res("open-block", open("/tmp/loop0", O_RDONLY));
    res("mknod-char", mknod("/tmp/mem", S_IFCHR | 0600, makedev(1, 1)));
    res("open-char", open("/tmp/mem", O_RDONLY));
    int p = open("/tmp/loop0", O_PATH);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", p);
    res("reopen-block", open(path, O_RDONLY));
    res("open-null", open("/dev/null", O_RDWR));
    return 0;
}

struct nlreq {
    struct nlmsghdr h;
    union {
        struct ifaddrmsg ifa;
        struct audit_status st;
    } u;
    char attrs[64];
};

/* The errno of the ack to one netlink request sent with an explicit
 * address (sendto) on a datagram netlink socket of `proto`. */
static void nl_ack(const char *name, int proto, struct nlreq *req)
{
    int s = socket(AF_NETLINK, SOCK_DGRAM, proto);
    if (s < 0) {
        line("%s err %s", name, ename(errno));
        return;
    }
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(s, req, req->h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        line("%s err %s", name, ename(errno));
        close(s);
        return;
    }
    char buf[8192];
    struct timeval tv = {.tv_sec = 5};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (;;) {
        ssize_t n = recv(s, buf, sizeof buf, 0);
        if (n < 0) {
            line("%s err %s", name, ename(errno));
            break;
        }
        struct nlmsghdr *h = (struct nlmsghdr *)buf;
        if (h->nlmsg_type == NLMSG_ERROR) {
            int e = -((struct nlmsgerr *)NLMSG_DATA(h))->error;
            if (e)
                line("%s err %s", name, ename(e));
            else
                line("%s ok 0", name);
            break;
        }
        line("%s ok reply", name);
        break;
    }
    close(s);
}

/* caps: calls whose kernel checks read the caller's capabilities or pid
 * namespace: RTM_NEWADDR (CAP_NET_ADMIN), AUDIT_GET (initial pid
 * namespace), a datagram with SO_MARK (CAP_NET_ADMIN). */
static int cmd_caps(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct nlreq r;
    memset(&r, 0, sizeof r);
    r.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg)) + RTA_LENGTH(4);
    r.h.nlmsg_type = RTM_NEWADDR;
    r.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    r.u.ifa.ifa_family = AF_INET;
    r.u.ifa.ifa_prefixlen = 32;
    r.u.ifa.ifa_index = 1;
    struct rtattr *ra = (struct rtattr *)((char *)&r + NLMSG_LENGTH(sizeof(struct ifaddrmsg)));
    ra->rta_type = IFA_LOCAL;
    ra->rta_len = RTA_LENGTH(4);
    inet_pton(AF_INET, "10.99.99.99", RTA_DATA(ra));
    nl_ack("newaddr", NETLINK_ROUTE, &r);

    memset(&r, 0, sizeof r);
    r.h.nlmsg_len = NLMSG_LENGTH(0);
    r.h.nlmsg_type = AUDIT_GET;
    r.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    nl_ack("audit-get", NETLINK_AUDIT, &r);

    int u = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(9)};
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    unsigned mark = 42;
    char cbuf[CMSG_SPACE(sizeof mark)];
    struct iovec v = {.iov_base = "m", .iov_len = 1};
    struct msghdr m = {.msg_name = &dst, .msg_namelen = sizeof dst, .msg_iov = &v, .msg_iovlen = 1,
                       .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SO_MARK;
    h->cmsg_len = CMSG_LEN(sizeof mark);
    memcpy(CMSG_DATA(h), &mark, sizeof mark);
    res("so-mark", sendmsg(u, &m, 0));
    return 0;
}

/* tree DIR: tree changes that would take a protected file out of its rules
 * (DIR holds secret/key (denied), ro/file (read-only), rw/a/private/key
 * (denied by a wildcard rule) and x/ (free)). */
static int cmd_tree(int argc, char **argv)
{
    if (argc < 3 || chdir(argv[2]))
        return 2;
    symlink("secret/key", "l");
    res("link-follow", linkat(AT_FDCWD, "l", AT_FDCWD, "copy", AT_SYMLINK_FOLLOW));
    res("link-plain", linkat(AT_FDCWD, "secret/key", AT_FDCWD, "copy2", 0));
    res("exchange", syscall(SYS_renameat2, AT_FDCWD, "x", AT_FDCWD, "secret", 2 /* RENAME_EXCHANGE */));
    res("rename-parent", rename("rw/a", "rw/b"));
    res("list-dir", open("secret", O_RDONLY | O_DIRECTORY));
    res("chmod-dir", chmod("secret", 0777));
    res("rename-free", rename("x", "y"));
    return 0;
}

/* meta FILE: every way to change a file's metadata, by path and by fd
 * opened for reading; then a unix socket bound next to it. */
static int cmd_meta(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const char *f = argv[2];
    int fd = open(f, O_RDONLY);
    res("open-ro", fd);
    res("fchmod", fchmod(fd, 0600));
    res("chmod", chmod(f, 0600));
    res("fchmodat2", syscall(452, AT_FDCWD, f, 0600, 0));
    res("fchown", fchown(fd, 1000, 1000));
    res("chown", chown(f, 1000, 1000));
    struct timespec ts[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    res("utimensat", utimensat(AT_FDCWD, f, ts, 0));
    res("futimens", futimens(fd, ts));
    struct timeval tv[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    res("utimes", utimes(f, tv));
    res("setxattr", setxattr(f, "user.cordon", "1", 1, 0));
    res("lsetxattr", lsetxattr(f, "user.cordon", "2", 1, 0));
    res("fsetxattr", fsetxattr(fd, "user.cordon", "3", 1, 0));
    res("removexattr", removexattr(f, "user.pre"));
    res("fremovexattr", fremovexattr(fd, "user.pre"));
    /* The file's own flags plus NOATIME: setting NOATIME alone would clear
     * ext4's EXTENTS flag, and that migration's result (EOPNOTSUPP or 0)
     * depends on whether writeback has allocated the file's block yet,
     * which made runc's and cordon's answers differ by timing alone. */
    int flags = 0;
    ioctl(fd, FS_IOC_GETFLAGS, &flags);
    flags |= FS_NOATIME_FL;
    res("setflags", ioctl(fd, FS_IOC_SETFLAGS, &flags));
    /* The kernel reads the command's low 32 bits only. */
    res("setflags-hi", syscall(SYS_ioctl, fd, (long)FS_IOC_SETFLAGS | (1L << 32), &flags));
    char dir[256], sock[300];
    snprintf(dir, sizeof dir, "%s", f);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    snprintf(sock, sizeof sock, "%s/sock", dir);
    struct sockaddr_un a;
    socklen_t len = unaddr(&a, sock);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (res("bind", bind(s, (struct sockaddr *)&a, len)) == 0) {
        struct sockaddr_un got;
        socklen_t gl = sizeof got;
        getsockname(s, (struct sockaddr *)&got, &gl);
        line("bound ok %s", got.sun_path);
    }
    return 0;
}

static atomic_int stop_flip;
static const char *flip_dirs[2];

static void *flip_cwd(void *arg)
{
    (void)arg;
    for (unsigned i = 0; !atomic_load(&stop_flip); i++)
        if (chdir(flip_dirs[i & 1]))
            break;
    return NULL;
}

/* bindrace DIR_A DIR_B NAME TRIES: one thread moves the cwd between two
 * directories while the main thread binds unix sockets at the relative
 * NAME; prints how many binds succeeded. */
static int cmd_bindrace(int argc, char **argv)
{
    if (argc < 6)
        return 2;
    flip_dirs[0] = argv[2];
    flip_dirs[1] = argv[3];
    long tries = atol(argv[5]), ok = 0;
    pthread_t t;
    pthread_create(&t, NULL, flip_cwd, NULL);
    for (long i = 0; i < tries; i++) {
        struct sockaddr_un a;
        socklen_t len = unaddr(&a, argv[4]);
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        if (bind(s, (struct sockaddr *)&a, len) == 0) {
            ok++;
            unlink(argv[4]);
        }
        close(s);
    }
    atomic_store(&stop_flip, 1);
    pthread_join(t, NULL);
    line("binds ok %ld", ok);
    return 0;
}

static char race_path[64];

static void *flip_path(void *arg)
{
    (void)arg;
    for (unsigned i = 0; !atomic_load(&stop_flip); i++)
        memcpy(race_path, (i & 1) ? "/sys" : "/tmp", 4);
    return NULL;
}

/* xattrrace TRIES: /tmp/fs/cgroup is a symlink; a thread rewrites the
 * path buffer between /tmp/fs/cgroup and /sys/fs/cgroup while the main
 * thread sets user.pwned on it with lsetxattr. */
static int cmd_xattrrace(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    mkdir("/tmp/fs", 0755);
    symlink("x", "/tmp/fs/cgroup");
    strcpy(race_path, "/tmp/fs/cgroup");
    long tries = atol(argv[2]);
    pthread_t t;
    pthread_create(&t, NULL, flip_path, NULL);
    for (long i = 0; i < tries; i++)
        lsetxattr(race_path, "user.pwned", "yes", 3, 0);
    atomic_store(&stop_flip, 1);
    pthread_join(t, NULL);
    char v[8];
    res("pwned", getxattr("/sys/fs/cgroup", "user.pwned", v, sizeof v));
    return 0;
}

static void *open_loop(void *arg)
{
    for (;;) {
        int fd = open((const char *)arg, O_RDONLY);
        if (fd >= 0) {
            char b[64];
            if (read(fd, b, sizeof b) < 0)
                break;
            close(fd);
        }
    }
    return NULL;
}

/* exitwhileopening PATH THREADS: THREADS threads open and read PATH in a
 * loop; the main thread calls exit() once they all run. */
static int cmd_exitwhileopening(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    int n = atoi(argv[3]);
    for (int i = 0; i < n; i++) {
        pthread_t t;
        pthread_create(&t, NULL, open_loop, argv[2]);
    }
    usleep(100000);
    line("exiting ok %d", n);
    exit(0);
}

/* fill PATH: opens PATH until an open fails; prints how many and why. */
static int cmd_fill(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    long n = 0;
    while (open(argv[2], O_RDONLY) >= 0)
        n++;
    line("fill %s %ld", ename(errno), n);
    return 0;
}

/* manyfiles DIR N: creates N empty files in DIR; prints how many. */
static int cmd_manyfiles(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    long n = atol(argv[3]), made = 0;
    char p[512];
    for (; made < n; made++) {
        snprintf(p, sizeof p, "%s/f%ld", argv[2], made);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd < 0)
            break;
        close(fd);
    }
    line("made ok %ld", made);
    return 0;
}

/* Whether PATH exists (lstat) and its type, as one line. */
static void exists(const char *name, const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        line("%s err %s", name, ename(errno));
    else
        line("%s ok %s", name, S_ISDIR(st.st_mode) ? "dir" : S_ISREG(st.st_mode) ? "file" : S_ISLNK(st.st_mode) ? "link" : "other");
}

/* openat2 relative to the cwd. */
static long openat2_(const char *path, unsigned long flags, unsigned long resolve)
{
    struct open_how how = {.flags = flags, .mode = 0, .resolve = resolve};
    return syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
}

/* An open's result without the fd number (which runtimes may differ on). */
static long opened(long fd)
{
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

static volatile sig_atomic_t xfsz;
static void on_xfsz(int sig)
{
    (void)sig;
    xfsz++;
}

/* exact DIR tree|chown|fsize|open|deleted|create: calls whose exact result the kernel defines
 * for odd paths and flags, run in the empty directory DIR; every result
 * printed. tree: trailing slashes, ".", ".." and "/", unknown flags and
 * AT_EMPTY_PATH of the tree-changing calls; chown: fchownat's flags;
 * fsize: truncate past RLIMIT_FSIZE; open: unknown open flags and
 * resolve bits, RESOLVE_NO_{SYMLINKS,MAGICLINKS} on /proc/self aliases;
 * deleted: relative paths from a deleted working directory; create:
 * O_CREAT and lsetxattr on names with a trailing slash. */
static int cmd_exact(int argc, char **argv)
{
    if (argc < 4 || chdir(argv[2]) < 0)
        return 2;
    const char *part = argv[3];
    int fd;
    if ((fd = creat("f", 0644)) < 0)
        return 2;
    close(fd);
    if (creat("g", 0644) < 0 || mkdir("d", 0755) < 0 || mkdir("e", 0755) < 0 || symlink("d", "ld") < 0 ||
        symlink("f", "lf") < 0 || creat("k", 0644) < 0)
        return 2;
    if (!strcmp(part, "chown")) {
        res("fchownat-bad-flag", fchownat(AT_FDCWD, "k", 0, 0, 0x2));
        res("fchownat-nofollow", fchownat(AT_FDCWD, "lf", 0, 0, AT_SYMLINK_NOFOLLOW));
        fd = open("k", O_RDONLY);
        res("fchownat-empty-path", fchownat(fd, "", 0, 0, AT_EMPTY_PATH));
        res("fchownat-empty-no-flag", fchownat(fd, "", 0, 0, 0));
        return 0;
    }
    if (!strcmp(part, "fsize")) {
        signal(SIGXFSZ, on_xfsz);
        struct rlimit rl = {4096, 4096};
        if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
            return 2;
        res("truncate-within", truncate("k", 4096));
        res("truncate-beyond", truncate("k", 8192));
        line("sigxfsz ok %d", (int)xfsz);
        res("truncate-shrink", truncate("k", 10));
        res("truncate-dir-beyond", truncate("d", 8192));
        line("sigxfsz-after ok %d", (int)xfsz);
        exists("after-k", "k");
        return 0;
    }
    if (!strcmp(part, "open")) {
        res("open-unknown-flag", opened(open("k", O_RDONLY | 0x40000000)));
        res("openat2-unknown-flag", opened(openat2_("k", O_RDONLY | 0x40000000, 0)));
        res("openat2-unknown-resolve", opened(openat2_("k", O_RDONLY, 0x40)));
        res("openat2-beneath-in-root", opened(openat2_("k", O_RDONLY, RESOLVE_BENEATH | RESOLVE_IN_ROOT)));
        res("openat2-path-rdwr", opened(openat2_("k", O_PATH | O_RDWR, 0)));
        res("open-path-rdwr", opened(open("k", O_PATH | O_RDWR)));
        res("openat2-plain", opened(openat2_("k", O_RDONLY, 0)));
        res("openat2-stdout", opened(openat2_("/dev/stdout", O_RDONLY, 0)));
        res("openat2-stdout-nosym", opened(openat2_("/dev/stdout", O_RDONLY, RESOLVE_NO_SYMLINKS)));
        res("openat2-stdout-nomagic", opened(openat2_("/dev/stdout", O_RDONLY, RESOLVE_NO_MAGICLINKS)));
        res("openat2-fd-nomagic", opened(openat2_("/proc/self/fd/1", O_RDONLY, RESOLVE_NO_MAGICLINKS)));
        res("openat2-fd-nosym", opened(openat2_("/proc/self/fd/1", O_RDONLY, RESOLVE_NO_SYMLINKS)));
        res("openat2-fd", opened(openat2_("/proc/self/fd/1", O_RDONLY, 0)));
        res("openat2-self-nosym", opened(openat2_("/proc/self/status", O_RDONLY, RESOLVE_NO_SYMLINKS)));
        res("openat2-self-nomagic", opened(openat2_("/proc/self/status", O_RDONLY, RESOLVE_NO_MAGICLINKS)));
        res("openat2-cwd-nomagic", opened(openat2_("/proc/self/cwd/k", O_RDONLY, RESOLVE_NO_MAGICLINKS)));
        res("openat2-lf-nosym", opened(openat2_("lf", O_RDONLY, RESOLVE_NO_SYMLINKS)));
        return 0;
    }
    if (!strcmp(part, "create")) {
        if (symlink("n2/", "ln") < 0)
            return 2;
        res("creat-slash", opened(open("n/", O_CREAT | O_WRONLY, 0644)));
        res("creat-file-slash", opened(open("f/", O_CREAT | O_WRONLY, 0644)));
        res("creat-dir-slash", opened(open("d/", O_CREAT | O_RDONLY, 0644)));
        res("creat-dir", opened(open("d", O_CREAT | O_RDONLY, 0644)));
        res("creat-dot", opened(open(".", O_CREAT | O_RDONLY, 0644)));
        res("creat-dir-excl", opened(open("d", O_CREAT | O_EXCL | O_RDONLY, 0644)));
        res("creat-missing-parent-slash", opened(open("nope/n/", O_CREAT | O_WRONLY, 0644)));
        res("creat-via-link-slash", opened(open("ln", O_CREAT | O_WRONLY, 0644)));
        res("lsetxattr-file-slash", lsetxattr("f/", "user.a", "1", 1, 0));
        res("lsetxattr-linkfile-slash", lsetxattr("lf/", "user.a", "1", 1, 0));
        exists("after-n", "n");
        exists("after-n2", "n2");
        return 0;
    }
    if (!strcmp(part, "deleted")) {
        struct stat st;
        /* What the deleted directory's readlink'd name would reach. */
        if (mkdir("dd (deleted)", 0755) < 0 || creat("dd (deleted)/z", 0644) < 0)
            return 2;
        if (mkdir("dd", 0755) < 0 || chdir("dd") < 0 || rmdir("../dd") < 0)
            return 2;
        res("open-dot", opened(open(".", O_RDONLY | O_DIRECTORY)));
        res("openat2-dot", opened(openat2_(".", O_RDONLY, 0)));
        res("open-dot-slash-dot", opened(open("./.", O_RDONLY)));
        res("open-cwd-link", opened(open("/proc/self/cwd", O_RDONLY)));
        res("open-dot-path", opened(open(".", O_PATH)));
        res("open-fd-path", opened(open("/proc/self/fd/1", O_PATH)));
        res("open-exe-path", opened(open("/proc/self/exe", O_PATH)));
        res("open-z", opened(open("z", O_RDONLY)));
        res("open-create", opened(open("new", O_CREAT | O_WRONLY, 0644)));
        res("stat-dot", stat(".", &st) < 0 ? -1 : (long)st.st_nlink);
        res("stat-z", stat("z", &st));
        res("stat-dotdot-k", stat("../k", &st));
        res("open-dotdot", opened(open("..", O_RDONLY)));
        res("mkdir-x", mkdir("x", 0755));
        res("mkdir-dot", mkdir(".", 0755));
        res("rmdir-dot", rmdir("."));
        res("rmdir-dotdot", rmdir(".."));
        res("unlink-dotdot", unlink(".."));
        res("unlink-z", unlink("z"));
        res("symlink-new", symlink("x", "new"));
        res("chmod-dot", chmod(".", 0700));
        res("access-dot", access(".", W_OK));
        if (chdir("..") < 0)
            return 2;
        exists("after-z", "dd (deleted)/z");
        exists("after-new", "dd (deleted)/new");
        return 0;
    }
    if (strcmp(part, "tree"))
        return 2;
    /* trailing slashes */
    res("unlink-file-slash", unlink("f/"));
    res("unlink-dir-slash", unlink("d/"));
    res("unlink-linkdir-slash", unlink("ld/"));
    res("unlink-missing-slash", unlink("nope/"));
    res("rmdir-file-slash", rmdir("f/"));
    res("rename-file-slash", rename("g/", "h"));
    res("rename-to-slash", rename("g", "h/"));
    res("rename-dir-to-slash", rename("e", "e2/"));
    res("rename-exchange-slash", syscall(SYS_renameat2, AT_FDCWD, "d", AT_FDCWD, "g/", RENAME_EXCHANGE));
    res("symlink-slash", symlink("x", "n/"));
    res("symlink-exists-slash", symlink("x", "f/"));
    res("mknod-slash", mknod("n/", S_IFREG | 0644, 0));
    res("mkdir-slash", mkdir("m/", 0755));
    res("link-old-slash", link("f/", "n"));
    res("link-new-slash", link("f", "n/"));
    res("link-linkdir-slash", link("ld/", "n"));
    res("linkat-follow-slash", linkat(AT_FDCWD, "lf/", AT_FDCWD, "n", AT_SYMLINK_FOLLOW));
    /* on a read-only mount (the probe's own, /home) */
    res("ro-unlink-slash", unlink("/home/deputy/"));
    res("ro-unlink-missing-slash", unlink("/home/nope/"));
    res("ro-symlink-slash", symlink("x", "/home/deputy/"));
    res("ro-symlink-missing-slash", symlink("x", "/home/nope/"));
    res("ro-mkdir-missing-slash", mkdir("/home/nope/", 0755));
    res("ro-rename-slash", rename("/home/deputy/", "/home/x"));
    exists("after-f", "f");
    exists("after-g", "g");
    exists("after-h", "h");
    exists("after-n", "n");
    exists("after-e2", "e2");
    exists("after-m", "m");
    /* ".", ".." and "/" */
    res("rmdir-dot", rmdir("."));
    res("rmdir-dotdot", rmdir(".."));
    res("rmdir-d-dot", rmdir("d/."));
    res("rmdir-missing-dot", rmdir("nope/."));
    res("rmdir-root", rmdir("/"));
    res("unlink-dot", unlink("."));
    res("unlink-dotdot", unlink(".."));
    res("unlinkat-bad-flag", unlinkat(AT_FDCWD, "k", 0x1000));
    res("rename-dot", rename(".", "x"));
    res("rename-dotdot", rename("..", "x"));
    res("rename-to-dot", rename("k", "."));
    res("rename-to-dot-noreplace", syscall(SYS_renameat2, AT_FDCWD, "k", AT_FDCWD, ".", RENAME_NOREPLACE));
    res("rename-bad-flag", syscall(SYS_renameat2, AT_FDCWD, "k", AT_FDCWD, "k2", 0x100));
    res("mkdir-dot", mkdir(".", 0755));
    res("mkdir-dotdot", mkdir("d/..", 0755));
    res("symlink-dot", symlink("x", "."));
    res("link-dot", link(".", "x"));
    res("link-to-dot", link("k", "d/."));
    /* flags */
    res("linkat-bad-flag", linkat(AT_FDCWD, "k", AT_FDCWD, "k3", 0x2));
    fd = open("k", O_RDONLY);
    res("linkat-empty-path", linkat(fd, "", AT_FDCWD, "k4", AT_EMPTY_PATH));
    res("linkat-empty-no-flag", linkat(fd, "", AT_FDCWD, "k5", 0));
    close(fd);
    exists("after-k", "k");
    exists("after-k3", "k3");
    exists("after-k4", "k4");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2)
        return 2;
    if (!strcmp(argv[1], "unix"))
        return cmd_unix(argc, argv);
    if (!strcmp(argv[1], "peercred"))
        return cmd_peercred(argc, argv);
    if (!strcmp(argv[1], "devices"))
        return cmd_devices(argc, argv);
    if (!strcmp(argv[1], "caps"))
        return cmd_caps(argc, argv);
    if (!strcmp(argv[1], "tree"))
        return cmd_tree(argc, argv);
    if (!strcmp(argv[1], "meta"))
        return cmd_meta(argc, argv);
    if (!strcmp(argv[1], "exitwhileopening"))
        return cmd_exitwhileopening(argc, argv);
    if (!strcmp(argv[1], "fill"))
        return cmd_fill(argc, argv);
    if (!strcmp(argv[1], "manyfiles"))
        return cmd_manyfiles(argc, argv);
    if (!strcmp(argv[1], "bindrace"))
        return cmd_bindrace(argc, argv);
    if (!strcmp(argv[1], "xattrrace"))
        return cmd_xattrrace(argc, argv);
    if (!strcmp(argv[1], "exact"))
        return cmd_exact(argc, argv);
    return 2;
}
