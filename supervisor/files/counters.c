/* SPDX-License-Identifier: MIT */
/*
 * A tenant's counters, read over D-Bus (dbus/tenantbus.c) and by tierctl
 * metrics: reader waits as a histogram (cumulative buckets can be summed
 * across nodes, percentiles cannot) and the last error. Each update is
 * O(1) or O(containers): they are counted on the event path.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "containers.h"
#include "tierd.h"

const double latency_bounds[LATENCY_BUCKETS] = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                  0.5,   1,     2.5,  5,     10,   INFINITY };

void wait_histogram_add(struct wait_histogram *h, double seconds) {
        size_t i = 0;
        while (i + 1 < LATENCY_BUCKETS && seconds > latency_bounds[i])
                i++;
        h->buckets[i]++;
        h->count++;
        h->seconds += seconds;
}

void tenant_record_wait(struct tenant *tn, uint64_t route, double seconds, int error) {
        wait_histogram_add(&tn->counters.wait, seconds);
        container_count_wait(tn, route, seconds);
        if (error)
                tn->counters.reads_denied++;
}

void tenant_set_last_error(struct tenant *tn, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(tn->counters.last_error, sizeof(tn->counters.last_error), fmt, ap);
        va_end(ap);
}
