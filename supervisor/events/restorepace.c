/* SPDX-License-Identifier: MIT */
/*
 * restore_rate: a tenant's fills for readers start at most this many bytes
 * a second, averaged over what starts (a token bucket of a second's
 * worth, traces/pace.c). A file whose reader must wait is parked, with
 * its waiters, in the tenant's queue, first come first served: a newcomer
 * queues behind the files parked before it, and one timer lets the head
 * go when the bucket allows, then the next at once, until the bucket is
 * short again. Parked readers hold fds from the budget every tenant's
 * events share (fsgroup.c stops reading events when it runs low): past
 * its share of it, a tenant's readers go unpaced rather than stall the
 * others. Nothing is paced once tierd stops (its last fills finish).
 */
#include "dispatch-internal.h"

#include <errno.h>

#include "log.h"
#include "pace.h"

/* A tenant's share of the fd budget its parked files may hold. */
static unsigned paced_max(const struct tenant *tn) {
        return MAX(4u, tn->t->fd_budget / (4 * (unsigned)MAX((size_t)1, tn->t->n_tenants)));
}

static void park(struct tfile *f) {
        if (f->paced_seq)
                return;
        f->paced_seq = ++f->tenant->paced_next_seq;
        f->tenant->paced_files++;
}

static int on_restore_turn(sd_event_source *s, uint64_t usec, void *userdata);

/* The queue's next turn, if it has files and none is set: when the bucket
 * allows (at once if it does now). */
static void turn_soon(struct tenant *tn) {
        uint64_t rate = tn->cfg->restore_rate, now = tierd_now_usec(tn->t);
        int enabled = SD_EVENT_OFF;
        if (!tn->paced_files || !tn->restore_pace_src ||
            (sd_event_source_get_enabled(tn->restore_pace_src, &enabled) >= 0 && enabled != SD_EVENT_OFF))
                return;
        uint64_t at = rate_ready(&tn->restore_bucket, rate, 1.0, now) ? now : now + rate_wait_usec(&tn->restore_bucket, rate);
        int r = sd_event_source_set_time(tn->restore_pace_src, at);
        if (r >= 0)
                r = sd_event_source_set_enabled(tn->restore_pace_src, SD_EVENT_ONESHOT);
        if (r < 0) /* not from here: this may run inside a walk of the files */
                log_error_errno(r, "tenant %s: cannot give its parked readers their turn (restore_rate): they wait for "
                                   "the next file to need one: %m", tn->cfg->name);
}

void restore_unpark(struct tfile *f) {
        if (!f->paced_seq)
                return;
        f->paced_seq = 0;
        f->tenant->paced_files--;
        turn_soon(f->tenant);
}

/* The head of the queue (the earliest parked) goes if the bucket allows;
 * then the next, at once (a loop turn each: events in between). A head
 * that did not ask (its fills in flight are all it may have) leaves the
 * queue, and joins it again at its end when it asks: the others never
 * wait on it. */
static int on_restore_turn(sd_event_source *s, uint64_t usec, void *userdata) {
        struct tenant *tn = userdata;
        struct tfile *head = NULL;
        (void)s, (void)usec;
        for (struct tfile *f = tn->t->files; f; f = f->next)
                if (f->tenant == tn && f->paced_seq && (!head || f->paced_seq < head->paced_seq))
                        head = f;
        if (!head)
                return 0;
        unsigned before = tn->paced_files;
        uint64_t asked = tn->paced_asks;
        head->quota_wait = false;
        tfile_progress(head); /* may free it, which unparks it */
        if (tn->paced_files == before && tn->paced_asks == asked)
                restore_unpark(head);
        turn_soon(tn);
        return 0;
}

int restore_paced(struct tfile *f) {
        struct tenant *tn = f->tenant;
        int r;

        if (!tn->cfg->restore_rate || tn->t->stopping || (!f->paced_seq && tn->paced_files >= paced_max(tn))) {
                restore_unpark(f);
                return 0;
        }
        if (!f->paced_seq && tn->paced_files > 0) { /* behind those parked before it: the timer is set */
                park(f);
                return -EINPROGRESS;
        }
        tn->paced_asks++;
        r = pace_bucket(tn, &tn->restore_bucket, tn->cfg->restore_rate, &tn->restore_pace_src, on_restore_turn, tn);
        if (r < 0)
                log_error_errno(r, "tenant %s: cannot pace restores (restore_rate): not paced: %m", tn->cfg->name);
        if (r == 0) {
                park(f);
                return -EINPROGRESS;
        }
        restore_unpark(f);
        return 0;
}

void restore_spend(struct tenant *tn, uint64_t bytes) {
        if (tn->cfg->restore_rate)
                rate_spend(&tn->restore_bucket, bytes);
}

void restore_rate_changed(struct tenant *tn) {
        tn->restore_bucket = (struct rate_bucket){};
        dispatch_quota_retry(tn); /* every parked file tries again */
}

void restore_pace_stop(struct tenant *tn) {
        tn->restore_pace_src = sd_event_source_disable_unref(tn->restore_pace_src);
}
