/* SPDX-License-Identifier: MIT */
/*
 * Progressive hydration ("restore": "progressive", or "hydrate_pinned" for
 * pinned files only): a file read in part is then fetched whole in the
 * background, at prefetch priority, so a file opened once becomes whole
 * without further stalls. The readers' own fills
 * go first: the worker serves every reader before any prefetch fill
 * (worker/main.c), and a reader of a range on its way waits for that fill,
 * never for a second one (dispatch.c).
 */
#pragma once

#include <fcntl.h> /* struct file_handle */

#include "tierd.h"

/* Files of a tenant fetched whole at once: the rest wait their turn. */
#define HYDRATE_FILES 2
/* Files waiting their turn: a file read while the queue is full is not
 * queued (its next read asks again). */
#define HYDRATE_QUEUE 1024

/* Does the tenant fetch files read in part whole (all, or pinned ones)? */
static inline bool hydrate_wanted(const struct tenant *tn) {
        return tn->cfg->restore_progressive || tn->cfg->hydrate_pinned;
}

/* A reader parked on part of the file behind fh (route: its container):
 * the whole file comes next (with "hydrate_pinned" alone, if it is
 * pinned). A bounded append on the event path; the fetches start from the
 * loop, later. False: not queued (the queue is full), so the file's next
 * read asks again. */
bool hydrate_touched(struct tenant *tn, const struct file_handle *fh, uint64_t route);
/* Nothing more starts (tierd stops, or the tenant goes); fetches in flight
 * finish, unwatched. */
void hydrate_stop(struct tenant *tn);
