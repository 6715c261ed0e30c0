/* SPDX-License-Identifier: MIT */
/*
 * Whether a pre-content event is a read is told from the accessor's
 * /proc/TID/syscall, which says "running" until the accessor sleeps waiting
 * for the answer: microseconds on an idle machine, milliseconds on a busy
 * one, where every answer tierd writes wakes all the group's waiters again.
 * The event loop never waits for a reader to be scheduled (a tenant with
 * 256 busy readers would make every other tenant's reads wait behind those
 * polls): such an event waits here, a copy of its metadata with its fd still
 * in flight, and is looked at again after 1, 2, 4 ... 32 ms, in the order
 * events came. After ACCESS_SETTLE_USEC it is served as an unknown access (the
 * whole file first). The list holds at most the events in flight.
 */
#include "settle.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "log.h"
#include "macro.h"

#define SETTLE_TICK_USEC 1000
#define SETTLE_BACKOFF_MAX_USEC (32 * 1000)
#define SETTLE_LOOKS_PER_TICK 64 /* about 10 us each: a tick stays under a millisecond */
#define SETTLE_EVENT_MAX 64      /* metadata and a range record */

struct unsettled {
        struct unsettled *next;
        struct tiered_fs *fs;
        uint64_t since_usec;
        uint64_t next_usec; /* looked at again then: twice as long after each look */
        union {
                struct fanotify_event_metadata md;
                char buf[SETTLE_EVENT_MAX];
        } ev;
};

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata);

static int arm(struct tierd *t) {
        if (t->settle_src)
                return 0;
        /* Accuracy 1 us: sd-event's default (250 ms) would coalesce the
         * tick far past the deadline. */
        return sd_event_add_time_relative(t->event, &t->settle_src, CLOCK_MONOTONIC, SETTLE_TICK_USEC, 1, on_tick, t);
}

/* Each is looked at when its turn comes, at most SETTLE_LOOKS_PER_TICK a
 * tick (the rest wait for the next, in order), each time after twice as
 * long (1, 2, 4 ... 32 ms): a tenant whose readers stay runnable costs the
 * loop a bounded slice per tick, never a pass over all of them. */
static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        struct tierd *t = userdata;
        struct unsettled *list = t->unsettled;
        uint64_t now = tierd_now_usec(t);
        unsigned looks = 0;
        (void)s, (void)usec;

        t->unsettled = NULL;
        t->unsettled_tail = &t->unsettled;
        t->settle_src = sd_event_source_disable_unref(t->settle_src);
        for (struct unsettled *u; (u = list);) {
                list = u->next;
                u->next = NULL;
                if (u->next_usec > now || looks >= SETTLE_LOOKS_PER_TICK) {
                        *t->unsettled_tail = u; /* not its turn: kept, in order */
                        t->unsettled_tail = &u->next;
                        continue;
                }
                looks++;
                dispatch_pre_content_retry(u->fs, &u->ev.md, u->since_usec);
                free(u);
        }
        if (t->unsettled && arm(t) < 0)
                settle_end_all(t, EIO); /* never left unanswered */
        tierd_check_idle(t);
        return 0;
}

int settle_later(struct tiered_fs *fs, const struct fanotify_event_metadata *md, uint64_t since_usec) {
        struct tierd *t = fs->t;
        struct unsettled *u;
        int r;

        if (md->event_len > SETTLE_EVENT_MAX || md->event_len < FAN_EVENT_METADATA_LEN)
                return -E2BIG; /* not a pre-content event as tierd's group reports it */
        if ((r = arm(t)) < 0)
                return r;
        if (!(u = calloc(1, sizeof(*u))))
                return -ENOMEM;
        u->fs = fs;
        u->since_usec = since_usec;
        /* The wait doubles with each look since the event came. */
        uint64_t now = tierd_now_usec(t), waited = now - since_usec;
        u->next_usec = now + MIN(MAX(waited, (uint64_t)SETTLE_TICK_USEC), (uint64_t)SETTLE_BACKOFF_MAX_USEC);
        memcpy(u->ev.buf, md, md->event_len);
        if (!t->unsettled_tail)
                t->unsettled_tail = &t->unsettled;
        *t->unsettled_tail = u;
        t->unsettled_tail = &u->next;
        return 0;
}

bool settle_idle(const struct tierd *t) { return !t->unsettled; }

void settle_end_all(struct tierd *t, int error) {
        for (struct unsettled *u; (u = t->unsettled);) {
                t->unsettled = u->next;
                if (error)
                        dispatch_answer(u->fs, u->ev.md.fd, error);
                free(u);
        }
        t->unsettled_tail = &t->unsettled;
        t->settle_src = sd_event_source_disable_unref(t->settle_src);
}
