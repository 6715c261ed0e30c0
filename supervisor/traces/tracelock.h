/* SPDX-License-Identifier: MIT */
/*
 * The save lock of a trace name in a tenant's store. A trace is read,
 * merged and written whole, and no store tierd speaks offers a
 * compare-and-swap on an object that is there already, so two nodes saving
 * runs of one name at once (the replicas of one workload end their windows
 * together) would each merge into the same old object, and one of the two
 * runs would be lost. So a save takes the name's lock first: an object
 * ("tracelock/NAME") created only if absent (S3 If-None-Match, a file
 * store's RENAME_NOREPLACE, WebDAV Overwrite: F), saying which node took it and when.
 *
 * A node that finds it there polls, about once a second. The lock is its
 * dead holder's (deleted, and taken) when it says it is older than
 * TRACE_LOCK_STALE_SEC and the store has not seen it written for as long
 * (store_delete_if_old: a lock taken afresh meanwhile stays), or when this
 * node has read it unchanged for TRACE_LOCK_STALE_SEC by its own clock,
 * whatever it says: clocks apart, a store that gives no ages, a time in
 * the future. A node that waited TRACE_LOCK_WAIT_SEC gives up: its run is
 * not saved, logged. A store that cannot create only-if-absent is saved
 * to without a lock, as before there was one.
 *
 * What it does not give: a save that takes longer than
 * TRACE_LOCK_STALE_SEC may see its lock broken and another node save at
 * the same time; a WebDAV server whose MOVE is not atomic (nginx) or an
 * S3 store that ignores If-None-Match lets two nodes both take it.
 */
#pragma once

#include <stdbool.h>

#include "tierd.h"

#define TRACE_LOCK_STALE_SEC 120 /* a save takes seconds: a lock this old is its dead holder's */
#define TRACE_LOCK_WAIT_SEC 180  /* longer than the above: a dead holder's lock is broken first */

struct trace_lock;

/* done(userdata, 0) once the lock is held (or the store cannot lock:
 * logged), else a negative errno: -ETIMEDOUT another node held it
 * throughout, or the store's. Called later, never from within. */
typedef void (*trace_lock_done_t)(void *userdata, int error);
int trace_lock_take(struct tenant *tn, const char *name, trace_lock_done_t done, void *userdata,
                    struct trace_lock **ret);
/* Waiting between two polls, nothing of it in the store's hands: it can be
 * released at a stop without a callback left to come. */
bool trace_lock_waiting(const struct trace_lock *l);
/* Given back, once done was called or while it is waiting (never while
 * a request of it is in the store's hands): a held lock is deleted from
 * the store (not waited for); a waiting one stops waiting, its done is
 * not called. */
void trace_lock_release(struct trace_lock *l);
