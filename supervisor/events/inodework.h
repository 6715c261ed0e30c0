/* SPDX-License-Identifier: MIT */
/*
 * What takes a file's inode lock runs on threads, never on the event loop.
 *
 * The kernel holds a file's inode lock across each write into it (and the
 * dirty-page throttling a write may sleep in), across a whole fdatasync of
 * it on btrfs, and across its owner's fsync: a worker hydrating or syncing
 * one file, or a tenant, holds it for tens of milliseconds (measured: a
 * hydration of 600 MB/s kept the loop waiting in futimens 277 ms a second,
 * 57 ms at once). Putting a file's mode, times and capabilities back after
 * a fill (fchmod, futimens, fsetxattr) and writing its stub's record
 * (fsetxattr) wait for that lock, so they run here while the loop goes on
 * answering every tenant's readers.
 *
 * Each tenant has threads of its own (at most INODE_THREADS, started when
 * needed, gone when idle), so one tenant's locked files never hold up
 * another's. A job given the file's previous job runs after it, never
 * beside it. A job no reader waits for takes at most INODE_THREADS - 1
 * threads, so a reader's is never queued behind a hydration's. A job makes
 * fd syscalls only: it opens and closes no fd, since the loop names fd
 * numbers in advance for events (fsgroup.c).
 */
#pragma once

#include <stdbool.h>

#include "tierd.h"

#define INODE_THREADS 4

struct inode_job {
        struct inode_job *next, *then; /* inodework.c's */
        bool worked;                   /* inodework.c's */
        bool reader;                        /* a reader waits for it */
        void (*work)(struct inode_job *j); /* on a thread */
        void (*done)(struct inode_job *j); /* then on the loop, unless tierd hands over */
};

/* The loop's end, once per tierd. */
int inode_work_open(struct tierd *t);
void inode_work_close(struct tierd *t);
/* Threads of it left blocked at the stop (still alive at the exit). */
bool inode_work_left(const struct tierd *t);
/* Queues j for tn's threads, after `after` (the same file's previous job
 * whose done() has not run yet), or NULL. Never fails: with no thread to
 * run it, it runs here (logged). */
void inode_work_submit(struct tenant *tn, struct inode_job *j, struct inode_job *after);
/* A reader now waits for j (its file's last job, whose done() has not
 * run): it, and the file's jobs before it, go as a reader's. */
void inode_work_promote(struct tenant *tn, struct inode_job *j);
/* The tenant goes: its queued jobs run, its threads end, and the done()
 * of every job ended runs now (none at a handover). */
void inode_work_stop(struct tenant *tn);
