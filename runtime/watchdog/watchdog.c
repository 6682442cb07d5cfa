/*
 * cordon-watchdog: kills a container's init when its supervisor dies.
 *
 * The supervisor forks, puts one end of a socketpair at fd 3 and execs this
 * program (from a sealed memfd; supervisor/watchdog.rs). Protocol on fd 3:
 * the supervisor sends the byte 'P' with SCM_RIGHTS carrying the container
 * init's pidfd; when the supervisor exits for any reason (a crash, SIGKILL,
 * an OOM kill), the kernel closes its end, recvmsg returns 0, and the init
 * gets SIGKILL through the pidfd (no pid reuse race). The init is pid 1 of
 * the container's pid namespace, so every process of the container dies.
 *
 * The byte 'H' carries an fd the watchdog only holds until it exits: the
 * supervisor's inotify and fanotify groups. The last close of such a group
 * waits for an SRCU grace period (fsnotify_destroy_group), tens of
 * milliseconds; held here, that wait happens in this process, which is in
 * none of the container's cgroups, and not in the supervisor's exit,
 * which `delete` waits for before it can remove them.
 *
 * A static program with no libc (raw x86-64 syscalls, no heap, no TLS): it
 * runs for the whole life of every container, and this way it costs a few
 * pages of memory instead of a copy of the runtime's address space.
 *
 * Built by runtime/build.rs: cc -Os -static -nostdlib -ffreestanding.
 */

#define NR_RECVMSG 47
#define NR_CLOSE 3
#define NR_PRCTL 157
#define NR_EXIT_GROUP 231
#define NR_PIDFD_SEND_SIGNAL 424

#define PR_SET_NAME 15
#define SOL_SOCKET 1
#define SCM_RIGHTS 1
#define EINTR 4
#define SIGKILL 9

struct iovec {
    void *base;
    unsigned long len;
};

struct msghdr {
    void *name;
    unsigned int namelen;
    struct iovec *iov;
    unsigned long iovlen;
    void *control;
    unsigned long controllen;
    int flags;
};

struct cmsghdr {
    unsigned long len;
    int level;
    int type;
};

static long sys4(long n, long a, long b, long c, long d)
{
    long r;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return r;
}

__attribute__((noreturn, used)) void watch(void)
{
    int init = -1;
    sys4(NR_PRCTL, PR_SET_NAME, (long)"cordon-watchdog", 0, 0);
    for (;;) {
        char byte;
        struct iovec iov;
        struct msghdr m;
        union {
            struct cmsghdr h;
            char buf[64];
        } ctl;
        iov.base = &byte;
        iov.len = 1;
        m.name = 0;
        m.namelen = 0;
        m.iov = &iov;
        m.iovlen = 1;
        m.control = ctl.buf;
        m.controllen = sizeof ctl.buf;
        m.flags = 0;
        long n = sys4(NR_RECVMSG, 3, (long)&m, 0, 0);
        if (n == -EINTR)
            continue;
        if (n <= 0)
            break; /* EOF: the supervisor is gone (or fd 3 is broken) */
        if (m.controllen >= sizeof(struct cmsghdr) + sizeof(int) && ctl.h.level == SOL_SOCKET &&
            ctl.h.type == SCM_RIGHTS) {
            const unsigned char *p = (const unsigned char *)ctl.buf + sizeof(struct cmsghdr);
            int fd = (int)((unsigned)p[0] | (unsigned)p[1] << 8 | (unsigned)p[2] << 16 | (unsigned)p[3] << 24);
            if (byte == 'P') {
                if (init >= 0)
                    sys4(NR_CLOSE, init, 0, 0, 0);
                init = fd;
            }
        }
    }
    if (init >= 0)
        sys4(NR_PIDFD_SEND_SIGNAL, init, SIGKILL, 0, 0);
    for (;;)
        sys4(NR_EXIT_GROUP, 0, 0, 0, 0);
}

__asm__(".globl _start\n"
        "_start:\n"
        "    xor %rbp, %rbp\n"
        "    and $-16, %rsp\n"
        "    call watch\n"
        "    hlt\n");
