/* SPDX-License-Identifier: MIT */
/*
 * What a tenant's catalog hears between snapshots (files archived, entries
 * made, deleted and renamed: catalogwatch.c), queued for the writer's next
 * journal object (catalogjournal.c). Each change costs the event loop O(1): a
 * directory renamed or made is queued as a *subtree*, whose entries are
 * walked on a thread when the writer comes to it, in queue order. And the
 * queue is bounded: past CATALOG_QUEUE_MAX changes (a tenant renaming a big
 * directory back and forth), or a subtree holding more than the room left,
 * everything waiting is dropped and a snapshot (walked on a thread too) has
 * it instead; nothing of the tenant is released until that is in the
 * store. So a rename storm costs its own tenant's catalog, never tierd's
 * loop or memory.
 */
#include "catalog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog-internal.h"
#include "catalogtree.h"
#include "catalogwatch.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "namer.h"

/* An entry could not be made: releases stop until a snapshot walked after
 * this has it. */
static void unrecorded(struct catalog *c, const char *rel, int error) {
        log_error_errno(error, "tenant %s: catalog: cannot record %s: %m; no release until a snapshot has it",
                        c->tn->cfg->name, rel);
        c->unrecorded = true;
        c->dropped_gen++; /* a snapshot walking now may have missed it */
        c->snapshot_due = true;
        /* At once, but not more often than spills take them. */
        c->snapshot_after_usec = c->snapshot_usec ? c->snapshot_usec + CATALOG_SNAPSHOT_SPILL_USEC : 0;
}

void catalog_queue_drop(struct catalog *c) {
        catalog_pending_free_list(c->queue);
        c->queue = NULL;
        c->queue_tail = &c->queue;
        c->n_queued = c->n_subtrees = 0;
        c->queued_bytes = 0;
        c->dropped_gen++;
}

/* More than may wait: a snapshot instead, at most one per
 * CATALOG_SNAPSHOT_SPILL_USEC. */
static void spill(struct catalog *c, const char *why) {
        if (!c->unrecorded)
                log_warning("tenant %s: catalog: %s: the %zu changes waiting are dropped and a snapshot records them "
                            "instead; nothing of the tenant is released until it is in the store",
                            c->tn->cfg->name, why, c->n_queued);
        catalog_queue_drop(c);
        c->unrecorded = true;
        c->spilled = true; /* until a snapshot walked after this is in the store */
        c->snapshot_due = true;
        c->snapshot_after_usec = c->snapshot_usec + CATALOG_SNAPSHOT_SPILL_USEC;
}

/* A name the catalog cannot hold (too long) is never queued: it would
 * fail the journal object it is in. */
static void queue_entry(struct catalog *c, struct catalog_pending *p) {
        if (!catalog_path_valid(p->e.path, p->e.path_len)) {
                catalog_entry_done(&p->e);
                free(p);
                return;
        }
        /* Dropped changes wait for a snapshot: this one is in it too (its
         * walk begins after this), no need to queue or walk it. */
        if (c->spilled || c->n_queued >= CATALOG_QUEUE_MAX ||
            c->queued_bytes + catalog_entry_bytes(&p->e) > CATALOG_QUEUE_MAX_BYTES) {
                catalog_entry_done(&p->e);
                free(p);
                if (c->spilled)
                        c->dropped_gen++;
                else
                        spill(c, "more changes wait than a catalog queues");
                return;
        }
        *c->queue_tail = p;
        c->queue_tail = &p->next;
        c->n_queued++;
        c->queued_bytes += catalog_entry_bytes(&p->e);
        c->n_subtrees += p->subtree;
}

static void pending_objects(const struct catalog_pending *p, void (*each)(void *userdata, const uint8_t hash[32]),
                            void *userdata) {
        for (; p; p = p->next)
                if (!p->subtree && p->e.op == CATALOG_PUT && p->e.type == CATALOG_FILE) {
                        each(userdata, p->e.sha256);
                        if (p->e.has_manifest)
                                each(userdata, p->e.manifest);
                }
}

void catalog_pending_objects(const struct tenant *tn, void (*each)(void *userdata, const uint8_t hash[32]),
                             void *userdata) {
        if (!tn->catalog)
                return;
        pending_objects(tn->catalog->sending, each, userdata);
        pending_objects(tn->catalog->queue, each, userdata);
}

void catalog_note_archived(struct tenant *tn, int fd, const char *rel, const struct stub *s) {
        struct catalog *c = tn->catalog;
        struct catalog_pending *p;
        struct stat st;
        int r;

        if (!c || c->state == CATALOG_FENCED)
                return;
        if (fstat(fd, &st) < 0 || !(p = calloc(1, sizeof(*p)))) {
                unrecorded(c, rel, -ENOMEM);
                catalog_writer_continue(c);
                return;
        }
        p->dev = st.st_dev;
        p->ino = st.st_ino;
        r = catalog_entry_from_fd(fd, rel, s, &p->e);
        if (r < 0) {
                free(p);
                /* ENODATA: a name the catalog cannot hold: catalog_file_durable
                 * refuses the file's release. */
                if (r != -ENODATA)
                        unrecorded(c, rel, r);
                catalog_writer_continue(c);
                return;
        }
        /* Behind what was heard before it (read now) and is not applied yet. */
        catalogwatch_read(tn->fs);
        if (catalogwatch_defer(tn, p))
                return;
        queue_entry(c, p);
        catalog_writer_continue(c);
}

void catalog_note_entry(struct tenant *tn, struct catalog_pending *p) {
        struct catalog *c = tn->catalog;

        if (!c || c->state == CATALOG_FENCED) {
                catalog_pending_free_list(p);
                return;
        }
        queue_entry(c, p);
        catalog_writer_continue(c);
}

/* A change known by its path only (a subtree to walk, a delete), queued;
 * without memory, the catalog knows it misses rel. */
static void queue_path(struct catalog *c, const char *rel, bool subtree, enum catalog_op op, int type) {
        struct catalog_pending *p = calloc(1, sizeof(*p));

        if (!p || !(p->e.path = strdup(rel))) {
                free(p);
                unrecorded(c, rel, -ENOMEM);
        } else {
                p->e.path_len = strlen(rel);
                p->e.op = op;
                p->e.type = type;
                p->subtree = subtree;
                queue_entry(c, p);
        }
        catalog_writer_continue(c);
}

/* The entry at rel and everything beneath it, walked when the writer comes
 * to it: on the loop, only a note. */
void catalog_note_created(struct tenant *tn, const char *rel) {
        struct catalog *c = tn->catalog;

        if (c && c->state != CATALOG_FENCED)
                queue_path(c, rel, true, 0, 0);
}

void catalog_note_deleted(struct tenant *tn, const char *rel, bool dir) {
        struct catalog *c = tn->catalog;

        if (c && c->state != CATALOG_FENCED && *rel)
                queue_path(c, rel, false, CATALOG_DEL, dir ? CATALOG_DIR : 0);
}

void catalog_note_spilled(struct tenant *tn, const char *why) {
        struct catalog *c = tn->catalog;

        if (!c || c->state == CATALOG_FENCED)
                return;
        spill(c, why);
        catalog_writer_continue(c);
}

void catalog_note_lost(struct tenant *tn) {
        struct catalog *c = tn->catalog;
        if (!c)
                return;
        c->snapshot_due = true;
        catalog_writer_continue(c);
}

static bool pending_has(const struct catalog_pending *p, const struct stat *st) {
        for (; p; p = p->next)
                if (p->dev == st->st_dev && p->ino == st->st_ino)
                        return true;
        return false;
}

#define NAME_UNFIT "its path is longer or deeper than a catalog keeps (4096 bytes, 256 directories)"

/* Can the catalog hold the file's name at all? NULL, or why not. */
static const char *name_unfit(struct tenant *tn, int fd) {
        _cleanup_free_ char *rel = NULL;
        size_t depth = 0;
        if (usage_name_unknown(usage_name_of_fd(tn, fd, &rel)))
                return "its dentry was dropped and its name is not known now: try again in a moment";
        if (!rel || !catalog_path_valid(rel, strlen(rel)))
                return NAME_UNFIT;
        for (const char *p = rel; (p = strchr(p, '/')); p++)
                depth++;
        return depth <= CATALOG_DEPTH_MAX ? NULL : NAME_UNFIT;
}

bool catalog_file_durable(struct tenant *tn, int fd, const char **why) {
        struct catalog *c = tn->catalog;
        struct stat st;

        if (!tn->cfg->catalog)
                return true;
        if (!c || c->state == CATALOG_FENCED) {
                *why = "the tenant's catalog is written by another node: nothing is released here";
                return false;
        }
        if ((*why = name_unfit(tn, fd)))
                return false;
        if (c->n_subtrees) {
                *why = "the entries of a directory renamed or made are being recorded: try again in a moment";
                return false;
        }
        if (c->unrecorded) {
                *why = "the catalog misses entries it could not make (see tierd's log): no release until a snapshot "
                       "has them";
                return false;
        }
        if (!c->first_snapshot_done || fstat(fd, &st) < 0 || pending_has(c->queue, &st) || pending_has(c->sending, &st) ||
            catalogwatch_holds(tn->fs, st.st_dev, st.st_ino)) {
                *why = c->backoff_usec ? "the catalog cannot be written to the store now (see tierd's log)"
                                       : "its catalog entry is not in the store yet";
                return false;
        }
        return true;
}

/* ---- subtrees, walked on a thread ---- */

struct subtree_walk {
        struct catalog *c; /* not touched by the thread */
        int subvol_fd;     /* the tenant's, kept by the thread (catalog_walk) */
        uint64_t gen;      /* c->dropped_gen at the start: a drop meanwhile voids the walk */
        size_t n, room;    /* subtrees; entries the queue may still take */
        size_t room_bytes; /* and bytes */
        char **rels;       /* the subtrees, in queue order */
        struct catalog_entries *out;
        int error;
};

static void subtree_walk_free(struct subtree_walk *w) {
        for (size_t i = 0; i < w->n; i++) {
                free(w->rels[i]);
                catalog_entries_done(&w->out[i]);
        }
        free(w->rels);
        free(w->out);
        free(w);
}

static void subtree_walk_run(void *userdata) {
        struct subtree_walk *w = userdata;
        size_t total = 0;

        for (size_t i = 0; i < w->n && w->error == 0; i++) {
                if (total >= w->room) {
                        w->error = -E2BIG;
                        break;
                }
                w->out[i].limit = w->room - total;
                w->out[i].limit_bytes = w->room_bytes;
                w->error = catalog_walk(w->subvol_fd, w->rels[i], &w->out[i]);
                total += w->out[i].n;
                w->room_bytes -= MIN(w->room_bytes, w->out[i].bytes);
        }
}

/* Each subtree walked gives way to its entries, where it stood. */
static int subtrees_splice(struct catalog *c, struct subtree_walk *w) {
        struct catalog_pending **at = &c->queue;
        size_t i = 0;

        while (*at && i < w->n) {
                struct catalog_pending *p = *at;
                if (!p->subtree) {
                        at = &p->next;
                        continue;
                }
                struct catalog_pending *next = p->next;
                c->queued_bytes -= MIN(c->queued_bytes, catalog_entry_bytes(&p->e));
                catalog_entry_done(&p->e);
                free(p);
                *at = next;
                c->n_queued--;
                c->n_subtrees--;
                if (w->out[i].failed)
                        unrecorded(c, w->rels[i], -EIO);
                for (size_t k = 0; k < w->out[i].n; k++) {
                        struct catalog_pending *e = calloc(1, sizeof(*e));
                        if (!e)
                                return -ENOMEM;
                        e->e = w->out[i].e[k];
                        w->out[i].e[k] = (struct catalog_entry){};
                        e->next = *at;
                        *at = e;
                        at = &e->next;
                        c->n_queued++;
                        c->queued_bytes += catalog_entry_bytes(&e->e);
                }
                i++;
        }
        if (!*at)
                c->queue_tail = at;
        return 0;
}

static void on_subtrees_walked(void *userdata) {
        struct subtree_walk *w = userdata;
        struct catalog *c = w->c;

        if (!catalog_request_ended(c)) {
                subtree_walk_free(w);
                return;
        }
        if (w->gen == c->dropped_gen) { /* else dropped meanwhile: a snapshot comes */
                int r = w->error < 0 ? w->error : subtrees_splice(c, w);
                if (r == -E2BIG)
                        spill(c, "a directory renamed or made holds more entries than may wait");
                else if (r < 0)
                        spill(c, strerror(-r));
        }
        subtree_walk_free(w);
        catalog_writer_continue(c);
}

static struct subtree_walk *subtree_walk_new(struct catalog *c) {
        struct subtree_walk *w = calloc(1, sizeof(*w));

        if (!w)
                return NULL;
        w->c = c;
        w->subvol_fd = c->tn->subvol_fd;
        w->gen = c->dropped_gen;
        w->room = CATALOG_QUEUE_MAX - MIN(c->n_queued, (size_t)CATALOG_QUEUE_MAX);
        w->room_bytes = CATALOG_QUEUE_MAX_BYTES - MIN(c->queued_bytes, (size_t)CATALOG_QUEUE_MAX_BYTES);
        w->rels = calloc(c->n_subtrees, sizeof(*w->rels));
        w->out = calloc(c->n_subtrees, sizeof(*w->out));
        if (!w->rels || !w->out) {
                subtree_walk_free(w);
                return NULL;
        }
        for (struct catalog_pending *p = c->queue; p && w->n < c->n_subtrees; p = p->next) {
                if (!p->subtree)
                        continue;
                if (!(w->rels[w->n] = strdup(p->e.path))) {
                        subtree_walk_free(w);
                        return NULL;
                }
                w->n++;
        }
        return w;
}

void catalog_subtrees_resolve(struct catalog *c) {
        struct subtree_walk *w = subtree_walk_new(c);
        int r = -ENOMEM;

        if (w) {
                c->busy = true; /* the walk is the writer's request in flight */
                r = offthread_start(c->tn->t->event, &c->tn->subvol_fd, 1, subtree_walk_run, on_subtrees_walked, w, NULL);
                if (r >= 0)
                        return;
                c->busy = false;
                subtree_walk_free(w);
        }
        spill(c, strerror(-r));
        catalog_writer_continue(c);
}
