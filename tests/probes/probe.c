/*
 * probe: a static multi-call test tool run inside cordon containers.
 *
 * Build: gcc -static -O2 -pthread -o probe probe.c   (see build.sh)
 *
 * Every subcommand prints ONE machine-readable line to stdout. Syscall results
 * are printed as
 *     ok <retval>          on success
 *     err <ERRNO_NAME>     on failure (e.g. "err EPERM"; unknown: "errno<N>")
 * and the exit status is 0 unless a subcommand documents otherwise. Usage
 * errors print "usage: ..." to stderr and exit 2. Diagnostics that are not the
 * result go to stderr.
 *
 * x86_64 only (int80 / x32 use inline assembly).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef __x86_64__
#error "probe.c targets x86_64 (int80/x32 subcommands use x86 inline asm)"
#endif

#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef CLONE_NEWUSER
#define CLONE_NEWUSER 0x10000000
#endif
#ifndef AF_NETLINK
#define AF_NETLINK 16
#endif
#ifndef AF_PACKET
#define AF_PACKET 17
#endif

#define X32_SYSCALL_BIT 0x40000000L

static const char *prog = "probe";

/* ------------------------------------------------------------------------ */
/* errno names                                                              */
/* ------------------------------------------------------------------------ */

struct errname {
    int num;
    const char *name;
};

/* Aliases (EWOULDBLOCK == EAGAIN, ENOTSUP == EOPNOTSUPP, EDEADLOCK ==
 * EDEADLK) share a value on Linux; the first entry wins. */
static const struct errname errnames[] = {
    {EPERM, "EPERM"},
    {ENOENT, "ENOENT"},
    {ESRCH, "ESRCH"},
    {EINTR, "EINTR"},
    {EIO, "EIO"},
    {ENXIO, "ENXIO"},
    {E2BIG, "E2BIG"},
    {ENOEXEC, "ENOEXEC"},
    {EBADF, "EBADF"},
    {ECHILD, "ECHILD"},
    {EAGAIN, "EAGAIN"},
    {ENOMEM, "ENOMEM"},
    {EACCES, "EACCES"},
    {EFAULT, "EFAULT"},
    {ENOTBLK, "ENOTBLK"},
    {EBUSY, "EBUSY"},
    {EEXIST, "EEXIST"},
    {EXDEV, "EXDEV"},
    {ENODEV, "ENODEV"},
    {ENOTDIR, "ENOTDIR"},
    {EISDIR, "EISDIR"},
    {EINVAL, "EINVAL"},
    {ENFILE, "ENFILE"},
    {EMFILE, "EMFILE"},
    {ENOTTY, "ENOTTY"},
    {ETXTBSY, "ETXTBSY"},
    {EFBIG, "EFBIG"},
    {ENOSPC, "ENOSPC"},
    {ESPIPE, "ESPIPE"},
    {EROFS, "EROFS"},
    {EMLINK, "EMLINK"},
    {EPIPE, "EPIPE"},
    {EDOM, "EDOM"},
    {ERANGE, "ERANGE"},
    {EDEADLK, "EDEADLK"},
    {ENAMETOOLONG, "ENAMETOOLONG"},
    {ENOLCK, "ENOLCK"},
    {ENOSYS, "ENOSYS"},
    {ENOTEMPTY, "ENOTEMPTY"},
    {ELOOP, "ELOOP"},
    {ENOMSG, "ENOMSG"},
    {EIDRM, "EIDRM"},
    {ENODATA, "ENODATA"},
    {ETIME, "ETIME"},
    {ENOLINK, "ENOLINK"},
    {EPROTO, "EPROTO"},
    {EBADMSG, "EBADMSG"},
    {EOVERFLOW, "EOVERFLOW"},
    {EILSEQ, "EILSEQ"},
    {EUSERS, "EUSERS"},
    {ENOTSOCK, "ENOTSOCK"},
    {EDESTADDRREQ, "EDESTADDRREQ"},
    {EMSGSIZE, "EMSGSIZE"},
    {EPROTOTYPE, "EPROTOTYPE"},
    {ENOPROTOOPT, "ENOPROTOOPT"},
    {EPROTONOSUPPORT, "EPROTONOSUPPORT"},
    {ESOCKTNOSUPPORT, "ESOCKTNOSUPPORT"},
    {EOPNOTSUPP, "EOPNOTSUPP"},
    {ENOTSUP, "ENOTSUP"},
    {EPFNOSUPPORT, "EPFNOSUPPORT"},
    {EAFNOSUPPORT, "EAFNOSUPPORT"},
    {EADDRINUSE, "EADDRINUSE"},
    {EADDRNOTAVAIL, "EADDRNOTAVAIL"},
    {ENETDOWN, "ENETDOWN"},
    {ENETUNREACH, "ENETUNREACH"},
    {ENETRESET, "ENETRESET"},
    {ECONNABORTED, "ECONNABORTED"},
    {ECONNRESET, "ECONNRESET"},
    {ENOBUFS, "ENOBUFS"},
    {EISCONN, "EISCONN"},
    {ENOTCONN, "ENOTCONN"},
    {ESHUTDOWN, "ESHUTDOWN"},
    {ETIMEDOUT, "ETIMEDOUT"},
    {ECONNREFUSED, "ECONNREFUSED"},
    {EHOSTDOWN, "EHOSTDOWN"},
    {EHOSTUNREACH, "EHOSTUNREACH"},
    {EALREADY, "EALREADY"},
    {EINPROGRESS, "EINPROGRESS"},
    {ESTALE, "ESTALE"},
    {EDQUOT, "EDQUOT"},
    {ECANCELED, "ECANCELED"},
    {ENOKEY, "ENOKEY"},
    {EKEYEXPIRED, "EKEYEXPIRED"},
    {EKEYREVOKED, "EKEYREVOKED"},
    {EKEYREJECTED, "EKEYREJECTED"},
    {EOWNERDEAD, "EOWNERDEAD"},
    {ENOTRECOVERABLE, "ENOTRECOVERABLE"},
    {ERFKILL, "ERFKILL"},
    {EHWPOISON, "EHWPOISON"},
};

/* Symbolic name of an errno value; "errno<N>" for values not in the table. */
static const char *errno_name(int e)
{
    static char buf[32];
    for (size_t i = 0; i < sizeof errnames / sizeof errnames[0]; i++)
        if (errnames[i].num == e)
            return errnames[i].name;
    snprintf(buf, sizeof buf, "errno%d", e);
    return buf;
}

/* ------------------------------------------------------------------------ */
/* helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* Print one result line and flush (tests read stdout through pipes). */
static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* "ok <ret>" when ret >= 0, else "err <NAME>" for errno e. Returns 0. */
static int report(long ret, int e)
{
    if (ret < 0)
        out("err %s", errno_name(e));
    else
        out("ok %ld", ret);
    return 0;
}

/* Same, for raw-asm syscalls that return -errno directly. */
static int report_raw(long ret)
{
    if (ret < 0 && ret > -4096)
        out("err %s", errno_name((int)-ret));
    else
        out("ok %ld", ret);
    return 0;
}

static int usage(const char *msg)
{
    fprintf(stderr, "usage: %s %s\n", prog, msg);
    return 2;
}

/* Integer argument: decimal (optionally negative) or 0x-prefixed hex. */
static int parse_long(const char *s, long *v)
{
    char *end;
    int neg = 0;
    const char *p = s;
    unsigned long u;

    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (*p == '\0')
        return -1;
    errno = 0;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        u = strtoul(p + 2, &end, 16);
    else
        u = strtoul(p, &end, 10);
    if (errno || *end != '\0' || end == p)
        return -1;
    *v = neg ? -(long)u : (long)u;
    return 0;
}

/* Parse argv[from..argc) into a[0..max) (zero-filled). -1 on bad input. */
static int parse_args(int argc, char **argv, int from, long *a, int max)
{
    for (int i = 0; i < max; i++)
        a[i] = 0;
    if (argc - from > max)
        return -1;
    for (int i = from; i < argc; i++)
        if (parse_long(argv[i], &a[i - from]) < 0)
            return -1;
    return 0;
}

/* Parse an IPv4 or IPv6 address + port into ss. -1 if not an address. */
static int parse_sockaddr(const char *ip, const char *port_s,
                          struct sockaddr_storage *ss, socklen_t *len)
{
    long port;
    memset(ss, 0, sizeof *ss);
    if (parse_long(port_s, &port) < 0 || port < 0 || port > 65535)
        return -1;
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, ip, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        *len = sizeof *sin;
        return 0;
    }
    if (inet_pton(AF_INET6, ip, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
        *len = sizeof *sin6;
        return 0;
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* subcommands                                                              */
/* ------------------------------------------------------------------------ */

/* syscall NR [A0..A5]: raw syscall(2) through glibc's syscall(). */
static int cmd_syscall(int argc, char **argv)
{
    long nr, a[6];
    if (argc < 3 || parse_long(argv[2], &nr) < 0 || parse_args(argc, argv, 3, a, 6) < 0)
        return usage("syscall NR [A0 [A1 ... A5]]");
    errno = 0;
    long r = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    return report(r, errno);
}

static sigjmp_buf segv_jmp;
static void on_segv(int sig)
{
    (void)sig;
    siglongjmp(segv_jmp, 1);
}

/* int80 NR [A0..A2]: i386 entry point (int $0x80); eax=NR, ebx/ecx/edx args.
 * If the kernel lacks IA32 emulation, int $0x80 faults: prints "err SIGSEGV"
 * and exits 1. */
static int cmd_int80(int argc, char **argv)
{
    long nr, a[3];
    if (argc < 3 || parse_long(argv[2], &nr) < 0 || parse_args(argc, argv, 3, a, 3) < 0)
        return usage("int80 NR [A0 [A1 [A2]]]");
    struct sigaction sa = {.sa_handler = on_segv};
    sigaction(SIGSEGV, &sa, NULL);
    if (sigsetjmp(segv_jmp, 1)) {
        out("err SIGSEGV");
        return 1;
    }
    long ret;
    __asm__ volatile("int $0x80"
                     : "=a"(ret)
                     : "a"(nr), "b"(a[0]), "c"(a[1]), "d"(a[2])
                     : "r8", "r9", "r10", "r11", "memory", "cc");
    /* The 32-bit ABI returns a 32-bit value in eax. */
    return report_raw((long)(int)ret);
}

/* x32 NR [A0..A5]: 64-bit `syscall` instruction with the x32 bit
 * (0x40000000) set in the number. Inline asm so glibc cannot interfere. */
static int cmd_x32(int argc, char **argv)
{
    long nr, a[6];
    if (argc < 3 || parse_long(argv[2], &nr) < 0 || parse_args(argc, argv, 3, a, 6) < 0)
        return usage("x32 NR [A0 ... A5]");
    register long rdi __asm__("rdi") = a[0];
    register long rsi __asm__("rsi") = a[1];
    register long rdx __asm__("rdx") = a[2];
    register long r10 __asm__("r10") = a[3];
    register long r8 __asm__("r8") = a[4];
    register long r9 __asm__("r9") = a[5];
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr | X32_SYSCALL_BIT), "r"(rdi), "r"(rsi), "r"(rdx),
                       "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory", "cc");
    return report_raw(ret);
}

/* uname: "sysname|release|version|machine|nodename". */
static int cmd_uname(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct utsname u;
    if (uname(&u) < 0)
        return report(-1, errno);
    out("%s|%s|%s|%s|%s", u.sysname, u.release, u.version, u.machine, u.nodename);
    return 0;
}

/* domainname: the NIS domain name uname(2) reports. */
static int cmd_domainname(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct utsname u;
    if (uname(&u) < 0)
        return report(-1, errno);
    out("%s", u.domainname);
    return 0;
}

/* fds: every open fd, one "N TARGET" line each (found with fcntl, so the
 * probe opens nothing itself). */
static int cmd_fds(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    for (int fd = 0; fd < 4096; fd++) {
        if (fcntl(fd, F_GETFD) < 0)
            continue;
        char link[64], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        target[n < 0 ? 0 : n] = 0;
        out("%d %s", fd, target);
    }
    return 0;
}

/* sysinfo: "totalram=<bytes> uptime=<s> procs=<n>". */
static int cmd_sysinfo(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct sysinfo si;
    if (sysinfo(&si) < 0)
        return report(-1, errno);
    unsigned long long unit = si.mem_unit ? si.mem_unit : 1;
    out("totalram=%llu uptime=%ld procs=%u", (unsigned long long)si.totalram * unit,
        si.uptime, (unsigned)si.procs);
    return 0;
}

/* Open flags by name; "rdonly|wronly|..." (',' also accepted). */
static int parse_open_flags(const char *s, int *flags)
{
    static const struct {
        const char *name;
        int flag;
    } names[] = {
        {"rdonly", O_RDONLY},       {"wronly", O_WRONLY}, {"rdwr", O_RDWR},
        {"creat", O_CREAT},         {"trunc", O_TRUNC},   {"excl", O_EXCL},
        {"append", O_APPEND},       {"directory", O_DIRECTORY},
        {"nofollow", O_NOFOLLOW},   {"cloexec", O_CLOEXEC},
        {"path", O_PATH},           {"nonblock", O_NONBLOCK},
        {"tmpfile", O_TMPFILE},     {"noatime", O_NOATIME},
    };
    char buf[512];
    *flags = 0;
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    for (char *save, *tok = strtok_r(buf, "|,", &save); tok; tok = strtok_r(NULL, "|,", &save)) {
        size_t i;
        for (i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strcasecmp(tok, names[i].name) == 0 ||
                (strncasecmp(tok, "O_", 2) == 0 && strcasecmp(tok + 2, names[i].name) == 0))
                break;
        if (i == sizeof names / sizeof names[0]) {
            long v;
            if (parse_long(tok, &v) < 0)
                return -1;
            *flags |= (int)v;
        } else {
            *flags |= names[i].flag;
        }
    }
    return 0;
}

/* open PATH [FLAGS]: openat(AT_FDCWD, PATH, FLAGS, 0644) -> "ok <fd>". */
static int cmd_open(int argc, char **argv)
{
    int flags = O_RDONLY;
    if (argc < 3 || argc > 4 || (argc == 4 && parse_open_flags(argv[3], &flags) < 0))
        return usage("open PATH [rdonly|wronly|rdwr|creat|trunc|excl|append|directory|nofollow|cloexec]");
    long fd = openat(AT_FDCWD, argv[2], flags, 0644);
    return report(fd, errno);
}

/* read PATH: "ok <first line of the file, without newline>" (may be empty). */
static int cmd_read(int argc, char **argv)
{
    if (argc != 3)
        return usage("read PATH");
    int fd = openat(AT_FDCWD, argv[2], O_RDONLY);
    if (fd < 0)
        return report(-1, errno);
    char buf[4096];
    size_t n = 0;
    /* Read until newline, EOF or buffer full. */
    while (n < sizeof buf - 1) {
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r < 0) {
            int e = errno;
            close(fd);
            return report(-1, e);
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (memchr(buf, '\n', n))
            break;
    }
    close(fd);
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    out("ok %s", buf);
    return 0;
}

/* openat DIRPATH RELPATH: dirfd = open(DIRPATH, O_DIRECTORY); result of
 * openat(dirfd, RELPATH, O_RDONLY). If DIRPATH itself cannot be opened:
 * "err <NAME>", a note on stderr, exit 1. */
static int cmd_openat(int argc, char **argv)
{
    if (argc != 4)
        return usage("openat DIRPATH RELPATH");
    int dfd = openat(AT_FDCWD, argv[2], O_RDONLY | O_DIRECTORY);
    if (dfd < 0) {
        int e = errno;
        fprintf(stderr, "%s: cannot open directory %s: %s\n", prog, argv[2], strerror(e));
        report(-1, e);
        return 1;
    }
    long fd = openat(dfd, argv[3], O_RDONLY);
    return report(fd, errno);
}

/* write PATH TEXT: O_WRONLY|O_CREAT|O_TRUNC 0644, write TEXT -> "ok <bytes>". */
static int cmd_write(int argc, char **argv)
{
    if (argc != 4)
        return usage("write PATH TEXT");
    int fd = openat(AT_FDCWD, argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return report(-1, errno);
    long n = write(fd, argv[3], strlen(argv[3]));
    int e = errno;
    if (n >= 0 && close(fd) < 0)
        return report(-1, errno);
    return report(n, e);
}

/* stat PATH: raw newfstatat(AT_FDCWD, PATH, &st, 0) -> "ok <size>". */
static int cmd_stat(int argc, char **argv)
{
    if (argc != 3)
        return usage("stat PATH");
    struct stat st; /* glibc's x86_64 struct stat matches the kernel's */
    long r = syscall(SYS_newfstatat, AT_FDCWD, argv[2], &st, 0);
    if (r < 0)
        return report(-1, errno);
    out("ok %lld", (long long)st.st_size);
    return 0;
}

/* connect IP PORT: TCP connect, non-blocking + poll, 2 s timeout -> "ok". */
static int cmd_connect(int argc, char **argv)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (argc != 4 || parse_sockaddr(argv[2], argv[3], &ss, &len) < 0)
        return usage("connect IP PORT");
    int s = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0)
        return report(-1, errno);
    if (connect(s, (struct sockaddr *)&ss, len) == 0) {
        out("ok");
        return 0;
    }
    if (errno != EINPROGRESS)
        return report(-1, errno);
    struct pollfd p = {.fd = s, .events = POLLOUT};
    int pr;
    do
        pr = poll(&p, 1, 2000);
    while (pr < 0 && errno == EINTR);
    if (pr < 0)
        return report(-1, errno);
    if (pr == 0)
        return report(-1, ETIMEDOUT);
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
        return report(-1, errno);
    if (soerr)
        return report(-1, soerr);
    out("ok");
    close(s);
    return 0;
}

/* udp IP PORT: unconnected UDP socket, sendto 4 bytes -> "ok 4". */
static int cmd_udp(int argc, char **argv)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (argc != 4 || parse_sockaddr(argv[2], argv[3], &ss, &len) < 0)
        return usage("udp IP PORT");
    int s = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return report(-1, errno);
    long n = sendto(s, "ping", 4, 0, (struct sockaddr *)&ss, len);
    return report(n, errno);
}

/* udpmsg IP PORT: like udp, but sendmsg with msg_name set -> "ok 4". */
static int cmd_udpmsg(int argc, char **argv)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (argc != 4 || parse_sockaddr(argv[2], argv[3], &ss, &len) < 0)
        return usage("udpmsg IP PORT");
    int s = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return report(-1, errno);
    char data[4] = {'p', 'i', 'n', 'g'};
    struct iovec iov = {.iov_base = data, .iov_len = sizeof data};
    struct msghdr msg = {
        .msg_name = &ss, .msg_namelen = len, .msg_iov = &iov, .msg_iovlen = 1};
    long n = sendmsg(s, &msg, 0);
    return report(n, errno);
}

/* listen PORT [COUNT]: TCP server on 127.0.0.1:PORT (backlog 1024) that
 * prints "listening" once bound, then accepts and closes connections
 * forever (or until COUNT connections, if given and > 0). On setup failure
 * prints "err <NAME>" and exits 1. */
static int cmd_listen(int argc, char **argv)
{
    long port, count = 0;
    if (argc < 3 || argc > 4 || parse_long(argv[2], &port) < 0 || port < 0 || port > 65535 ||
        (argc == 4 && parse_long(argv[3], &count) < 0))
        return usage("listen PORT [COUNT]");
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        report(-1, errno);
        return 1;
    }
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&sin, sizeof sin) < 0 || listen(s, 1024) < 0) {
        report(-1, errno);
        return 1;
    }
    out("listening");
    for (long accepted = 0; count <= 0 || accepted < count;) {
        int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            fprintf(stderr, "%s: accept: %s\n", prog, strerror(errno));
            continue;
        }
        close(c);
        accepted++;
    }
    return 0;
}

/* race-open state: a path buffer flipped by a second thread. */
static char race_buf[PATH_MAX];
static const char *race_paths[2];
static atomic_int race_stop;

static void *race_flipper(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&race_stop, memory_order_relaxed)) {
        strcpy(race_buf, race_paths[1]);
        /* Compiler barrier: keep both copies (no dead-store elimination). */
        __asm__ volatile("" ::: "memory");
        strcpy(race_buf, race_paths[0]);
        __asm__ volatile("" ::: "memory");
    }
    return NULL;
}

/* race-open ALLOWED DENIED N: TOCTOU test for path-checking supervisors.
 * A thread flips a shared path buffer between ALLOWED and DENIED while the
 * main thread open()s it N times; each successful open is fstat'ed and its
 * inode compared with ALLOWED's. Prints
 *   opened_denied=<successful opens of something other than ALLOWED>
 *   opened=<successful opens of ALLOWED> denied=<failed opens>
 * (opened_denied + opened + denied == N) and exits 1 if opened_denied > 0. */
static int cmd_race_open(int argc, char **argv)
{
    long n;
    if (argc != 5 || parse_long(argv[4], &n) < 0 || n < 0)
        return usage("race-open ALLOWED DENIED N");
    if (strlen(argv[2]) >= PATH_MAX || strlen(argv[3]) >= PATH_MAX)
        return usage("race-open ALLOWED DENIED N (paths too long)");
    struct stat allowed;
    if (stat(argv[2], &allowed) < 0) {
        fprintf(stderr, "%s: race-open: cannot stat ALLOWED %s: %s\n", prog, argv[2],
                strerror(errno));
        return 2;
    }
    race_paths[0] = argv[2];
    race_paths[1] = argv[3];
    strcpy(race_buf, argv[2]);

    pthread_t t;
    int e = pthread_create(&t, NULL, race_flipper, NULL);
    if (e) {
        fprintf(stderr, "%s: pthread_create: %s\n", prog, strerror(e));
        return 1;
    }
    long opened_denied = 0, opened = 0, denied = 0;
    for (long i = 0; i < n; i++) {
        int fd = open(race_buf, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            denied++;
            continue;
        }
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_ino == allowed.st_ino && st.st_dev == allowed.st_dev)
            opened++;
        else
            opened_denied++;
        close(fd);
    }
    atomic_store(&race_stop, 1);
    pthread_join(t, NULL);
    out("opened_denied=%ld opened=%ld denied=%ld", opened_denied, opened, denied);
    return opened_denied > 0 ? 1 : 0;
}

/* threads state */
static long threads_iters;
static atomic_long threads_ok;
static atomic_long threads_failed;
static atomic_int threads_first_err;

static void threads_fail(int e)
{
    int zero = 0;
    atomic_fetch_add(&threads_failed, 1);
    atomic_compare_exchange_strong(&threads_first_err, &zero, e ? e : EIO);
}

static void *threads_worker(void *arg)
{
    (void)arg;
    for (long i = 0; i < threads_iters; i++) {
        struct utsname u;
        char buf[256];
        if (uname(&u) < 0) {
            threads_fail(errno);
            continue;
        }
        int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            threads_fail(errno);
            continue;
        }
        ssize_t r = read(fd, buf, sizeof buf);
        int e = errno;
        if (close(fd) < 0 && r >= 0) {
            threads_fail(errno);
            continue;
        }
        if (r < 0) {
            threads_fail(e);
            continue;
        }
        atomic_fetch_add(&threads_ok, 1);
    }
    return NULL;
}

/* threads N M: N threads x M iterations of uname + open/read/close of
 * /etc/hostname. Prints "ok <successful iterations>"; on any failure prints
 * "err <FIRST_ERRNO> ok=<n> failed=<n>" and exits 1. */
static int cmd_threads(int argc, char **argv)
{
    long nthreads, iters;
    if (argc != 4 || parse_long(argv[2], &nthreads) < 0 || parse_long(argv[3], &iters) < 0 ||
        nthreads < 1 || nthreads > 4096 || iters < 0)
        return usage("threads N M");
    threads_iters = iters;
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    if (!t)
        return report(-1, ENOMEM), 1;
    long started = 0;
    for (long i = 0; i < nthreads; i++) {
        int e = pthread_create(&t[i], NULL, threads_worker, NULL);
        if (e) {
            fprintf(stderr, "%s: pthread_create: %s\n", prog, strerror(e));
            threads_fail(e);
            break;
        }
        started++;
    }
    for (long i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    free(t);
    long ok = atomic_load(&threads_ok), failed = atomic_load(&threads_failed);
    if (failed) {
        out("err %s ok=%ld failed=%ld", errno_name(atomic_load(&threads_first_err)), ok, failed);
        return 1;
    }
    out("ok %ld", ok);
    return 0;
}

/* unshare-user: unshare(CLONE_NEWUSER) -> "ok 0". */
static int cmd_unshare_user(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    long r = unshare(CLONE_NEWUSER);
    return report(r, errno);
}

/* Reap a child created by clone/clone3 (which then exits immediately). */
static void reap(long pid)
{
    int st;
    while (waitpid((pid_t)pid, &st, __WALL) < 0 && errno == EINTR)
        ;
}

/* clone-newuser: raw clone(CLONE_NEWUSER|SIGCHLD) (fork-like, child
 * _exit(0)s) -> "ok <child pid>". */
static int cmd_clone_newuser(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    /* x86_64 clone(flags, newsp, parent_tid, child_tid, tls) */
    long r = syscall(SYS_clone, (long)(CLONE_NEWUSER | SIGCHLD), 0L, 0L, 0L, 0L);
    if (r == 0)
        _exit(0);
    int e = errno;
    if (r > 0)
        reap(r);
    return report(r, e);
}

/* Kernel's struct clone_args (CLONE_ARGS_SIZE_VER0 = 64 bytes). */
struct probe_clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

/* clone3-newuser: clone3({flags=CLONE_NEWUSER, exit_signal=SIGCHLD}) ->
 * "ok <child pid>". */
static int cmd_clone3_newuser(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct probe_clone_args ca;
    memset(&ca, 0, sizeof ca);
    ca.flags = CLONE_NEWUSER;
    ca.exit_signal = SIGCHLD;
    long r = syscall(SYS_clone3, &ca, sizeof ca);
    if (r == 0)
        _exit(0);
    int e = errno;
    if (r > 0)
        reap(r);
    return report(r, e);
}

/* mount: mount("none", "/tmp", "tmpfs", 0, NULL) -> "ok 0". */
static int cmd_mount(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    long r = mount("none", "/tmp", "tmpfs", 0, NULL);
    return report(r, errno);
}

struct symval {
    const char *name;
    long value;
};

/* Look s up in a symbol table (case-insensitive), else parse as a number. */
static int sym_or_num(const char *s, const struct symval *tab, size_t n, long *v)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(s, tab[i].name) == 0) {
            *v = tab[i].value;
            return 0;
        }
    return parse_long(s, v);
}

/* socket FAMILY TYPE [PROTO]: socket(2) -> "ok <fd>". Symbolic or numeric. */
static int cmd_socket(int argc, char **argv)
{
    static const struct symval families[] = {
        {"inet", AF_INET},       {"inet6", AF_INET6},   {"unix", AF_UNIX},
        {"local", AF_UNIX},      {"netlink", AF_NETLINK}, {"packet", AF_PACKET},
        {"af_inet", AF_INET},    {"af_inet6", AF_INET6}, {"af_unix", AF_UNIX},
        {"af_netlink", AF_NETLINK}, {"af_packet", AF_PACKET},
    };
    static const struct symval types[] = {
        {"stream", SOCK_STREAM}, {"dgram", SOCK_DGRAM},       {"raw", SOCK_RAW},
        {"seqpacket", SOCK_SEQPACKET}, {"sock_stream", SOCK_STREAM},
        {"sock_dgram", SOCK_DGRAM},    {"sock_raw", SOCK_RAW},
    };
    static const struct symval protos[] = {
        {"ip", IPPROTO_IP},     {"tcp", IPPROTO_TCP},   {"udp", IPPROTO_UDP},
        {"icmp", IPPROTO_ICMP}, {"icmpv6", IPPROTO_ICMPV6}, {"raw", IPPROTO_RAW},
    };
    long fam, type, proto = 0;
    if (argc < 4 || argc > 5 ||
        sym_or_num(argv[2], families, sizeof families / sizeof families[0], &fam) < 0 ||
        sym_or_num(argv[3], types, sizeof types / sizeof types[0], &type) < 0 ||
        (argc == 5 && sym_or_num(argv[4], protos, sizeof protos / sizeof protos[0], &proto) < 0))
        return usage("socket inet|inet6|unix|netlink|packet|N stream|dgram|raw|N [PROTO]");
    long fd = socket((int)fam, (int)type, (int)proto);
    return report(fd, errno);
}

/* ptrace-parent: ptrace(PTRACE_ATTACH, getppid()) -> "ok 0"; on success the
 * parent is waited for and detached again so it keeps running. */
static int cmd_ptrace_parent(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    pid_t pp = getppid();
    long r = ptrace(PTRACE_ATTACH, pp, NULL, NULL);
    int e = errno;
    if (r == 0) {
        int st;
        while (waitpid(pp, &st, __WALL) < 0 && errno == EINTR)
            ;
        ptrace(PTRACE_DETACH, pp, NULL, NULL);
    }
    return report(r, e);
}

/* sleep SECONDS (fractions allowed), then print "ok". */
static int cmd_sleep(int argc, char **argv)
{
    char *end;
    double s;
    if (argc != 3 || (s = strtod(argv[2], &end), *end != '\0' || end == argv[2]) || s < 0)
        return usage("sleep SECONDS");
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    out("ok");
    return 0;
}

/* exit CODE: exit with CODE, no output. */
static int cmd_exit(int argc, char **argv)
{
    long code;
    if (argc != 3 || parse_long(argv[2], &code) < 0)
        return usage("exit CODE");
    fflush(stdout);
    _exit((int)code);
}

/* kill-self SIG: raise(SIG) (number, or name like TERM / SIGKILL). If the
 * process survives (signal ignored/handled/stopped and continued): "ok". */
static int cmd_kill_self(int argc, char **argv)
{
    static const struct symval sigs[] = {
        {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ILL", SIGILL},
        {"TRAP", SIGTRAP}, {"ABRT", SIGABRT}, {"BUS", SIGBUS},   {"FPE", SIGFPE},
        {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},
        {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"CHLD", SIGCHLD},
        {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"SYS", SIGSYS},
    };
    long sig;
    const char *name = argc == 3 ? argv[2] : "";
    if (strncasecmp(name, "SIG", 3) == 0)
        name += 3;
    if (argc != 3 || sym_or_num(name, sigs, sizeof sigs / sizeof sigs[0], &sig) < 0)
        return usage("kill-self SIG");
    fflush(stdout);
    long r = raise((int)sig);
    if (r != 0)
        return report(-1, errno);
    out("ok");
    return 0;
}

/* caps: "capeff=<hex>" from the CapEff line of /proc/self/status. */
static int cmd_caps(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return report(-1, errno);
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char hex[64];
        if (sscanf(line, "CapEff: %63s", hex) == 1) {
            fclose(f);
            out("capeff=%s", hex);
            return 0;
        }
    }
    fclose(f);
    fprintf(stderr, "%s: no CapEff line in /proc/self/status\n", prog);
    return report(-1, ENOENT), 1;
}

/* ------------------------------------------------------------------------ */
/* load and races on the supervisor                                        */
/* ------------------------------------------------------------------------ */

/* One round of intercepted calls: uname, then open + close of /etc/hostname.
 * Returns 0, or the errno of the first call that failed. */
static int intercepted_round(void)
{
    struct utsname u;
    if (uname(&u) < 0)
        return errno ? errno : EIO;
    int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno ? errno : EIO;
    close(fd);
    return 0;
}

/* Threads with small stacks: hundreds of them fit any memory limit. */
static int start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 128 * 1024);
    int e = pthread_create(t, &a, fn, arg);
    pthread_attr_destroy(&a);
    return e;
}

static atomic_long sig_handled;

static void on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&sig_handled, 1);
}

/* SIGUSR1 -> on_usr1, with SA_RESTART: interrupted syscalls restart. */
static void install_usr1(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* The state letter of thread `tid` of this process (/proc/self/task/TID/stat),
 * or '?' if it cannot be read. */
static char thread_state(pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return '?';
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return '?';
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

static atomic_long flood_calls;
static atomic_long flood_failed;
static atomic_long flood_started;

static void *flood_worker(void *arg)
{
    (void)arg;
    for (int first = 1;; first = 0) {
        if (intercepted_round() == 0)
            atomic_fetch_add(&flood_calls, 1);
        else
            atomic_fetch_add(&flood_failed, 1);
        if (first)
            atomic_fetch_add(&flood_started, 1);
    }
    return NULL;
}

/* flood N: N threads repeat intercepted_round() (uname, open + close of
 * /etc/hostname) until the process is killed. Prints "flooding" once every
 * thread has finished a round, then "rounds=<n> failed=<n>" every 100 ms. */
static int cmd_flood(int argc, char **argv)
{
    long n;
    if (argc != 3 || parse_long(argv[2], &n) < 0 || n < 1 || n > 4096)
        return usage("flood N");
    for (long i = 0; i < n; i++) {
        pthread_t t;
        int e = start_thread(&t, flood_worker, NULL);
        if (e) {
            fprintf(stderr, "%s: pthread_create: %s\n", prog, strerror(e));
            return report(-1, e), 1;
        }
    }
    while (atomic_load(&flood_started) < n)
        sleep_ms(10);
    out("flooding");
    for (;;) {
        sleep_ms(100);
        out("rounds=%ld failed=%ld", atomic_load(&flood_calls), atomic_load(&flood_failed));
    }
}

static const char *fifo_path;
static atomic_long fifo_ok;
static atomic_long fifo_eagain;
static atomic_long fifo_other;

static void *fifo_reader(void *arg)
{
    (void)arg;
    int fd = open(fifo_path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        atomic_fetch_add(&fifo_ok, 1);
    } else if (errno == EAGAIN) {
        atomic_fetch_add(&fifo_eagain, 1);
    } else {
        atomic_fetch_add(&fifo_other, 1);
    }
    return NULL;
}

/* fifo-flood PATH N: N threads open the FIFO PATH for reading at once (each
 * open waits for a writer). Whenever the counts change, prints
 * "ok=<opened> eagain=<n> other=<n>"; exits once every thread has returned,
 * with 1 if any open failed with something other than EAGAIN. */
static int cmd_fifo_flood(int argc, char **argv)
{
    long n;
    if (argc != 4 || parse_long(argv[3], &n) < 0 || n < 1 || n > 4096)
        return usage("fifo-flood PATH N");
    fifo_path = argv[2];
    pthread_t *t = calloc((size_t)n, sizeof *t);
    if (!t)
        return report(-1, ENOMEM), 1;
    for (long i = 0; i < n; i++) {
        int e = start_thread(&t[i], fifo_reader, NULL);
        if (e) {
            fprintf(stderr, "%s: pthread_create: %s\n", prog, strerror(e));
            return report(-1, e), 1;
        }
    }
    long last = -1;
    for (;;) {
        long ok = atomic_load(&fifo_ok), again = atomic_load(&fifo_eagain),
             other = atomic_load(&fifo_other);
        if (ok + again + other != last) {
            out("ok=%ld eagain=%ld other=%ld", ok, again, other);
            last = ok + again + other;
        }
        if (last == n)
            break;
        sleep_ms(10);
    }
    for (long i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    free(t);
    return atomic_load(&fifo_other) ? 1 : 0;
}

/* The thread that leaves a call pending: open(fifo_path, O_RDONLY). */
static atomic_int pending_tid;
static atomic_int pending_done;
static atomic_int pending_errno;

static void *pending_reader(void *arg)
{
    (void)arg;
    atomic_store(&pending_tid, (int)syscall(SYS_gettid));
    int fd = open(fifo_path, O_RDONLY | O_CLOEXEC);
    atomic_store(&pending_errno, fd < 0 ? errno : 0);
    atomic_store(&pending_done, 1);
    return NULL;
}

/* Starts pending_reader and signals it (SIGUSR1, SA_RESTART) until the
 * supervisor has received its open: a call it has received sleeps killable
 * once a signal woke it ("D" in /proc). Returns 0, or an errno: the open
 * returned (its errno, or EEXIST if it succeeded), or ETIMEDOUT after 10 s. */
static int start_pending(pthread_t *t)
{
    install_usr1();
    int e = start_thread(t, pending_reader, NULL);
    if (e)
        return e;
    while (!atomic_load(&pending_tid))
        sleep_ms(1);
    pid_t tid = atomic_load(&pending_tid);
    for (int i = 0; i < 10000; i++) {
        if (atomic_load(&pending_done))
            return atomic_load(&pending_errno) ? atomic_load(&pending_errno) : EEXIST;
        pthread_kill(*t, SIGUSR1);
        if (thread_state(tid) == 'D')
            return 0;
        sleep_ms(1);
    }
    return ETIMEDOUT;
}

/* One round of `pending`: leaves an open of fifo_path pending in the
 * supervisor (see start_pending), gives its handler time to start the open
 * (20 ms), and checks that a forked child still gets an intercepted uname
 * and open answered. Returns 0, or prints "err <ERRNO> round <i>" and
 * returns 1. */
static int pending_round(long round)
{
    pthread_t t;
    int e = start_pending(&t);
    if (e) {
        out("err %s round %ld", errno_name(e), round);
        return 1;
    }
    sleep_ms(20);
    pid_t child = fork();
    if (child == 0)
        _exit(intercepted_round() ? 1 : 0);
    int st = 0;
    while (child > 0 && waitpid(child, &st, 0) < 0 && errno == EINTR)
        ;
    if (child < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        out("err %s round %ld (forked child)", child < 0 ? errno_name(errno) : "EIO", round);
        return 1;
    }
    return 0;
}

/* pending FIFO exec|exit N: N rounds, each leaving an open of FIFO (which no
 * writer ever opens) pending in the supervisor and going away under it:
 * `exec` re-executes `probe pending FIFO exec N-1` (the exec kills the
 * waiting thread); `exit` runs each round in a forked child that exits with
 * the open still pending. Prints "ok" after the last round; "err <ERRNO>
 * round <i>" and exit 1 if a pending open returned (EAGAIN: the supervisor
 * ran out of blocked-call slots) or a forked child failed. */
static int cmd_pending(int argc, char **argv)
{
    long n;
    if (argc != 5 || (strcmp(argv[3], "exec") && strcmp(argv[3], "exit")) ||
        parse_long(argv[4], &n) < 0 || n < 0)
        return usage("pending FIFO exec|exit N");
    fifo_path = argv[2];
    if (strcmp(argv[3], "exit") == 0) {
        for (long i = n; i > 0; i--) {
            fflush(stdout);
            pid_t c = fork();
            if (c == 0)
                _exit(pending_round(i)); /* the pending open dies with the child */
            int st = 0;
            while (c > 0 && waitpid(c, &st, 0) < 0 && errno == EINTR)
                ;
            if (c < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return 1;
        }
        out("ok");
        return 0;
    }
    if (n == 0) {
        out("ok");
        return 0;
    }
    if (pending_round(n))
        return 1;
    char next[32];
    snprintf(next, sizeof next, "%ld", n - 1);
    char *args[] = {argv[0], argv[1], argv[2], argv[3], next, NULL};
    fflush(stdout);
    execv("/proc/self/exe", args);
    out("err %s exec", errno_name(errno));
    return 1;
}

/* sig-fifo FIFO K: a thread opens FIFO for reading; the main thread sends it
 * SIGUSR1 (an SA_RESTART handler) until the supervisor has received that
 * open, K more times, then opens FIFO for writing, which completes the
 * reader's open. Prints "ok signals=<handled>", or "err <ERRNO>" (EINTR
 * included) and exits 1 if the reader's open failed. */
static int cmd_sig_fifo(int argc, char **argv)
{
    long k;
    if (argc != 4 || parse_long(argv[3], &k) < 0 || k < 0)
        return usage("sig-fifo FIFO K");
    fifo_path = argv[2];
    pthread_t t;
    int e = start_pending(&t);
    if (e)
        return report(-1, e), 1;
    for (long i = 0; i < k; i++) {
        pthread_kill(t, SIGUSR1);
        sleep_ms(1);
    }
    int w = open(fifo_path, O_WRONLY | O_CLOEXEC);
    if (w < 0) {
        fprintf(stderr, "%s: open %s for writing: %s\n", prog, fifo_path, strerror(errno));
        return report(-1, errno), 1;
    }
    pthread_join(t, NULL);
    close(w);
    e = atomic_load(&pending_errno);
    if (e)
        return report(-1, e), 1;
    out("ok signals=%ld", atomic_load(&sig_handled));
    return 0;
}

/* sig-storm N M: `threads N M` while the main thread sends SIGUSR1 (an
 * SA_RESTART handler) to the workers in turn, 1 ms apart, until they are
 * done. Prints "ok <iterations> signals=<handled>"; on any failed call
 * (EINTR included) "err <FIRST_ERRNO> ok=<n> failed=<n>" and exits 1. */
static int cmd_sig_storm(int argc, char **argv)
{
    long nthreads, iters;
    if (argc != 4 || parse_long(argv[2], &nthreads) < 0 || parse_long(argv[3], &iters) < 0 ||
        nthreads < 1 || nthreads > 4096 || iters < 0)
        return usage("sig-storm N M");
    install_usr1();
    threads_iters = iters;
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    if (!t)
        return report(-1, ENOMEM), 1;
    for (long i = 0; i < nthreads; i++) {
        int e = start_thread(&t[i], threads_worker, NULL);
        if (e) {
            fprintf(stderr, "%s: pthread_create: %s\n", prog, strerror(e));
            return report(-1, e), 1;
        }
    }
    long sent = 0;
    while (atomic_load(&threads_ok) + atomic_load(&threads_failed) < nthreads * iters) {
        pthread_kill(t[sent++ % nthreads], SIGUSR1);
        sleep_ms(1);
    }
    for (long i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    free(t);
    long ok = atomic_load(&threads_ok), failed = atomic_load(&threads_failed);
    if (failed) {
        out("err %s ok=%ld failed=%ld", errno_name(atomic_load(&threads_first_err)), ok, failed);
        return 1;
    }
    out("ok %ld signals=%ld", ok, atomic_load(&sig_handled));
    return 0;
}

/* ------------------------------------------------------------------------ */
/* dispatch                                                                 */
/* ------------------------------------------------------------------------ */

struct subcommand {
    const char *name;
    int (*fn)(int argc, char **argv); /* argv[0]=prog, argv[1]=name */
    const char *args;
};

/* with-listener CMD...: install an allow-all seccomp filter with a notify
 * listener (as another sandbox around cordon would), then exec CMD. A
 * listener already in the chain makes every later NEW_LISTENER fail with
 * EBUSY. Prints nothing itself unless it fails. */
static int cmd_with_listener(int argc, char **argv)
{
    if (argc < 3)
        return usage("with-listener CMD [ARGS...]");
    struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {.len = 1, .filter = &allow};
    long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (fd < 0) {
        report(-1, errno);
        return 1;
    }
    /* The listener is close-on-exec, and a filter's listener only counts
     * while its fd is open: a child keeps it until this process ends. */
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        for (;;)
            pause();
    }
    close((int)fd);
    execvp(argv[2], argv + 2);
    report(-1, errno);
    return 1;
}

static char **thread_exec_argv;

static void *thread_exec_main(void *arg)
{
    (void)arg;
    execvp(thread_exec_argv[0], thread_exec_argv);
    report(-1, errno);
    _exit(1);
}

/* thread-exec CMD...: a second thread execs CMD while the first waits (the
 * kernel ends every other thread and the exec'ing one takes the pid). */
static int cmd_thread_exec(int argc, char **argv)
{
    if (argc < 3)
        return usage("thread-exec CMD [ARGS...]");
    thread_exec_argv = argv + 2;
    pthread_t t;
    if (pthread_create(&t, NULL, thread_exec_main, NULL) != 0)
        return 1;
    for (;;)
        pause();
}

static const struct subcommand subcommands[] = {
    {"syscall", cmd_syscall, "NR [A0 .. A5]"},
    {"int80", cmd_int80, "NR [A0 A1 A2]"},
    {"x32", cmd_x32, "NR [A0 .. A5]"},
    {"uname", cmd_uname, ""},
    {"domainname", cmd_domainname, ""},
    {"fds", cmd_fds, ""},
    {"sysinfo", cmd_sysinfo, ""},
    {"open", cmd_open, "PATH [FLAGS]"},
    {"read", cmd_read, "PATH"},
    {"openat", cmd_openat, "DIRPATH RELPATH"},
    {"write", cmd_write, "PATH TEXT"},
    {"stat", cmd_stat, "PATH"},
    {"connect", cmd_connect, "IP PORT"},
    {"udp", cmd_udp, "IP PORT"},
    {"udpmsg", cmd_udpmsg, "IP PORT"},
    {"listen", cmd_listen, "PORT [COUNT]"},
    {"race-open", cmd_race_open, "ALLOWED DENIED N"},
    {"threads", cmd_threads, "N M"},
    {"unshare-user", cmd_unshare_user, ""},
    {"clone-newuser", cmd_clone_newuser, ""},
    {"clone3-newuser", cmd_clone3_newuser, ""},
    {"mount", cmd_mount, ""},
    {"socket", cmd_socket, "FAMILY TYPE [PROTO]"},
    {"ptrace-parent", cmd_ptrace_parent, ""},
    {"sleep", cmd_sleep, "SECONDS"},
    {"exit", cmd_exit, "CODE"},
    {"kill-self", cmd_kill_self, "SIG"},
    {"caps", cmd_caps, ""},
    {"flood", cmd_flood, "N"},
    {"fifo-flood", cmd_fifo_flood, "PATH N"},
    {"pending", cmd_pending, "FIFO exec|exit N"},
    {"sig-fifo", cmd_sig_fifo, "FIFO K"},
    {"sig-storm", cmd_sig_storm, "N M"},
    {"with-listener", cmd_with_listener, "CMD [ARGS...]"},
    {"thread-exec", cmd_thread_exec, "CMD [ARGS...]"},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s SUBCOMMAND [ARGS...]\nsubcommands:\n", prog);
        for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
            fprintf(stderr, "  %s %s\n", subcommands[i].name, subcommands[i].args);
        return 2;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0)
            return subcommands[i].fn(argc, argv);
    fprintf(stderr, "usage: %s SUBCOMMAND [ARGS...] (unknown subcommand '%s'; run without "
                    "arguments for the list)\n", prog, argv[1]);
    return 2;
}
