/* SPDX-License-Identifier: MIT */
/*
 * The catalog's view of a tenant's tree on disk: entries made from files,
 * the whole tree walked for a snapshot, and a tree made again from entries
 * by an import. Everything is resolved beneath the subvolume through
 * tierd's private mount, following no symlink.
 */
#pragma once

#include <stddef.h>

#include "catalog-format.h"
#include "stub.h"
#include "tierd.h"

/* The entry of fd (a file, directory or symlink opened O_PATH|O_NOFOLLOW
 * for the last), at rel beneath the subvolume; s is the file's stub, or
 * NULL. -ENODATA: nothing the catalog keeps (a file never archived, a
 * device...). */
int catalog_entry_from_fd(int fd, const char *rel, const struct stub *s, struct catalog_entry *ret);

/* Every entry of the tenant's tree, in no particular order. */
#define CATALOG_DEPTH_MAX 256 /* directories a walk goes down */

struct catalog_entries {
        struct catalog_entry *e;
        size_t n, allocated;
        size_t failed; /* entries a walk could not make (logged): the catalog misses them */
        size_t limit;  /* more than this many: -E2BIG (0: no limit) */
        size_t bytes, limit_bytes; /* their catalog_entry_bytes(); more: -E2BIG (0: no limit) */
};
void catalog_entries_done(struct catalog_entries *l);
int catalog_entries_add(struct catalog_entries *l, struct catalog_entry *e); /* takes e's contents */
/* start: "" for the whole tree; else that entry and all beneath it. */
int catalog_walk(struct tenant *tn, const char *start, struct catalog_entries *ret);

struct catalog_made {
        uint64_t files, bytes, dirs, symlinks, existing, failed;
};
/* Makes the entries (puts only, parents before children: sorted by path)
 * beneath the subvolume; what exists already is left as it is. */
int catalog_make_tree(struct tenant *tn, struct catalog_entries *l, struct catalog_made *made);
