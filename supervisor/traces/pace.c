/* SPDX-License-Identifier: MIT */
#include "pace.h"

#include "log.h"

int pace_bucket(struct tenant *tn, struct rate_bucket *b, uint64_t rate, sd_event_source **timer,
                sd_event_time_handler_t handler, void *userdata) {
        uint64_t now = tierd_now_usec(tn->t), at;
        int r;

        if (rate_ready(b, rate, 1.0, now))
                return 1;
        at = now + rate_wait_usec(b, rate);
        r = *timer ? sd_event_source_set_time(*timer, at)
                   : sd_event_add_time(tn->t->event, timer, CLOCK_MONOTONIC, at, 0, handler, userdata);
        if (r >= 0)
                r = sd_event_source_set_enabled(*timer, SD_EVENT_ONESHOT);
        return r < 0 ? r : 0;
}

bool pace_ready(struct tenant *tn, sd_event_source **timer, sd_event_time_handler_t handler, void *userdata) {
        int r = pace_bucket(tn, &tn->prefetch_bucket, tn->cfg->prefetch_rate, timer, handler, userdata);
        if (r < 0) {
                log_error_errno(r, "tenant %s: cannot pace fetches ahead (prefetch_rate): not paced: %m",
                                tn->cfg->name);
                return true; /* unpaced, rather than never going on */
        }
        return r > 0;
}

void pace_spend(struct tenant *tn, uint64_t bytes) {
        if (tn->cfg->prefetch_rate)
                rate_spend(&tn->prefetch_bucket, bytes);
}
