/* SPDX-License-Identifier: MIT */
/*
 * prefetch_rate: what a tenant fetches ahead of its readers (a trace's
 * prefetch, a progressive hydration) starts at most this many bytes a
 * second, both together, averaged over what starts: a token bucket of a
 * second's worth, spent by a file's (or range's) bytes as its fetch
 * starts. Readers' own fills are never paced.
 */
#pragma once

#include "tierd.h"

/* b at rate (0: none): 1, work may start now; 0, not yet, and *timer (made
 * the first time, kept: its owner frees it) calls handler(userdata) once it
 * may; <0 the timer could not be set. */
int pace_bucket(struct tenant *tn, struct rate_bucket *b, uint64_t rate, sd_event_source **timer,
                sd_event_time_handler_t handler, void *userdata);
/* May a fetch start now? If not, *timer (made the first time, kept: its
 * owner frees it) calls handler(userdata) once one may. */
bool pace_ready(struct tenant *tn, sd_event_source **timer, sd_event_time_handler_t handler, void *userdata);
/* A fetch of bytes starts. */
void pace_spend(struct tenant *tn, uint64_t bytes);
