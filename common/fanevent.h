/* SPDX-License-Identifier: MIT */
/* Reading the info records of a fanotify event (tierd and the holder's
 * guard both read pre-content events). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fanotify-uapi.h"

/* The range a FAN_PRE_ACCESS event carries, if any. */
bool fanotify_event_range(const struct fanotify_event_metadata *md, uint64_t *offset, uint64_t *count);

/* Answers the pending event with fd number `number` in the group (the
 * kernel matches answers by number only): true if one was there. */
bool fanotify_answer_number(int group_fd, int number, uint32_t response);

/* Events queued in the group now: FIONREAD counts FAN_EVENT_METADATA_LEN
 * bytes per event, whatever its length with its info records (0 when none
 * or on error). */
size_t fanotify_queued(int group_fd);

/* Reads up to max events of the group (0: those queued now, never "until
 * the queue is empty", which a steady writer could keep its reader in for
 * ever) into buf of len bytes, aligned for fanotify_event_metadata, and
 * hands each on. The handler owns an event's fd. Returns the number read. */
typedef void fanotify_handler(const struct fanotify_event_metadata *md, void *userdata);
size_t fanotify_drain(int group_fd, void *buf, size_t len, size_t max, fanotify_handler *handle, void *userdata);
