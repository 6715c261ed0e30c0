/* SPDX-License-Identifier: MIT */
/*
 * The catalog's notification group: creates, deletes and renames beneath
 * tenants that keep a catalog (supervisor/store/catalog.h).
 */
#pragma once

#include "tierd.h"

/* Opens the filesystem's group if one of its tenants keeps a catalog (and
 * it has none yet). */
int catalogwatch_open(struct tiered_fs *fs);
void catalogwatch_close(struct tiered_fs *fs);
/* The renames (and lost events) heard on fs so far, all that are queued
 * read first: a walk that saw this number change may have missed a tree
 * moved under it. */
uint64_t catalogwatch_renames(struct tiered_fs *fs);
