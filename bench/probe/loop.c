/*
 * loop: cordon-bench's in-container probe (static, x86_64).
 *
 * Build: gcc -static -O2 -Wall -Wextra -o loop loop.c   (cordon-bench does it)
 *
 *   loop SPEC...          run each SPEC, print one result line per SPEC
 *   loop time CMD ARG...  run CMD (stdout to /dev/null), print its wall time
 *
 * SPEC is NAME=CALLS or NAME:PATH=CALLS:
 *   getppid=K       getppid(2), never intercepted unless a policy says so
 *   uname=K         uname(2) (emulated by cordon's default policy)
 *   bpf=K           bpf(BPF_PROG_LOAD, NULL, 0) (refused in cordon's BPF filter)
 *   open:PATH=K     openat(AT_FDCWD, PATH, O_RDONLY|O_CLOEXEC) then close
 *                   (close is never intercepted; the pair is timed)
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
#include <fcntl.h>
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
    default: {
        static char buf[32];
        snprintf(buf, sizeof buf, "errno%d", e);
        return buf;
    }
    }
}

enum kind { K_GETPPID, K_UNAME, K_BPF, K_OPEN };

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
    else {
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
    for (int i = 1; i < argc; i++) {
        int r = run_spec(argv[i]);
        if (r) return r;
    }
    return 0;
}
