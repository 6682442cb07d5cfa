/*
 * loop: cordon-bench's in-container probe (static, x86_64).
 *
 * Build: gcc -static -O2 -Wall -Wextra -o loop loop.c   (cordon-bench does it)
 *
 *   loop SPEC...          run each SPEC, print one result line per SPEC
 *   loop serve-dns SPEC... the same, with a nameserver of its own on
 *                         127.0.0.1:53 (a child answering every A query
 *                         with 127.0.0.1, TTL 300) while the SPECs run
 *   loop time CMD ARG...  run CMD (stdout to /dev/null), print its wall time
 *
 * SPEC is NAME=CALLS or NAME:PATH=CALLS:
 *   getppid=K       getppid(2), never intercepted unless a policy says so
 *   uname=K         uname(2) (emulated by cordon's default policy)
 *   bpf=K           bpf(BPF_PROG_LOAD, NULL, 0) (refused in cordon's BPF filter)
 *   open:PATH=K     openat(AT_FDCWD, PATH, O_RDONLY|O_CLOEXEC) then close
 *                   (close is never intercepted; the pair is timed)
 *   lookup:NAME=K   a DNS lookup as a stub resolver makes it: a UDP socket
 *                   connected to /etc/resolv.conf's first nameserver, one
 *                   A query for NAME, its answer (5 s at most), close
 *                   (ret ENOENT for an answer without an address, ETIMEDOUT)
 *   connect:IP:PORT=K  a TCP socket, connect(2) to IP:PORT, close (to a
 *                   closed port: ret ECONNREFUSED)
 *
 * Each SPEC runs K/10 (at least 1) untimed warm-up calls, then K timed calls,
 * and prints
 *   result NAME calls=K ns=NS_PER_CALL ret=OK|ERRNO_NAME
 * where ret is the outcome of the last call (every call of a SPEC is
 * expected to have the same outcome; a mix prints ret=MIXED).
 *
 * `time` prints   time ns=ELAPSED status=EXIT_STATUS   (status 128+N if
 * killed by signal N) and exits 0 whenever the command could be started.
 *
 * The clock is CLOCK_MONOTONIC through the vDSO: timing makes no syscall.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *errname(int e) {
    switch (e) {
    case 0: return "OK";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case EINVAL: return "EINVAL";
    case ENOSYS: return "ENOSYS";
    case EMFILE: return "EMFILE";
    case EINTR: return "EINTR";
    case E2BIG: return "E2BIG";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ETIMEDOUT: return "ETIMEDOUT";
    default: {
        static char buf[32];
        snprintf(buf, sizeof buf, "errno%d", e);
        return buf;
    }
    }
}

enum kind { K_GETPPID, K_UNAME, K_BPF, K_OPEN, K_LOOKUP, K_CONNECT };

static struct sockaddr_in nameserver, target;
static unsigned char query[300];
static size_t query_len;

/* /etc/resolv.conf's first IPv4 nameserver, port 53. */
static int read_nameserver(void) {
    FILE *f = fopen("/etc/resolv.conf", "r");
    char line[256], addr[64];
    if (!f) return errno;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "nameserver %63s", addr) == 1 && inet_pton(AF_INET, addr, &nameserver.sin_addr) == 1) {
            nameserver.sin_family = AF_INET;
            nameserver.sin_port = htons(53);
            fclose(f);
            return 0;
        }
    }
    fclose(f);
    return ENOENT;
}

/* An A query for NAME (RFC 1035 section 4.1), ID 0x4242, RD set. */
static int make_query(const char *name) {
    unsigned char *q = query;
    memcpy(q, "\x42\x42\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 12);
    q += 12;
    while (*name) {
        const char *dot = strchr(name, '.');
        size_t l = dot ? (size_t)(dot - name) : strlen(name);
        if (l == 0 || l > 63 || (size_t)(q - query) + l + 6 > sizeof query) return EINVAL;
        *q++ = (unsigned char)l;
        memcpy(q, name, l);
        q += l;
        name += l + (dot ? 1 : 0);
    }
    memcpy(q, "\x00\x00\x01\x00\x01", 5);
    query_len = (size_t)(q - query) + 5;
    return 0;
}

static int lookup_once(void) {
    unsigned char buf[1500];
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), e = 0;
    if (fd < 0) return errno;
    if (connect(fd, (struct sockaddr *)&nameserver, sizeof nameserver) < 0 || send(fd, query, query_len, 0) < 0) {
        e = errno;
        close(fd);
        return e;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ssize_t n = poll(&p, 1, 5000) == 1 ? recv(fd, buf, sizeof buf, 0) : -1;
    if (n < 0) e = ETIMEDOUT;
    else if (n < 12 || (buf[3] & 15) != 0 || (buf[6] == 0 && buf[7] == 0)) e = ENOENT;
    close(fd);
    return e;
}

static int connect_once(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), e = 0;
    if (fd < 0) return errno;
    if (connect(fd, (struct sockaddr *)&target, sizeof target) < 0) e = errno;
    close(fd);
    return e;
}

/* The nameserver of `serve-dns`: bound before it returns, answers in a
 * child until killed. Returns the child's pid. */
static pid_t serve_dns(void) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("loop: serve-dns");
        return -1;
    }
    pid_t pid = fork();
    if (pid != 0) {
        close(fd);
        return pid;
    }
    for (;;) {
        unsigned char b[1500];
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(fd, b, sizeof b - 16, 0, (struct sockaddr *)&from, &fl);
        if (n < 17) continue;
        b[2] = 0x81 | (b[2] & 1);
        b[3] = 0x80;
        b[7] = 1; /* one answer; the question stays */
        b[8] = b[9] = b[10] = b[11] = 0;
        size_t end = (size_t)n;
        static const unsigned char rr[] = {0xc0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 127, 0, 0, 1};
        memcpy(b + end, rr, sizeof rr);
        sendto(fd, b, end + sizeof rr, 0, (struct sockaddr *)&from, fl);
    }
}

/* One call; returns 0 or an errno. */
static int one(enum kind k, const char *path) {
    long r;
    switch (k) {
    case K_GETPPID:
        r = syscall(SYS_getppid);
        return r < 0 ? errno : 0;
    case K_UNAME: {
        struct utsname u;
        r = syscall(SYS_uname, &u);
        return r < 0 ? errno : 0;
    }
    case K_BPF:
        r = syscall(SYS_bpf, 5 /* BPF_PROG_LOAD */, NULL, 0);
        return r < 0 ? errno : 0;
    case K_OPEN:
        r = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
        if (r < 0)
            return errno;
        close((int)r);
        return 0;
    case K_LOOKUP:
        return lookup_once();
    case K_CONNECT:
        return connect_once();
    }
    return EINVAL;
}

static int run_spec(const char *spec) {
    char name[64] = {0};
    const char *path = NULL;
    const char *eq = strrchr(spec, '=');
    if (!eq) {
        fprintf(stderr, "loop: bad spec %s\n", spec);
        return 2;
    }
    long calls = strtol(eq + 1, NULL, 10);
    if (calls <= 0) {
        fprintf(stderr, "loop: bad count in %s\n", spec);
        return 2;
    }
    size_t n = (size_t)(eq - spec);
    static char pathbuf[4096];
    const char *colon = memchr(spec, ':', n);
    if (colon) {
        size_t pl = n - (size_t)(colon - spec) - 1;
        if (pl >= sizeof pathbuf) return 2;
        memcpy(pathbuf, colon + 1, pl);
        pathbuf[pl] = 0;
        path = pathbuf;
        n = (size_t)(colon - spec);
    }
    if (n >= sizeof name) return 2;
    memcpy(name, spec, n);

    enum kind k;
    if (!strcmp(name, "getppid")) k = K_GETPPID;
    else if (!strcmp(name, "uname")) k = K_UNAME;
    else if (!strcmp(name, "bpf")) k = K_BPF;
    else if (!strcmp(name, "open") && path) k = K_OPEN;
    else if (!strcmp(name, "lookup") && path) {
        k = K_LOOKUP;
        int e = read_nameserver();
        if (!e) e = make_query(path);
        if (e) {
            fprintf(stderr, "loop: %s: %s\n", spec, strerror(e));
            return 2;
        }
    } else if (!strcmp(name, "connect") && path) {
        k = K_CONNECT;
        const char *c = strrchr(path, ':');
        char ip[64];
        if (!c || (size_t)(c - path) >= sizeof ip) return 2;
        memcpy(ip, path, (size_t)(c - path));
        ip[c - path] = 0;
        target.sin_family = AF_INET;
        target.sin_port = htons((uint16_t)atoi(c + 1));
        if (inet_pton(AF_INET, ip, &target.sin_addr) != 1) {
            fprintf(stderr, "loop: bad address in %s\n", spec);
            return 2;
        }
    } else {
        fprintf(stderr, "loop: unknown test %s\n", spec);
        return 2;
    }

    long warm = calls / 10 > 0 ? calls / 10 : 1;
    for (long i = 0; i < warm; i++)
        one(k, path);
    int first = one(k, path), mixed = 0;
    uint64_t t0 = now_ns();
    for (long i = 0; i < calls; i++) {
        int e = one(k, path);
        if (e != first) mixed = 1;
    }
    uint64_t t1 = now_ns();
    printf("result %s calls=%ld ns=%.1f ret=%s\n", name, calls, (double)(t1 - t0) / (double)calls,
           mixed ? "MIXED" : errname(first));
    fflush(stdout);
    return 0;
}

static int run_time(char **argv) {
    uint64_t t0 = now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        perror("loop: fork");
        return 1;
    }
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) dup2(fd, 1);
        execvp(argv[0], argv);
        fprintf(stderr, "loop: exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            perror("loop: waitpid");
            return 1;
        }
    uint64_t t1 = now_ns();
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    printf("time ns=%llu status=%d\n", (unsigned long long)(t1 - t0), code);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: loop SPEC... | loop time CMD [ARG...]\n");
        return 2;
    }
    if (!strcmp(argv[1], "time")) {
        if (argc < 3) {
            fprintf(stderr, "usage: loop time CMD [ARG...]\n");
            return 2;
        }
        return run_time(argv + 2);
    }
    int first = 1, status = 0;
    pid_t dns = 0;
    if (!strcmp(argv[1], "serve-dns")) {
        dns = serve_dns();
        if (dns < 0) return 1;
        first = 2;
    }
    for (int i = first; i < argc; i++) {
        status = run_spec(argv[i]);
        if (status) break;
    }
    if (dns > 0) {
        kill(dns, SIGKILL);
        waitpid(dns, NULL, 0);
    }
    return status;
}
