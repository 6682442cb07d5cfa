/*
 * floor: the kernel's own seccomp-notify round trip, with the smallest
 * possible supervisor. Runs on the host; no container, no policy, no audit.
 *
 * Build: gcc -static -O2 -Wall -Wextra -o floor floor.c   (cordon-bench does it)
 *
 *   floor continue K sync|nosync
 *       a child installs a filter that sends getppid(2) to a listener and
 *       calls it K times; the parent answers every notification with
 *       SECCOMP_USER_NOTIF_FLAG_CONTINUE in a tight RECV/SEND loop.
 *   floor addfd PATH K sync|nosync
 *       the same with openat(2): the parent reads the path out of the
 *       child's memory (process_vm_readv), opens it itself and answers with
 *       SECCOMP_IOCTL_NOTIF_ADDFD + SECCOMP_ADDFD_FLAG_SEND; the child closes
 *       the fd it got (close is not intercepted). openat+close is timed.
 *
 * `sync` sets SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP on the listener (Linux 6.6+;
 * cordon's supervisor sets it too); `nosync` leaves the default wake-up.
 *
 * The child prints the same line as loop(1):
 *   result NAME calls=K ns=NS_PER_CALL ret=OK|ERRNO_NAME
 * Exit status: the child's; 3 when setup failed (message on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

static void die(const char *what) {
    fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
    exit(3);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int send_fd(int sock, int fd) {
    char data = 'L';
    struct iovec iov = {.iov_base = &data, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock) {
    char data;
    struct iovec iov = {.iov_base = &data, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    if (recvmsg(sock, &msg, 0) != 1) return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

/* Installs "nr -> USER_NOTIF, everything else ALLOW"; returns the listener. */
static int install(int nr) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) die("no_new_privs");
    int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (fd < 0) die("seccomp(NEW_LISTENER)");
    return fd;
}

static int one(int addfd, const char *path) {
    long r;
    if (!addfd) {
        r = syscall(SYS_getppid);
        return r < 0 ? errno : 0;
    }
    r = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (r < 0) return errno;
    close((int)r);
    return 0;
}

static void child(int sock, int addfd, const char *path, long calls) {
    int l = install(addfd ? SYS_openat : SYS_getppid);
    if (send_fd(sock, l)) die("send listener");
    close(l);
    char go;
    if (read(sock, &go, 1) != 1) die("wait for the supervisor");
    long warm = calls / 10 > 0 ? calls / 10 : 1;
    for (long i = 0; i < warm; i++) one(addfd, path);
    int first = one(addfd, path), mixed = 0;
    uint64_t t0 = now_ns();
    for (long i = 0; i < calls; i++)
        if (one(addfd, path) != first) mixed = 1;
    uint64_t t1 = now_ns();
    char ret[32];
    if (mixed) snprintf(ret, sizeof ret, "MIXED");
    else if (first) snprintf(ret, sizeof ret, "errno%d", first);
    else snprintf(ret, sizeof ret, "OK");
    printf("result %s calls=%ld ns=%.1f ret=%s\n", addfd ? "open" : "getppid", calls,
           (double)(t1 - t0) / (double)calls, ret);
    fflush(stdout);
    _exit(0);
}

static void serve(int l, int addfd, long total) {
    struct seccomp_notif req;
    struct seccomp_notif_resp resp;
    char path[4096];
    for (long i = 0; i < total; i++) {
        memset(&req, 0, sizeof req);
        if (ioctl(l, SECCOMP_IOCTL_NOTIF_RECV, &req)) {
            if (errno == EINTR) {
                i--;
                continue;
            }
            die("NOTIF_RECV");
        }
        if (!addfd) {
            memset(&resp, 0, sizeof resp);
            resp.id = req.id;
            resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
            if (ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, &resp) && errno != ENOENT) die("NOTIF_SEND");
            continue;
        }
        /* The path: one copy out of the caller's memory, as any policy needs. */
        struct iovec local = {.iov_base = path, .iov_len = 256};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)req.data.args[1], .iov_len = 256};
        ssize_t n = process_vm_readv((pid_t)req.pid, &local, 1, &remote, 1, 0);
        int err = 0, fd = -1;
        if (n <= 0 || !memchr(path, 0, (size_t)n)) {
            err = EFAULT;
        } else {
            fd = openat(AT_FDCWD, path, (int)req.data.args[2] | O_CLOEXEC, (mode_t)req.data.args[3]);
            if (fd < 0) err = errno;
        }
        if (fd >= 0) {
            struct seccomp_notif_addfd a = {
                .id = req.id,
                .flags = SECCOMP_ADDFD_FLAG_SEND,
                .srcfd = (unsigned)fd,
                .newfd = 0,
                .newfd_flags = ((int)req.data.args[2] & O_CLOEXEC) ? O_CLOEXEC : 0,
            };
            if (ioctl(l, SECCOMP_IOCTL_NOTIF_ADDFD, &a) < 0 && errno != ENOENT) die("NOTIF_ADDFD");
            close(fd);
        } else {
            memset(&resp, 0, sizeof resp);
            resp.id = req.id;
            resp.error = -err;
            if (ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, &resp) && errno != ENOENT) die("NOTIF_SEND");
        }
    }
}

int main(int argc, char **argv) {
    int addfd;
    const char *path = NULL;
    long calls;
    const char *mode;
    if (argc == 4 && !strcmp(argv[1], "continue")) {
        addfd = 0;
        calls = strtol(argv[2], NULL, 10);
        mode = argv[3];
    } else if (argc == 5 && !strcmp(argv[1], "addfd")) {
        addfd = 1;
        path = argv[2];
        calls = strtol(argv[3], NULL, 10);
        mode = argv[4];
    } else {
        fprintf(stderr, "usage: floor continue K sync|nosync | floor addfd PATH K sync|nosync\n");
        return 2;
    }
    if (calls <= 0 || (strcmp(mode, "sync") && strcmp(mode, "nosync"))) {
        fprintf(stderr, "floor: bad arguments\n");
        return 2;
    }
    /* A stuck round trip must not hang the benchmark. */
    alarm(120);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) die("socketpair");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        close(sv[0]);
        child(sv[1], addfd, path, calls);
    }
    close(sv[1]);
    int l = recv_fd(sv[0]);
    if (l < 0) die("receive listener");
    if (!strcmp(mode, "sync") && ioctl(l, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP))
        die("NOTIF_SET_FLAGS(SYNC_WAKE_UP)");
    if (write(sv[0], "g", 1) != 1) die("start the child");
    long warm = calls / 10 > 0 ? calls / 10 : 1;
    serve(l, addfd, warm + 1 + calls);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) die("waitpid");
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
