/* SPDX-License-Identifier: MIT */
/*
 * A token bucket of bytes, refilled at rate bytes a second up to cap_sec
 * seconds' worth, spent as work starts: work starts while the bucket holds
 * tokens, and may take more than it holds (the next waits until the debt
 * is refilled). Used by archive_rate (autoarchive.c) and prefetch_rate
 * (traces/pace.c). rate 0: no limit.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

struct rate_bucket {
        double tokens;
        uint64_t usec; /* when last refilled (monotonic): 0 at first, so it starts full */
};

/* Refills b up to now: may work start? */
static inline bool rate_ready(struct rate_bucket *b, uint64_t rate, double cap_sec, uint64_t now) {
        if (rate) {
                double cap = (double)rate * cap_sec;
                b->tokens += (double)rate * (double)(now - b->usec) / 1e6;
                if (b->tokens > cap)
                        b->tokens = cap;
        }
        b->usec = now;
        return !rate || b->tokens > 0;
}

/* How long until work may start again (µs), after rate_ready said no. */
static inline uint64_t rate_wait_usec(const struct rate_bucket *b, uint64_t rate) {
        /* At most an hour (a huge debt at a tiny rate would overflow). */
        return rate && b->tokens <= 0 ? (uint64_t)MIN(-b->tokens / (double)rate * 1e6, 3600e6) + 1 : 0;
}

static inline void rate_spend(struct rate_bucket *b, uint64_t bytes) { b->tokens -= (double)bytes; }
