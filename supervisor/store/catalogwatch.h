/* SPDX-License-Identifier: MIT */
/*
 * The catalog's notification group: creates, deletes and renames beneath
 * tenants that keep a catalog (supervisor/store/catalog.h).
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "tierd.h"

/* Opens the filesystem's group if one of its tenants keeps a catalog (and
 * it has none yet). */
int catalogwatch_open(struct tiered_fs *fs);
void catalogwatch_close(struct tiered_fs *fs);
/* The renames (and lost events) heard on fs so far, all that are queued
 * read first: a walk that saw this number change may have missed a tree
 * moved under it. */
uint64_t catalogwatch_renames(struct tiered_fs *fs);

struct catalog_pending;
/* A file archived while changes heard before it wait to be applied:
 * queued behind them, and given to catalog_note_entry() in turn (true);
 * false: none wait, the caller queues it now. */
bool catalogwatch_defer(struct tenant *tn, struct catalog_pending *p);
/* A file archived (dev, ino) waits behind such changes. */
bool catalogwatch_holds(const struct tiered_fs *fs, dev_t dev, ino_t ino);
/* Reads what the kernel queued so far (bounded: 16 reads), and applies
 * or hands to a thread what it can. */
void catalogwatch_read(struct tiered_fs *fs);
