/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/fanotify.h>

#include "stub.h"
#include "tierd.h"

/* Serves one event of a pre-content group: answers it at once when no data
 * is needed, otherwise parks it until the fills it needs are done. */
void dispatch_pre_content_event(struct tiered_fs *fs, const struct fanotify_event_metadata *md);
/* The same, for an event first looked at since_usec (settle.c). */
void dispatch_pre_content_retry(struct tiered_fs *fs, const struct fanotify_event_metadata *md, uint64_t since_usec);

/* Answers a pre-content event (0: allow, else EIO or EDQUOT) and closes
 * its fd: only now may the kernel reuse the number. */
void dispatch_answer(struct tiered_fs *fs, int event_fd, int error);
/* Only writes the answer: the fd stays open, the caller's to close. */
void dispatch_answer_write(struct tiered_fs *fs, int event_fd, int error);

/* Serves an event the previous tierd read and recorded in the in-flight record but
 * did not answer; number is its fd number, reserved by a placeholder. */
struct inflight_event;
int dispatch_orphan(struct tiered_fs *fs, const struct inflight_event *ev, int number);

/* Restores the file behind fd (any fd of it) whole; callback(userdata, 0 or
 * a negative errno) runs when it is (maybe before this returns). */
int dispatch_restore_whole(struct tenant *tn, int fd, void (*callback)(void *userdata, int error), void *userdata);

/* Fetches [start, end) (whole: the whole file, checked whole) of the file
 * behind fd ahead of its readers, on route's worker at prefetch priority;
 * a reader of the same range meanwhile waits for this fetch, never for a
 * second one. callback(userdata, 0 or an errno) once it is in. */
int dispatch_prefetch(struct tenant *tn, int fd, uint64_t start, uint64_t end, bool whole, uint64_t route,
                      void (*callback)(void *userdata, int error), void *userdata);

/* Has the file behind fd fills or waiters in flight? */
bool dispatch_file_busy(struct tierd *t, struct tiered_fs *fs, int fd);
/* Runs callback(userdata) once the file behind fd has nothing in flight
 * (at once if it has nothing now). */
int dispatch_when_idle(struct tierd *t, struct tiered_fs *fs, int fd, void (*callback)(void *userdata), void *userdata);

/* Answers every parked event with EIO (shutdown after a timeout). */
void dispatch_fail_all(struct tierd *t);
/* Fills that waited for room in the tenant's quota try again. */
void dispatch_quota_retry(struct tenant *tn);
/* restore_rate changed (reload): a full bucket, and every parked file tries again. */
void restore_rate_changed(struct tenant *tn);
void restore_pace_stop(struct tenant *tn);
bool dispatch_idle(struct tierd *t);

/* Fills and punches change mtime and clear setuid bits and file
 * capabilities. What goes back is what the inode had just before (read
 * with inode_attrs_read), so a chmod u-s or setcap -r made after the
 * archive holds; mtime is the stub's. stub_put_back_attrs puts back the
 * stub's own record (a stub tierd makes, as an import does). */
struct inode_attrs {
        mode_t mode;
        uint8_t fcaps[STUB_FCAPS_MAX];
        size_t fcaps_len;
};
int inode_attrs_read(int fd, struct inode_attrs *a);
int put_back_attrs(int fd, const struct inode_attrs *a, const struct timespec *mtime, bool whole);
int stub_put_back_attrs(int fd, const struct stub *s, bool whole);
