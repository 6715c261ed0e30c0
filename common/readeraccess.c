/* SPDX-License-Identifier: MIT */
/*
 * A FAN_PRE_ACCESS event does not say read or write, and a truncate's event
 * looks like a one-page read. The accessor is blocked in its system call, so
 * /proc/TID/syscall tells: restore by range only what is surely a read of
 * this file; everything else restores the whole file first.
 */
#include "readeraccess.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "fanotify-uapi.h"
#include "macro.h"

struct syscall_info {
        long nr;
        uint64_t args[6];
};

/* The kernel queues the event before the accessor goes to sleep waiting for
 * our answer: until it sleeps, /proc/TID/syscall says "running". That is
 * microseconds on an idle machine and milliseconds on a busy one (every
 * answer wakes every waiter of the group): one look only, never a wait for
 * the reader to be scheduled. The caller looks again later. */
static int read_syscall(pid_t tid, struct syscall_info *si) {
        char path[64], line[512];
        _cleanup_close_ int fd = -1;
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%d/syscall", (int)tid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = pread(fd, line, sizeof(line) - 1, 0);
        if (n <= 0)
                return -EIO;
        line[n] = 0;
        if (strncmp(line, "running", 7) == 0)
                return -EAGAIN;
        /* "-1 ..." (not in a syscall) carries no usable answer. */
        if (sscanf(line, "%ld 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64,
                   &si->nr, &si->args[0], &si->args[1], &si->args[2], &si->args[3], &si->args[4],
                   &si->args[5]) != 7 || si->nr < 0)
                return -EINVAL;
        return 0;
}

/* Is the accessor's fd number the file behind event_fd? */
static bool fd_is_same_file(pid_t tid, uint64_t fdnum, int event_fd) {
        char path[64];
        struct stat a, b;

        if (fdnum > INT32_MAX)
                return false;
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)tid, (int)fdnum);
        if (stat(path, &a) < 0 || fstat(event_fd, &b) < 0)
                return false;
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static enum access_kind classify_open_flags(uint64_t flags) {
        if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
                return ACCESS_CHANGE;
        return ACCESS_OPEN_READ;
}

static enum access_kind classify_open(const struct syscall_info *si) {
        switch (si->nr) {
        case SYS_open:
                return classify_open_flags(si->args[1]);
        case SYS_openat:
        case SYS_open_by_handle_at:
                return classify_open_flags(si->args[2]);
        case SYS_creat:
                return ACCESS_CHANGE;
        case SYS_execve:
        case SYS_execveat:
                return ACCESS_OPEN_READ; /* its reads restore it whole */
        default:
                return ACCESS_WHOLE; /* openat2 (flags behind a pointer), io_uring... */
        }
}

static enum access_kind classify_pre_access(const struct syscall_info *si, pid_t tid, int event_fd) {
        int fd_arg;

        switch (si->nr) {
        case SYS_read: case SYS_pread64: case SYS_readv: case SYS_preadv: case SYS_preadv2:
        case SYS_splice: case SYS_readahead: case SYS_fadvise64:
                fd_arg = 0;
                break;
        case SYS_sendfile:
                fd_arg = 1;
                break;
        case SYS_copy_file_range:
                /* Source: a read. Destination: a write. */
                if (fd_is_same_file(tid, si->args[0], event_fd))
                        return ACCESS_READ;
                return fd_is_same_file(tid, si->args[2], event_fd) ? ACCESS_CHANGE : ACCESS_WHOLE;
        case SYS_write: case SYS_pwrite64: case SYS_writev: case SYS_pwritev: case SYS_pwritev2:
        case SYS_truncate: case SYS_ftruncate: case SYS_fallocate:
                return ACCESS_CHANGE;
        default:
                /* execve, io_uring (426), io_submit (209), and mmap: page
                 * faults raise no event, and mremap can grow a mapping past
                 * the range the mmap event named. */
                return ACCESS_WHOLE;
        }
        return fd_is_same_file(tid, si->args[fd_arg], event_fd) ? ACCESS_READ : ACCESS_WHOLE;
}

int access_classify(pid_t tid, int event_fd, uint64_t mask, bool settled, enum access_kind *kind) {
        struct syscall_info si;
        int r = tid > 0 ? read_syscall(tid, &si) : -ESRCH;

        if (r == -EAGAIN && !settled)
                return -EAGAIN;
        /* Unknown (thread gone, still "running" at the deadline): an
         * O_TRUNC open raises no later event, so even an open is restored
         * whole to be safe. */
        if (r < 0)
                *kind = ACCESS_WHOLE;
        else if (mask & FAN_OPEN_PERM)
                *kind = classify_open(&si);
        else
                *kind = classify_pre_access(&si, tid, event_fd);
        return 0;
}

const char *access_kind_to_string(enum access_kind k) {
        static const char *const names[] = { "read", "open-read", "change", "whole" };
        return names[k];
}
