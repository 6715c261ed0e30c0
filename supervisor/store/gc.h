/* SPDX-License-Identifier: MIT */
/*
 * tierctl gc TENANT [--dry-run]: the objects of a tenant's store that
 * nothing refers to any more are deleted, in two phases.
 *
 *   mark   every object named by the tenant's catalog within its retention
 *          period ("catalog_retention": the snapshot current when the
 *          period began, every snapshot and journal object since, and the
 *          entries not written yet), and every object a stub anywhere on
 *          the tenant's filesystem names (its snapshots included);
 *   sweep  every object of the store's listing that is not marked and was
 *          last changed before the grace period ("gc_grace") is deleted,
 *          its age checked again by the worker at the moment of the delete;
 *          and every access trace (nothing refers to one) last saved
 *          before "trace_keep", checked the same way.
 *
 * Why nothing referenced goes:
 *   - an archive that finds its object in the store refreshes it before
 *     relying on it, under the worker's lock that also covers the age check
 *     and delete (worker/backend.c): either the refresh comes first, and the
 *     delete finds the object young, or the delete does, and the archive
 *     uploads the object again;
 *   - an object an archive reports after the collection began is kept,
 *     whatever its age (gc_note_archived);
 *   - an import (which makes stubs) and a collection never run together;
 *   - anything the mark phase cannot read (a corrupt catalog object, a
 *     directory it cannot open) stops the collection before any delete.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "tierd.h"

/* done(userdata, 0 or a negative errno, a summary or why not: static
 * storage of the call). -EBUSY: an import or a collection runs. */
typedef void (*gc_done_t)(void *userdata, int error, const char *message);
/* Where it is: phase (static text), done of total items (catalog objects
 * read, then objects deleted). */
typedef void (*gc_progress_t)(void *userdata, const char *phase, uint64_t done, uint64_t total);
int gc_start(struct tenant *tn, bool dry_run, gc_done_t done, gc_progress_t progress, void *userdata,
             const char **why);
bool gc_running(const struct tenant *tn);
/* An archive recorded a stub naming these objects (manifest may be NULL). */
void gc_note_archived(struct tenant *tn, const uint8_t sha256[32], const uint8_t *manifest);
/* Canceled, or the tenant goes: a collection running deletes nothing more
 * and ends, its done() told -ECANCELED. */
void gc_stop(struct tenant *tn);
