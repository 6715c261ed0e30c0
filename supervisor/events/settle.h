/* SPDX-License-Identifier: MIT */
/*
 * Pre-content events whose accessor is not asleep yet, so that what it is
 * doing (a read, a write, a truncate) cannot be told: they wait here, and
 * the event loop goes on serving others meanwhile.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fanotify-uapi.h"
#include "tierd.h"

/* Serves md again (dispatch_pre_content_retry) within a millisecond or
 * so; since_usec: when it was first looked at. Its fd stays in flight. */
int settle_later(struct tiered_fs *fs, const struct fanotify_event_metadata *md, uint64_t since_usec);
bool settle_idle(const struct tierd *t);
/* Answers every waiting event with error (0: forgets them, unanswered:
 * they are in the in-flight record, for the next tierd). */
void settle_end_all(struct tierd *t, int error);
