/* SPDX-License-Identifier: MIT */
/*
 * Whose a directory is, by its file handle, as far as tierd has seen:
 * the catalog's watch hears a change as a directory's handle and a name,
 * and only a thread may open that handle (a dropped dentry is found again
 * through its parents, catalogchanges.c). So the loop tells whose a change
 * is from what it saw before: each tenant's root, the directories a
 * tenant was heard to make or move, and those a thread named since.
 * Bounded: at most OWNER_MAX directories a tenant, the least recently
 * heard of forgotten first, so a tenant's many directories push out only
 * its own; and each tenant's root, kept apart (pinned).
 */
#pragma once

#include <fcntl.h>
#include <stddef.h>

#define OWNER_MAX 8192 /* directories remembered, each tenant */

struct catalog_owners;

/* n_tenants: tierd's (an index is below it); n_here: how many of them
 * the table is for (its size). */
struct catalog_owners *catalog_owners_new(size_t n_tenants, size_t n_here);
void catalog_owners_free(struct catalog_owners *o);
/* The tenant (its index) fh was last seen in, or -1: not known. */
int catalog_owners_get(struct catalog_owners *o, const struct file_handle *fh);
/* fh is tenant's (-1: forgotten); 0, or -ENOMEM (then not known). A
 * pinned handle stays as pinned. */
int catalog_owners_set(struct catalog_owners *o, const struct file_handle *fh, int tenant);
/* fh is tenant's for good (a tenant's root): never forgotten, cleared or
 * counted. 0, or -ENOMEM. */
int catalog_owners_pin(struct catalog_owners *o, const struct file_handle *fh, int tenant);
/* Everything forgotten but what is pinned: a directory moved between
 * tenants takes its whole subtree along, and which directories are
 * beneath it is not known. In time linear in what is remembered. */
void catalog_owners_clear(struct catalog_owners *o);
size_t catalog_owners_count(const struct catalog_owners *o, int tenant);
