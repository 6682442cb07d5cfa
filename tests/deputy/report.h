/*
 * The output conventions the deputy probes share (deputy.c, corpus.c):
 * one line per step, "NAME ok VALUE" or "NAME err ERRNO", flushed at once
 * so a crash loses nothing. Each probe defines ename() (errno -> name)
 * before including this file.
 */
#ifndef DEPUTY_REPORT_H
#define DEPUTY_REPORT_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

static const char *ename(int e);

static inline void line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* Prints NAME ok R or NAME err ERRNO for a syscall result. */
static inline long res(const char *name, long r)
{
    if (r < 0)
        line("%s err %s", name, ename(errno));
    else
        line("%s ok %ld", name, r);
    return r;
}

/* A unix socket address for PATH; returns its length. */
static inline socklen_t unaddr(struct sockaddr_un *a, const char *path)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    strncpy(a->sun_path, path, sizeof a->sun_path - 1);
    return offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1;
}

#endif
