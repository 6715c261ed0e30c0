/* SPDX-License-Identifier: MIT */
/*
 * Access traces: what a container's (or the host's) readers touch first
 * in the tenant's "trace_window" after it starts, kept in the tenant's
 * store (traceformat.h) and merged across runs, so that the next start
 * with the same trace name can fetch it ahead of them (prefetch.h).
 *
 * Recording is a bounded append on the event path (trace_touch): no I/O,
 * no lookup beyond the reader's container. Naming the files (handle to
 * path) runs on a thread of its own when the window closes; reading,
 * merging and writing the object go through the tenant's worker.
 */
#pragma once

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>

#include "stub.h"
#include "tierd.h"

#define TRACE_TOUCHES_MAX 8192 /* first touches one run records; more are dropped (logged) */
#define TRACE_SAVES_WAITING 16 /* runs of one name waiting for the one being saved; more are dropped (logged) */

struct trace_recording;

/* Records route's readers (c: a container's; NULL: the tenant's host
 * readers) for the tenant's trace_window, as the trace name. -EBUSY: one
 * is recording already; -EOPNOTSUPP: the tenant's traces are off. */
int trace_record_start(struct tenant *tn, struct container *c, const char *name);
/* A reader of route touched [start, end) of the file of the event's fd,
 * whose stub is s: appended to route's recording, if it has one. O(1)
 * (a handle of the fd, no I/O, taken only while recording). False
 * while the recording would still learn from the file's reads: its touch
 * does not cover the whole file yet, or route is not one a recording
 * follows (another reader must not make the file silent for it). */
bool trace_touch(struct tenant *tn, uint64_t route, int fd, const struct stub *s, uint64_t start, uint64_t end);
/* Is a recording of the tenant open? A file made whole meanwhile gets no
 * ignore mark at once: its reads are heard (recorded as reads of a whole
 * file, which count all its traced ranges) until a recording's touch
 * covers the file, or until the window is over; then it gets it. Until
 * then, for every reader of the tenant, it costs what a partly restored
 * file costs: an event a read. */
bool trace_watching(const struct tenant *tn);
/* path (beneath the subvolume) was fetched ahead for rec's run (NULL:
 * none records): bytes no read of the run touches are counted wasted. */
void trace_fetched_ahead(struct trace_recording *rec, const char *path, uint64_t bytes);
/* The recording ends early (its container goes): what it has is saved,
 * unless it has nothing. */
void trace_record_end(struct trace_recording *rec, const char *why);
/* tierd stops, or hands over: dropped, unsaved. */
void trace_record_drop(struct trace_recording *rec);
/* tierd stops: runs waiting for another node's save of their name to end
 * are dropped (logged), as those queued behind a save are. */
void trace_saves_stop(struct tenant *tn);
/* The tenant's policy was reloaded: with trace_window "0s" its open
 * recordings are dropped and its prefetches cancelled. */
void trace_policy_changed(struct tenant *tn);

/* The trace name as stored: done(userdata, 0, NULL, trace), or a negative
 * errno (-ENOENT: none yet; -EINVAL: refused, why says how). */
struct trace;
typedef void (*trace_read_t)(void *userdata, int error, const char *why, const struct trace *t);
int trace_read(struct tenant *tn, const char *name, trace_read_t done, void *userdata);
