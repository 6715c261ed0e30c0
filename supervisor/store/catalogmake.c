/* SPDX-License-Identifier: MIT */
/*
 * An import's second half (catalogimport.c reads the catalog): the
 * catalog's lease taken (this node writes it from then on) and its mark
 * written (a start finds an import that did not end, and imports again),
 * then the tree made on a thread, or handed to catalog_read_tree's caller.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalogimport-internal.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "storeio.h"

static void on_lease_read_back(void *userdata, int error, const char *data, size_t len);
static void make_tree(struct catalog *c, int error);

static void on_lease_taken(void *userdata, int error) {
        struct catalog *c = userdata;

        if (!catalog_request_ended(c))
                return;
        uint32_t epoch = c->import->n_epochs + 1;
        if (error == -EEXIST) { /* ours, if a worker died after writing it? */
                char key[STUB_KEY_MAX];
                catalog_epoch_key(epoch, key);
                c->busy = true;
                int r = store_get(c->tn, key, 4096, on_lease_read_back, c);
                if (r < 0) {
                        c->busy = false;
                        import_fail(c, r, "cannot read the catalog's lease back: %s; nothing was made", strerror(-r));
                }
                return;
        }
        make_tree(c, error);
}

static void on_lease_read_back(void *userdata, int error, const char *data, size_t len) {
        struct catalog *c = userdata;
        if (!catalog_request_ended(c))
                return;
        struct catalog_import *imp = c->import;
        bool ours = error == 0 && len == strlen(imp->lease_text) && memcmp(data, imp->lease_text, len) == 0;
        make_tree(c, ours ? 0 : -EEXIST);
}

/* The tree, reduced from the entries read and made, on a thread of its
 * own (offthread.h): sorting and making 100,000 files take seconds, and
 * readers are answered meanwhile. While it runs the writer is busy, so
 * the catalog (and the import's entries) outlive it. */
struct catalog_tree_job {
        struct catalog *c;               /* not touched by the thread */
        struct catalog_entries *all;     /* the import's entries: the reduce moves them out */
        bool make;                       /* false: reduce only (catalog_read_tree) */
        bool keep_setuid;
        struct catalog_tree_maker maker;
        struct catalog_entries tree;
        struct catalog_made made;
        uint64_t dropped;
        int error;
        atomic_bool stop; /* the maker's: tierd stops */
};

static void tree_run(void *userdata) {
        struct catalog_tree_job *j = userdata;
        j->error = catalog_reduce(j->all, &j->tree);
        if (j->error < 0 || !j->make)
                return;
        if (!j->keep_setuid)
                j->dropped = catalog_drop_setuid(j->maker.tenant, &j->tree);
        j->error = catalog_make_tree(&j->maker, &j->tree, &j->made);
}

static void tree_job_freep(struct catalog_tree_job **j) {
        if (!*j)
                return;
        catalog_entries_done(&(*j)->tree);
        free(*j);
}

static void tree_not_made(struct catalog *c, int error);

static void on_tree_made(void *userdata) {
        _cleanup_(tree_job_freep) struct catalog_tree_job *j = userdata;
        struct catalog *c = j->c;
        if (c->import)
                c->import->making = NULL;
        if (!catalog_request_ended(c))
                return; /* stopped meanwhile: what was made stays, the mark makes the next start import again */
        struct catalog_import *imp = c->import;
        if (!j->make) { /* catalog_read_tree: the tree to the caller; the writer goes on */
                if (j->error < 0) {
                        import_fail(c, j->error, "out of memory");
                        return;
                }
                c->import = NULL;
                imp->tree_read(imp->userdata, 0, NULL, &j->tree);
                catalog_import_free(imp);
                catalog_writer_continue(c);
                tierd_check_idle(c->tn->t); /* a stop waits for an import's end */
                return;
        }
        uint32_t epoch = imp->n_epochs + 1;
        uint64_t next_seq = imp->seq;
        const struct catalog_made *made = &j->made;
        if (j->error < 0) {
                tree_not_made(c, j->error);
                return;
        }
        catalog_import_unmark(c->tn);
        catalog_import_finish(c, made->failed ? -EIO : 0,
                      "%llu files (%llu bytes, released), %llu directories, %llu symlinks made from "
                      "snapshot %llu and %llu journal objects; %llu there already, %llu failed (see the log); "
                      "%llu setuid/setgid files made without those bits; lease epoch %u",
                      (unsigned long long)made->files, (unsigned long long)made->bytes,
                      (unsigned long long)made->dirs, (unsigned long long)made->symlinks,
                      (unsigned long long)imp->snapshot_seq, (unsigned long long)imp->journals_applied,
                      (unsigned long long)made->existing, (unsigned long long)made->failed,
                      (unsigned long long)j->dropped, epoch);
        /* This node writes the catalog from here on: a snapshot first. */
        catalog_writer_resume(c, epoch, next_seq);
}

/* The lease is ours but the tree is not made: the catalog is not written
 * (a snapshot now would record a half-made tree as the latest), its mark
 * stays, and tierd imports again at its next start, or tierctl does. */
static void tree_not_made(struct catalog *c, int error) {
        catalog_import_finish(c, error, "cannot make the tree: %s; this node writes no catalog until an import succeeds "
                                "(tierd imports again at its next start)", strerror(-error));
        catalog_writer_fence(c, "an import could not make the tree");
}

static int tree_job_start(struct catalog *c, bool make) {
        struct catalog_import *imp = c->import;
        struct catalog_tree_job *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (struct catalog_tree_job){ .c = c, .all = &imp->all, .make = make,
                                .keep_setuid = imp->flags & CATALOG_IMPORT_KEEP_SETUID,
                                .maker = { .root_fd = c->tn->subvol_fd, .chunk = c->tn->cfg->chunk } };
        snprintf(j->maker.tenant, sizeof(j->maker.tenant), "%s", c->tn->cfg->name);
        j->maker.stop = &j->stop;
        j->maker.finish_existing = imp->flags & CATALOG_IMPORT_RESUMED;
        if (make && imp->progress)
                imp->progress(imp->userdata, "making the tree", 0, imp->all.n);
        c->busy = true;
        int r = offthread_start(c->tn->t->event, &c->tn->subvol_fd, 1, tree_run, on_tree_made, j, NULL);
        if (r < 0) {
                c->busy = false;
                free(j);
                return r;
        }
        imp->making = j;
        return 0;
}

void catalog_import_stop_catalog(struct catalog *c) {
        struct catalog_import *imp = c->import;
        if (!imp)
                return;
        if (!imp->running) { /* waiting for the writer's request (or its backoff): nothing of it in flight */
                import_stopped(c);
                return;
        }
        atomic_store(&imp->stop, true); /* a catalog object read on a thread ends at its next entry */
        if (imp->making)
                atomic_store(&imp->making->stop, true);
}

void catalog_import_stop(struct tenant *tn) {
        if (tn->catalog)
                catalog_import_stop_catalog(tn->catalog);
}

bool catalog_import_pending(const struct tenant *tn) {
        return (tn->catalog && tn->catalog->import) || tn->t->imports_detached > 0;
}

/* The lease is taken (error 0): the tree is made. */
static void make_tree(struct catalog *c, int error) {
        int r;

        if (error == -EEXIST) {
                import_fail(c, -EBUSY, "another node took the catalog's lease meanwhile; nothing was made, try again");
                return;
        }
        if (error < 0) {
                import_fail(c, error, "cannot take the catalog's lease: %s; nothing was made", strerror(-error));
                return;
        }
        if (c->tn->t->stopping) { /* its mark is written: the next start imports */
                tree_not_made(c, -ECANCELED);
                return;
        }
        if ((r = tree_job_start(c, true)) < 0)
                tree_not_made(c, r);
}

void catalog_import_take_lease(struct catalog *c) {
        struct catalog_import *imp = c->import;
        char key[STUB_KEY_MAX];
        int k = catalog_import_mark(c->tn, imp->at_usec);
        if (k < 0) {
                import_fail(c, k, "cannot write the import's mark in %s: %s; nothing was made", c->tn->t->state_dir,
                            strerror(-k));
                return;
        }
        free(imp->lease_text);
        imp->lease_text = catalog_format_epoch(imp->n_epochs + 1, imp->seq, c->node);

        catalog_epoch_key(imp->n_epochs + 1, key);
        c->busy = true;
        int r = imp->lease_text ? store_put(c->tn, key, imp->lease_text, strlen(imp->lease_text), true, on_lease_taken, c)
                                : -ENOMEM;
        if (r < 0) {
                c->busy = false;
                import_fail(c, r, "cannot take the catalog's lease: %s", strerror(-r));
        }
}

/* catalog_read_tree: the catalog's tree as it is, to the caller; the
 * writer goes on. */
void catalog_import_hand_over(struct catalog *c) {
        int r = tree_job_start(c, false);
        if (r < 0)
                import_fail(c, r, "cannot read the tree: %s", strerror(-r));
}
