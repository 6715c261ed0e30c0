/* SPDX-License-Identifier: MIT */
#include "pace.h"

#include "log.h"

bool pace_ready(struct tenant *tn, sd_event_source **timer, sd_event_time_handler_t handler, void *userdata) {
        uint64_t rate = tn->cfg->prefetch_rate, now = tierd_now_usec(tn->t), at;
        int r;

        if (rate_ready(&tn->prefetch_bucket, rate, 1.0, now))
                return true;
        at = now + rate_wait_usec(&tn->prefetch_bucket, rate);
        r = *timer ? sd_event_source_set_time(*timer, at)
                   : sd_event_add_time(tn->t->event, timer, CLOCK_MONOTONIC, at, 0, handler, userdata);
        if (r >= 0)
                r = sd_event_source_set_enabled(*timer, SD_EVENT_ONESHOT);
        if (r < 0) {
                log_error_errno(r, "tenant %s: cannot pace fetches ahead (prefetch_rate): not paced: %m",
                                tn->cfg->name);
                return true; /* unpaced, rather than never going on */
        }
        return false;
}

void pace_spend(struct tenant *tn, uint64_t bytes) {
        if (tn->cfg->prefetch_rate)
                rate_spend(&tn->prefetch_bucket, bytes);
}
