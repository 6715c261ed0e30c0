/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum access_kind {
        ACCESS_READ,      /* a read of this file: restore the range only */
        ACCESS_OPEN_READ, /* an open for reading: no data needed yet */
        ACCESS_CHANGE,    /* a write, a truncate, an open for writing: whole, then dirty */
        ACCESS_WHOLE,     /* exec, io_uring, aio, anything unknown: whole first */
};

/* Classifies what the blocked thread tid is doing to the file behind
 * event_fd, from its blocked system call (/proc/TID/syscall). Only a call
 * known to read this very file counts as a read. Looks once and never
 * waits: -EAGAIN while the thread is not asleep yet (it goes to sleep
 * within microseconds, or milliseconds on a busy machine): look again
 * later; with settled (the caller waited long enough), ACCESS_WHOLE. */
#define ACCESS_SETTLE_USEC (200 * 1000)
int access_classify(pid_t tid, int event_fd, uint64_t mask, bool settled, enum access_kind *kind);
const char *access_kind_to_string(enum access_kind k);
