/* SPDX-License-Identifier: MIT */
/* Reading the info records of a fanotify event (tierd and the holder's
 * guard both read pre-content events). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fanotify-uapi.h"

/* The range a FAN_PRE_ACCESS event carries, if any. */
bool fanotify_event_range(const struct fanotify_event_metadata *md, uint64_t *offset, uint64_t *count);

/* Answers the pending event with fd number `number` in the group (the
 * kernel matches answers by number only): true if one was there. */
bool fanotify_answer_number(int group_fd, int number, uint32_t response);
