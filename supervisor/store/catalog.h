/* SPDX-License-Identifier: MIT */
/*
 * A tenant's catalog, kept in its own store ("catalog": true), so that its
 * tree can be found again without this node's disk (tierctl tenant import).
 * Layout under the store's prefix:
 *
 *   catalog/epoch/<8 hex>     one per writer, created with If-None-Match: *;
 *                             {"epoch", "start_seq", "node"}. The writer of
 *                             the highest epoch is the only one; a writer
 *                             whose next epoch exists is fenced, and its
 *                             journal objects from that epoch's start_seq on
 *                             are ignored by readers.
 *   catalog/journal/<16 hex>  numbered from 1, each created once (If-None-
 *                             Match: *): the entries of about a second.
 *   catalog/snapshot/<16 hex>.<8 hex>
 *                             the whole tree as of that journal number, by
 *                             the writer of that epoch.
 *   catalog/snapshots/<8 hex> the snapshots an epoch's writer wrote:
 *                             [{"seq","time","epoch"}], for --at. A fenced
 *                             writer's snapshot past its epoch's end is
 *                             ignored.
 *
 * The format of journal and snapshot objects is common/catalog.h.
 * Entries are written after the object is verified; a file may be released
 * only once its entry is in the store (catalog_file_durable).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "objkey.h"
#include "stub.h"
#include "tierd.h"

#define CATALOG_KEY_PREFIX OBJECT_CATALOG_PREFIX

/* At start (and when a reload turns "catalog" on): finds or takes the
 * lease, then writes a snapshot of the tree, in the background. */
int catalog_start(struct tenant *tn);
void catalog_stop(struct tenant *tn);
/* tierd stops: an import reads no more of the catalog, and one making its
 * tree stops between two files; its mark stays, and the next start
 * imports again. */
void catalog_import_stop(struct tenant *tn);
/* An import of the tenant has not ended yet: a stop waits for it. */
bool catalog_import_pending(const struct tenant *tn);

/* An archive recorded the stub s on the file open as fd, rel beneath the
 * subvolume: its entry goes out with the next journal object. */
void catalog_note_archived(struct tenant *tn, int fd, const char *rel, const struct stub *s);

/* The tree changed (supervisor/store/catalogwatch.c): rel was created or came
 * by a rename (it is recorded, with all beneath it), or went (with all
 * beneath it, for a directory). */
void catalog_note_created(struct tenant *tn, const char *rel);
void catalog_note_deleted(struct tenant *tn, const char *rel, bool dir);
/* Changes were lost (a queue overflow): a snapshot soon. */
void catalog_note_lost(struct tenant *tn);

/* May the archived file open as fd be released? Yes when the tenant keeps
 * no catalog, or the file's entry is in the store; else *why says why not
 * and catalog_when_written() tells when to ask again: the callback runs
 * once, after the next write or failure (or when the catalog stops); it
 * returns -ESTALE (fenced, or no catalog) or -EIO (the store fails now)
 * when there is nothing to wait for. */
bool catalog_file_durable(struct tenant *tn, int fd, const char **why);
int catalog_when_written(struct tenant *tn, void (*callback)(void *userdata), void *userdata);

/* Why a collection (supervisor/store/gc.c) cannot run now, or NULL: it needs
 * the catalog, written by this node, and no import. */
const char *catalog_busy_why(const struct tenant *tn);
/* The objects named by entries not in the store yet. */
void catalog_pending_objects(const struct tenant *tn, void (*each)(void *userdata, const uint8_t hash[32]),
                             void *userdata);

/* The tree the catalog holds now (the latest snapshot and the journal
 * after it), read without taking the lease: done(userdata, 0, NULL, tree),
 * the tree valid during the call only (done may take its entries, leaving
 * it empty), or an error and a message.
 * -EALREADY while an import (or another read) runs. */
struct catalog_entries;
int catalog_read_tree(struct tenant *tn,
                      void (*done)(void *userdata, int error, const char *message, struct catalog_entries *tree),
                      void *userdata);

/* tierctl tenant import: recreates the tree the catalog holds (as of
 * at_usec, CLOCK_REALTIME; 0: the latest) as released stubs beneath the
 * tenant's subvolume, and takes the lease. done() gets a message either
 * way (static storage of the call); progress() where it is (phase: static
 * text; the catalog objects read, then the entries to make), or NULL. */
int catalog_import(struct tenant *tn, uint64_t at_usec, uint64_t flags,
                   void (*done)(void *userdata, int error, const char *message),
                   void (*progress)(void *userdata, const char *phase, uint64_t done, uint64_t total), void *userdata);
/* flags: files keep the setuid and setgid bits the catalog gives them.
 * Without it they are dropped: whoever could write the catalog (a key
 * holder on another node) must not make setuid files here. */
#define CATALOG_IMPORT_KEEP_SETUID UINT64_C(1)
#define CATALOG_IMPORT_FLAGS CATALOG_IMPORT_KEEP_SETUID
/* tierd's own, never a caller's: an import that did not end, again at a
 * start (its directories there already are its own, half made). */
#define CATALOG_IMPORT_RESUMED (UINT64_C(1) << 63)
