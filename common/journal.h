/* SPDX-License-Identifier: MIT */
/*
 * The in-flight journal: a memfd kept by the holder (or systemd's fd store)
 * with one slot per fd number, saying which file and range each pending
 * permission event is about. The kernel matches answers by fd number only,
 * so a new tierd needs exactly this to answer what its predecessor read.
 */
#pragma once

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>

#include "fanotify-uapi.h"

struct journal;

struct journal_event {
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

/* Maps the journal memfd fd (empty: a new journal, its header written),
 * sized for fd numbers below nofile. The caller keeps fd. -EBADMSG: not a
 * journal tierd can read. */
int journal_open(int fd, unsigned nofile, struct journal **ret);
void journal_free(struct journal *j);

#define JOURNAL_MAX_CANDIDATES 8

/* Around each read of events from the group of fsid: candidates are the
 * lowest free fd numbers, which the kernel gives the events read, in order.
 * A predecessor that died in between left events it had not recorded, with
 * some of those numbers: journal_was_reading() says which (0: none). */
void journal_reading(struct journal *j, uint64_t fsid, const int *candidates, unsigned n);
void journal_reading_done(struct journal *j);
unsigned journal_was_reading(const struct journal *j, uint64_t *fsid, int *candidates);
unsigned journal_slots(const struct journal *j);
/* Above every fd number ever recorded: where a scan for events may stop. */
unsigned journal_high(const struct journal *j);

/* Records the event on event_fd (its number is the slot) / forgets it. */
void journal_record(struct journal *j, uint64_t fsid, const struct fanotify_event_metadata *md);
/* Records an event known only by its file (no range, no reader): it is
 * restored whole. */
void journal_record_unknown(struct journal *j, int number, int file_fd, uint64_t fsid);
void journal_forget(struct journal *j, int event_fd);
/* The event recorded at number, if any. */
bool journal_get(const struct journal *j, int number, struct journal_event *out);
