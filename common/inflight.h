/* SPDX-License-Identifier: MIT */
/*
 * The in-flight record: a memfd kept by the holder (or systemd's fd store)
 * with one slot per fd number, saying which file and range each pending
 * permission event is about. The kernel matches answers by fd number only,
 * so a new tierd needs exactly this to answer what its predecessor read.
 */
#pragma once

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>

#include "fanotify-uapi.h"

struct inflight;

struct inflight_event {
        uint64_t fsid; /* which group: the filesystem's id */
        uint32_t mask;
        int32_t pid;
        bool has_range;
        uint64_t offset, count;
        union {
                struct file_handle fh;
                char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
        } h;
};

/* Maps the in-flight record's memfd fd (empty: a new record, its header written),
 * sized for fd numbers below nofile. The caller keeps fd. -EBADMSG: not a
 * record tierd can read. */
int inflight_open(int fd, unsigned nofile, struct inflight **ret);
void inflight_free(struct inflight *j);

#define INFLIGHT_MAX_CANDIDATES 8

/* Around each read of events from the group of fsid: candidates are the
 * lowest free fd numbers, which the kernel gives the events read, in order.
 * A predecessor that died in between left events it had not recorded, with
 * some of those numbers: inflight_was_reading() says which (0: none). */
void inflight_reading(struct inflight *j, uint64_t fsid, const int *candidates, unsigned n);
void inflight_reading_done(struct inflight *j);
unsigned inflight_was_reading(const struct inflight *j, uint64_t *fsid, int *candidates);
unsigned inflight_slots(const struct inflight *j);
/* Above every fd number ever recorded: where a scan for events may stop. */
unsigned inflight_high(const struct inflight *j);

/* Records the event on event_fd (its number is the slot) / forgets it. */
void inflight_record(struct inflight *j, uint64_t fsid, const struct fanotify_event_metadata *md);
/* Records an event known only by its file (no range, no reader): it is
 * restored whole. */
void inflight_record_unknown(struct inflight *j, int number, int file_fd, uint64_t fsid);
void inflight_forget(struct inflight *j, int event_fd);
/* The event recorded at number, if any. */
bool inflight_get(const struct inflight *j, int number, struct inflight_event *out);
