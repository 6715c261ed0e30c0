/* SPDX-License-Identifier: MIT */
/*
 * tierctl audit TENANT [--repair]: the tenant's stubs, its catalog and its
 * store compared. What it finds:
 *   object-missing    a stub (or a catalog entry) names an object the store
 *                     does not hold; manifest-missing, the same for its
 *                     chunk manifest
 *   not-in-catalog    a file, directory or symlink the catalog does not
 *                     have, or has otherwise (another object, another type)
 *   catalog-only      a catalog entry with nothing on disk
 *   unreferenced      an object neither a stub of the subvolume nor the
 *                     catalog names (tierctl gc, which also keeps what the
 *                     tenant's snapshots and the catalog's history name,
 *                     collects it after the grace period)
 * Files lost are findings, not a failure of the audit.
 * --repair does what is safe: an archived file whose object is gone (its
 * bytes are all here) is uploaded again; a catalog that differs from the
 * disk gets a new snapshot, made from the disk. A released file whose
 * object is gone cannot be repaired: its bytes are nowhere else.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tierd.h"

struct audit_finding {
        const char *kind; /* static */
        char *name;       /* a path beneath the subvolume (escaped to UTF-8) or an object key */
        const char *detail; /* static */
};

/* done(userdata, 0 or a negative errno, a summary or why not, the
 * findings (valid during the call only), how many). */
typedef void (*audit_done_t)(void *userdata, int error, const char *message, const struct audit_finding *findings,
                             size_t n);
typedef void (*audit_progress_t)(void *userdata, const char *phase, uint64_t done, uint64_t total);
int audit_start(struct tenant *tn, bool repair, audit_done_t done, audit_progress_t progress, void *userdata,
                const char **why);
/* Tierd stops, or the tenant's catalog: done() told -ECANCELED. */
void audit_stop(struct tenant *tn);
