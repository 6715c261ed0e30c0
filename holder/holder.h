/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "holder-proto.h"

struct held {
        char name[HOLDER_NAME_MAX + 1];
        int fd;
};

#include "fanotify-uapi.h"

/* An event whose accessor was not asleep yet when the guard read it. */
struct guard_waiting {
        int group_fd;
        uint64_t since_usec;
        union {
                struct fanotify_event_metadata md;
                char buf[64]; /* metadata and a range record */
        } ev;
};
#define GUARD_WAITING_MAX 4096

struct holder {
        const char *path;
        bool exit_when_empty;
        int listen_fd, lock_fd;
        struct held *fds;
        size_t n;
        /* The guard (guard.c): how long after a tierd went without a
         * successor it starts, whether the last tierd asked for it at once,
         * when that tierd went, and whether it runs. */
        uint64_t guard_after_usec;
        bool guard_at_once;
        bool had_client;   /* a tierd was served (else nothing to guard yet) */
        bool client_ready; /* the one connected said READY */
        uint64_t gone_usec; /* when the last tierd that became ready went */
        bool guarding;
        /* Counts every STORE, FETCH and READY: tierctl release-groups
         * lets go only if no tierd came between its check and RELEASE. */
        uint64_t generation;
        uint64_t guard_allowed, guard_denied;
        struct guard_waiting waiting[GUARD_WAITING_MAX];
        size_t n_waiting, waiting_max; /* each holds an event fd: within RLIMIT_NOFILE */
};

struct held *holder_find(struct holder *h, const char *name);
/* Closes and forgets the entry. */
void holder_drop(struct holder *h, struct held *e);

/* The pre-content groups held: names "pre-<fsid in hex>". */
bool guard_is_group(const struct held *e, uint64_t *fsid);
bool guard_holds_groups(const struct holder *h);
/* Milliseconds until the guard must start (0: now), or -1: never. */
int guard_due_ms(const struct holder *h, uint64_t now_usec);
/* Starts the guard: every event the last tierd read and left unanswered
 * is answered EIO (it cannot be filled now), and its in-flight record dropped so
 * that the next tierd does not serve them again. */
void guard_start(struct holder *h);
/* Reads one batch of events from a held pre-content group and answers
 * each at once. */
void guard_serve(struct holder *h, int group_fd, uint64_t now_usec);
/* How many events may wait (each with its fd): the soft RLIMIT_NOFILE is
 * raised to the hard one first. */
size_t guard_waiting_room(void);
/* Looks again at the events kept by guard_serve; now: answers them all. */
void guard_settle(struct holder *h, uint64_t now_usec, bool now);
/* A tierd fetched the groups: it serves them from now on. */
void guard_stop(struct holder *h);
