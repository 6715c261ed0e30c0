/* SPDX-License-Identifier: MIT */
/*
 * The catalog's view of a tenant's tree on disk: entries made from files,
 * the whole tree walked for a snapshot, and a tree made again from entries
 * by an import. Everything is resolved beneath the subvolume through
 * tierd's private mount, following no symlink.
 */
#pragma once

#include <stdatomic.h>

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
/* start: "" for the whole tree; else that entry and all beneath it. On a
 * thread (offthread.h): subvol_fd, the tenant's, is a number the thread
 * kept, copied when the work began: the tenant itself may be freed at an
 * exit meanwhile. */
int catalog_walk(int subvol_fd, const char *start, struct catalog_entries *ret);

struct catalog_made {
        uint64_t files, bytes, dirs, symlinks, existing, failed;
};
/* What making a tree needs, copied: it runs on a thread of its own
 * (offthread.h), while a reload may change the tenant's policy. */
struct catalog_tree_maker {
        int root_fd;                  /* the subvolume through the private mount */
        char tenant[STUB_TENANT_MAX]; /* its name, in stubs and the log */
        uint64_t chunk;               /* for entries that name none */
        const atomic_bool *stop;      /* set (by the loop): -ECANCELED before the next entry */
        bool finish_existing;         /* directories there already as make_dir leaves them (root's, 0700) are finished too */
};
/* Makes the entries (puts only, parents before children: sorted by path)
 * beneath root_fd; what exists already is left as it is; -ECANCELED when
 * told to stop (the directories made so far finished first). The files are
 * released stubs: the quota's file table learns of each when it is filled
 * (dispatch.c), as it holds nothing until then. */
int catalog_make_tree(const struct catalog_tree_maker *m, struct catalog_entries *l, struct catalog_made *made);

/* The tree entries written in this order make: each path's last entry,
 * puts only, none beneath a directory deleted after it. The entries kept
 * are moved from all into ret. */
int catalog_reduce(struct catalog_entries *all, struct catalog_entries *ret);
/* Files of the tree made without their setuid and setgid bits (logged);
 * how many. */
uint64_t catalog_drop_setuid(const char *tenant, struct catalog_entries *tree);
