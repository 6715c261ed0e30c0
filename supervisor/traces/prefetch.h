/* SPDX-License-Identifier: MIT */
/*
 * A trace fetched ahead of its readers: the ranges the trace name's past
 * runs touched, in the order they did, at most PREFETCH_FILES files at a
 * time, at prefetch priority on the readers' worker (PROTO_FILL_PREFETCH).
 * A reader of a range on its way waits for that fill, never for a second
 * one (the fill is the file's, dispatch.c). A file whose content changed
 * since the trace, or that is gone, is skipped and logged; a trace object
 * that is not one is refused.
 */
#pragma once

#include "tierd.h"

/* Files in flight: about what the worker runs at prefetch priority at once
 * (all its threads but one), so that few prefetch fills wait queued in the
 * worker, where a reader that needs one would wait behind the others. More
 * fetched no faster in make bench (row 11). */
#define PREFETCH_FILES 4

/* Starts fetching trace name ahead of c's readers (NULL: the host's). */
int prefetch_start(struct tenant *tn, struct container *c, const char *name);
/* Its container goes (or tierd stops): nothing more starts; what is in
 * flight finishes, unwatched. */
void prefetch_cancel(struct prefetch *p);
/* tierd stops: every prefetch is cancelled (what is in flight finishes). */
void prefetch_stop_all(struct tierd *t);
