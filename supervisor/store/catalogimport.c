/* SPDX-License-Identifier: MIT */
/*
 * tierctl tenant import: the tree a catalog holds, made again here as
 * released stubs. Reads the leases (to know which journal objects count),
 * the list of snapshots, the snapshot to start from and the journal after
 * it (each object decrypted and read on a thread: a snapshot may be a
 * GiB); then catalogmake.c takes the lease and makes the tree. Each file
 * restores on its first read, as anywhere else.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalogimport-internal.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "storeio.h"
#include "taskrun.h"

/* Bounds: the catalog is read into memory whole before anything is made,
 * and the store is not trusted to be small. One larger is refused, saying
 * so, before it takes the node's memory. */
#define IMPORT_ENTRIES_MAX (8u << 20)       /* entries read: the snapshot's and the journal's */
#define IMPORT_BYTES_MAX (1ull << 30)       /* their names, targets and xattrs */
#define IMPORT_JOURNALS_MAX (1u << 20)      /* journal objects read */
#define IMPORT_EPOCHS_MAX 4096u             /* leases (each journal object looks them up) */
#define IMPORT_TOO_BIG "larger than an import takes (at most 8,388,608 entries, 1 GiB of names and 1,048,576 " \
                       "journal objects)"

void catalog_import_free(struct catalog_import *imp) {
        explicit_bzero(&imp->key, sizeof(imp->key));
        free(imp->epoch_start);
        free(imp->lease_text);
        catalog_entries_done(&imp->all);
        free(imp);
}

void catalog_import_finish(struct catalog *c, int error, const char *fmt, ...) {
        struct catalog_import *imp = c->import;
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        task_end_message(c->tn, "import", error, msg, sizeof(msg), fmt, ap);
        va_end(ap);
        c->import = NULL;
        if (imp->tree_read)
                imp->tree_read(imp->userdata, error, msg, NULL);
        else
                imp->done(imp->userdata, error, msg);
        catalog_import_free(imp);
        tierd_check_idle(c->tn->t); /* a stop waits for an import's end */
}

void catalog_import_abort(struct catalog *c) {
        if (c->import)
                catalog_import_finish(c, -ECANCELED, "tierd stopped, or the tenant's catalog was turned off");
}

/* The lease that wrote journal number seq. */
static uint32_t epoch_of(const struct catalog_import *imp, uint64_t seq) {
        uint32_t e = 0;
        for (uint32_t k = 1; k <= imp->n_epochs; k++)
                if (imp->epoch_start[k - 1] <= seq)
                        e = k;
        return e;
}

/* The first pass over an object (its check): a stop ends it too. */
static int check_entry(void *userdata, const struct catalog_entry *e) {
        struct catalog_import *imp = userdata;
        (void)e;
        return atomic_load_explicit(&imp->stop, memory_order_relaxed) ? -ECANCELED : 0;
}

static int keep_entry(void *userdata, const struct catalog_entry *e) {
        struct catalog_import *imp = userdata;
        struct catalog_entry copy = *e;

        if (atomic_load_explicit(&imp->stop, memory_order_relaxed))
                return -ECANCELED; /* tierd stops */
        /* Deep copy: e is freed after the call. */
        copy.path = strndup(e->path, e->path_len);
        copy.target = e->target ? strndup(e->target, e->target_len) : NULL;
        copy.xattrs = e->n_xattrs ? calloc(e->n_xattrs, sizeof(*copy.xattrs)) : NULL;
        copy.n_xattrs = 0;
        bool ok = copy.path && (!e->target || copy.target) && (!e->n_xattrs || copy.xattrs);
        for (size_t i = 0; ok && i < e->n_xattrs; i++) {
                struct catalog_xattr *x = &copy.xattrs[copy.n_xattrs++];
                x->name = strdup(e->xattrs[i].name);
                x->value = malloc(e->xattrs[i].len + 1);
                x->len = e->xattrs[i].len;
                ok = x->name && x->value;
                if (ok)
                        memcpy(x->value, e->xattrs[i].value, x->len);
        }
        int r = ok ? catalog_entries_add(&imp->all, &copy) : -ENOMEM;
        catalog_entry_done(&copy); /* emptied if added */
        return r;
}

static const char *read_error(int r, const char *why) {
        return r == -EBADMSG ? why : r == -E2BIG ? IMPORT_TOO_BIG : strerror(-r);
}

static void import_step(struct catalog *c);


/* On a thread: a journal object checked, then applied unless a fenced
 * writer wrote it or it is past --at. */
static void journal_work(void *userdata, const char *data, size_t len) {
        struct catalog_import *imp = userdata;
        struct catalog_header h;
        const char *why = "";

        /* Check it all before applying any of it. */
        int r = catalog_decode(data, len, &imp->key, &h, check_entry, imp, &why);
        if (r == 0 && (h.kind != CATALOG_JOURNAL || h.seq != imp->seq))
                r = -EBADMSG, why = "its header names another object";
        imp->read_corrupt = r < 0;
        if (r == 0 && imp->at_usec && h.time_usec > imp->at_usec)
                imp->past_at = true;
        /* A fenced writer's object (its lease ended before this number) is
         * not the catalog. */
        if (r == 0 && !imp->past_at && h.epoch == epoch_of(imp, imp->seq)) {
                r = catalog_decode(data, len, &imp->key, &h, keep_entry, imp, &why);
                imp->journals_applied += r == 0;
        }
        imp->read_error = r;
        imp->read_why = why;
}

static void on_journal(void *userdata, int error) {
        struct catalog_import *imp = userdata;
        struct catalog *c = imp->c;

        if (!catalog_request_ended(c))
                return;
        if (c->tn->t->stopping) {
                import_stopped(c);
                return;
        }
        if (error == -ENOENT) { /* the end of the journal */
                if (imp->tree_read)
                        catalog_import_hand_over(c);
                else
                        catalog_import_take_lease(c);
                return;
        }
        if (error < 0) {
                import_fail(c, error, "cannot read journal object %llu: %s", (unsigned long long)imp->seq,
                              strerror(-error));
                return;
        }
        if (imp->read_error < 0 && imp->read_corrupt) {
                import_fail(c, imp->read_error, "journal object %llu is corrupt (%s): nothing was made; --at a time "
                              "before it imports what came before", (unsigned long long)imp->seq, imp->read_why);
                return;
        }
        if (imp->read_error < 0) {
                import_fail(c, imp->read_error, "cannot read journal object %llu: %s", (unsigned long long)imp->seq,
                              read_error(imp->read_error, imp->read_why));
                return;
        }
        if (++imp->seq - imp->snapshot_seq > IMPORT_JOURNALS_MAX) {
                import_fail(c, -EFBIG, "the journal is %s: nothing was made", IMPORT_TOO_BIG);
                return;
        }
        import_step(c);
}

/* On a thread: the snapshot checked, then kept whole. */
static void snapshot_work(void *userdata, const char *data, size_t len) {
        struct catalog_import *imp = userdata;
        struct catalog_header h;
        const char *why = "";

        int r = catalog_decode(data, len, &imp->key, &h, check_entry, imp, &why);
        if (r == 0 && (h.kind != CATALOG_SNAPSHOT || h.seq != imp->snapshot_seq || h.epoch != imp->snapshot_epoch))
                r = -EBADMSG, why = "its header names another object";
        if (r == 0)
                r = catalog_decode(data, len, &imp->key, &h, keep_entry, imp, &why);
        imp->read_error = r;
        imp->read_why = why;
}

static void on_snapshot(void *userdata, int error) {
        struct catalog_import *imp = userdata;
        struct catalog *c = imp->c;

        if (!catalog_request_ended(c))
                return;
        if (c->tn->t->stopping) {
                import_stopped(c);
                return;
        }
        if (error < 0) {
                import_fail(c, error, "cannot read snapshot %llu: %s", (unsigned long long)imp->snapshot_seq,
                              strerror(-error));
                return;
        }
        if (imp->read_error < 0) {
                import_fail(c, imp->read_error, "snapshot %llu is unreadable (%s): nothing was made",
                              (unsigned long long)imp->snapshot_seq, read_error(imp->read_error, imp->read_why));
                return;
        }
        imp->seq = imp->snapshot_seq + 1;
        import_step(c);
}

static void read_index(struct catalog *c);

/* On a thread: each epoch's list of snapshots in turn; the latest written at or
 * before at_usec (0: the latest) wins, a later epoch's on a tie. A fenced
 * writer's snapshot past its epoch's end does not count. */
static void index_work(void *userdata, const char *data, size_t len) {
        struct catalog_import *imp = userdata;
        uint32_t k = imp->index_epoch;
        uint64_t end = k < imp->n_epochs ? imp->epoch_start[k] - 1 : UINT64_MAX; /* epoch k's last number */
        json_object *o = catalog_parse_json(data, len); /* up to 4 MiB: on a thread */

        for (size_t i = 0; o && json_object_is_type(o, json_type_array) && i < json_object_array_length(o); i++) {
                json_object *x = json_object_array_get_idx(o, i), *s, *t;
                if (!json_object_object_get_ex(x, "seq", &s) || !json_object_object_get_ex(x, "time", &t))
                        continue;
                uint64_t seq = json_object_get_uint64(s), time_usec = json_object_get_uint64(t);
                if (seq > end || seq >= UINT64_MAX / 2 || (imp->at_usec && time_usec > imp->at_usec))
                        continue; /* past its epoch, absurd, or after --at */
                if (!imp->snapshot_epoch || seq >= imp->snapshot_seq) {
                        imp->snapshot_seq = seq;
                        imp->snapshot_epoch = k;
                }
        }
        json_object_put(o);
}

static void on_index(void *userdata, int error) {
        struct catalog_import *imp = userdata;
        struct catalog *c = imp->c;
        uint32_t k = imp->index_epoch;

        if (!catalog_request_ended(c))
                return;
        if (c->tn->t->stopping) {
                import_stopped(c);
                return;
        }
        if (error < 0 && error != -ENOENT) {
                import_fail(c, error, "cannot read the list of snapshots of epoch %u: %s", k, strerror(-error));
                return;
        }
        if (k < imp->n_epochs) {
                imp->index_epoch++;
                read_index(c);
                return;
        }
        if (!imp->snapshot_epoch) { /* the whole journal, from its first object */
                imp->snapshot_seq = 0;
                imp->seq = 1;
                import_step(c);
                return;
        }
        char key[STUB_KEY_MAX];
        catalog_snapshot_key(imp->snapshot_seq, imp->snapshot_epoch, key);
        c->busy = true;
        int r = store_get_worked(c->tn, key, CATALOG_SNAPSHOT_MAX, snapshot_work, on_snapshot, imp);
        if (r < 0) {
                c->busy = false;
                import_fail(c, r, "cannot read a snapshot: %s", strerror(-r));
        }
}

static void read_index(struct catalog *c) {
        char key[STUB_KEY_MAX];
        catalog_index_key(c->import->index_epoch, key);
        c->busy = true;
        int r = store_get_worked(c->tn, key, CATALOG_INDEX_MAX, index_work, on_index, c->import);
        if (r < 0) {
                c->busy = false;
                import_fail(c, r, "cannot read the list of snapshots: %s", strerror(-r));
        }
}

static void on_epoch(void *userdata, int error, const char *data, size_t len) {
        struct catalog *c = userdata;
        char node[CATALOG_NODE_MAX];
        uint64_t start = 0;

        if (!catalog_request_ended(c))
                return;
        struct catalog_import *imp = c->import;
        if (error == -ENOENT && imp->n_epochs == 0) {
                import_fail(c, -ENOENT, "the store holds no catalog of this tenant (catalog/epoch/00000001 is missing)");
                return;
        }
        if (error == -ENOENT) {
                imp->index_epoch = 1;
                read_index(c);
                return;
        }
        if (error == 0 && catalog_parse_epoch(data, len, imp->n_epochs + 1, &start, node, sizeof(node)) < 0)
                error = -EBADMSG;
        if (error < 0) {
                import_fail(c, error, "cannot read lease %u: %s", imp->n_epochs + 1,
                              error == -EBADMSG ? "corrupt" : strerror(-error));
                return;
        }
        if (imp->n_epochs >= IMPORT_EPOCHS_MAX) {
                import_fail(c, -EFBIG, "the store holds more than %u leases: nothing was made", IMPORT_EPOCHS_MAX);
                return;
        }
        uint64_t *p = reallocarray(imp->epoch_start, imp->n_epochs + 1, sizeof(*p));
        if (!p) {
                import_fail(c, -ENOMEM, "out of memory");
                return;
        }
        imp->epoch_start = p;
        imp->epoch_start[imp->n_epochs++] = start;
        import_step(c);
}

/* One request: the next lease while they last, then the journal. */
static void import_step(struct catalog *c) {
        struct catalog_import *imp = c->import;
        char key[STUB_KEY_MAX];
        int r;

        if (c->tn->t->stopping) {
                import_stopped(c);
                return;
        }
        if (imp->progress)
                imp->progress(imp->userdata, "reading the catalog", imp->journals_applied + !!imp->snapshot_epoch, 0);
        c->busy = true;
        if (imp->seq == 0) {
                catalog_epoch_key(imp->n_epochs + 1, key);
                r = store_get(c->tn, key, 4096, on_epoch, c);
        } else {
                catalog_journal_key(imp->seq, key);
                r = store_get_worked(c->tn, key, CATALOG_JOURNAL_MAX, journal_work, on_journal, imp);
        }
        if (r < 0) {
                c->busy = false;
                import_fail(c, r, "cannot read the catalog: %s", strerror(-r));
        }
}

void catalog_import_run(struct catalog *c) {
        if (c->import->running)
                return;
        c->import->running = true;
        import_step(c);
}

/* The reading starts once the writer's request in flight (if any) ends. */
static int import_begin(struct tenant *tn, const struct catalog_import *proto) {
        struct catalog *c = tn->catalog;
        struct catalog_import *imp;

        if (!c)
                return -ENOPROTOOPT;
        if (c->import)
                return -EALREADY;
        if (!(imp = calloc(1, sizeof(*imp))))
                return -ENOMEM;
        *imp = *proto;
        imp->c = c;
        imp->key = tn->catalog_key;
        imp->all.limit = IMPORT_ENTRIES_MAX;
        imp->all.limit_bytes = IMPORT_BYTES_MAX;
        c->import = imp;
        if (!c->busy)
                catalog_import_run(c);
        return 0;
}

int catalog_read_tree(struct tenant *tn,
                      void (*done)(void *userdata, int error, const char *message, struct catalog_entries *tree),
                      void *userdata) {
        return import_begin(tn, &(struct catalog_import){ .tree_read = done, .userdata = userdata });
}

int catalog_import(struct tenant *tn, uint64_t at_usec, uint64_t flags,
                   void (*done)(void *userdata, int error, const char *message),
                   void (*progress)(void *userdata, const char *phase, uint64_t done, uint64_t total), void *userdata) {
        if (flags & ~(CATALOG_IMPORT_FLAGS | CATALOG_IMPORT_RESUMED))
                return -EINVAL;
        if (tn->gc || tn->audit)
                return -EBUSY; /* the tree it makes names objects a collection may be deleting */
        return import_begin(tn, &(struct catalog_import){ .at_usec = at_usec, .flags = flags, .done = done,
                                                          .progress = progress, .userdata = userdata });
}
