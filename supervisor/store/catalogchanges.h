/* SPDX-License-Identifier: MIT */
/*
 * The changes the catalog's watch heard (catalogwatch.c) and has not
 * applied yet, one queue a filesystem: each event's directory is opened
 * by its handle on a thread (catalogchanges.c), and the changes are
 * applied on the loop in the order heard.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "tierd.h"

enum change_kind {
        CHANGE_CREATED,
        CHANGE_DELETED,
        CHANGE_REPLACED, /* deleted and made again: one event (the kernel merges them, their order lost) */
        CHANGE_RENAMED,
        CHANGE_ARCHIVED,
};

/* An event's directory (by handle) and entry name. */
struct dfid_name {
        const struct file_handle *fh;
        const char *name;
};

struct catalog_changes *catalog_changes_new(struct tiered_fs *fs);
/* A batch on its thread is left to end, unheard. */
void catalog_changes_free(struct catalog_changes *cc);
/* Queued (a and b copied): created, deleted and replaced name a; renamed,
 * a the new entry and b the old; child: the entry's own handle, if told.
 * 0 (or dropped for want of room, and its tenant's catalog spilled), or
 * -ENOMEM. */
int catalog_changes_add(struct catalog_changes *cc, enum change_kind kind, bool dir, const struct dfid_name *a,
                        const struct dfid_name *b, const struct file_handle *child);
/* Applies what it can and gives the rest to a thread, if none runs. */
void catalog_changes_advance(struct catalog_changes *cc);
/* The changes waiting are dropped (not a running batch's): every catalog
 * of the filesystem gets a snapshot instead, and releases nothing until
 * it is in the store. */
void catalog_changes_spill(struct catalog_changes *cc, const char *why);
