/* SPDX-License-Identifier: MIT */
/*
 * tierctl tenant import: the tree a catalog holds, made again here as
 * released stubs. Reads the leases (to know which journal objects count),
 * the list of snapshots, the snapshot to start from and the journal after
 * it; takes the lease; then makes the tree. Each file restores on its
 * first read, as anywhere else.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog-internal.h"
#include "catalogtree.h"
#include "fdio.h"
#include "log.h"
#include "macro.h"
#include "storeio.h"

struct catalog_import {
        struct catalog *c;
        uint64_t at_usec;
        void (*done)(void *userdata, int error, const char *message);
        void (*progress)(void *userdata, const char *phase, uint64_t done, uint64_t total);
        /* catalog_read_tree: the tree read is handed over, nothing made. */
        void (*tree_read)(void *userdata, int error, const char *message, const struct catalog_entries *tree);
        void *userdata;
        bool running;
        uint64_t *epoch_start; /* epoch k starts at journal number epoch_start[k - 1] */
        uint32_t n_epochs;
        uint64_t seq; /* the next journal object to read */
        uint64_t snapshot_seq, journals_applied;
        uint32_t snapshot_epoch; /* 0: no snapshot, the journal from 1 */
        uint32_t index_epoch;    /* the list of snapshots read next */
        bool past_at; /* journal objects from here on are read only to find the last */
        char *lease_text; /* the lease object this import writes */
        struct catalog_entries all; /* in the order written */
};

static void import_free(struct catalog_import *imp) {
        free(imp->epoch_start);
        free(imp->lease_text);
        catalog_entries_done(&imp->all);
        free(imp);
}

/* The import's answer; the writer does not go on here (see import_fail). */
static void import_end(struct catalog *c, int error, const char *fmt, va_list ap) {
        struct catalog_import *imp = c->import;
        static char msg[512];

        vsnprintf(msg, sizeof(msg), fmt, ap);
        if (error < 0)
                log_error("tenant %s: import: %s", c->tn->cfg->name, msg);
        else
                log_info("tenant %s: import: %s", c->tn->cfg->name, msg);
        c->import = NULL;
        if (imp->tree_read)
                imp->tree_read(imp->userdata, error, msg, NULL);
        else
                imp->done(imp->userdata, error, msg);
        import_free(imp);
}

static void import_finish(struct catalog *c, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void import_finish(struct catalog *c, int error, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        import_end(c, error, fmt, ap);
        va_end(ap);
}

/* Nothing was made: the writer goes on as before the import. */
static void import_fail(struct catalog *c, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void import_fail(struct catalog *c, int error, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        import_end(c, error, fmt, ap);
        va_end(ap);
        catalog_writer_continue(c);
}

void catalog_import_abort(struct catalog *c) {
        if (c->import)
                import_finish(c, -ECANCELED, "tierd stopped, or the tenant's catalog was turned off");
}

/* The lease that wrote journal number seq. */
static uint32_t epoch_of(const struct catalog_import *imp, uint64_t seq) {
        uint32_t e = 0;
        for (uint32_t k = 1; k <= imp->n_epochs; k++)
                if (imp->epoch_start[k - 1] <= seq)
                        e = k;
        return e;
}

static int keep_entry(void *userdata, const struct catalog_entry *e) {
        struct catalog_import *imp = userdata;
        struct catalog_entry copy = *e;

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
        if (!ok || catalog_entries_add(&imp->all, &copy) < 0) {
                catalog_entry_done(&copy);
                return -ENOMEM;
        }
        return 0;
}

static int compare_latest(const void *a, const void *b, void *entries) {
        size_t x = *(const size_t *)a, y = *(const size_t *)b;
        const struct catalog_entry *ex = (const struct catalog_entry *)entries + x,
                                   *ey = (const struct catalog_entry *)entries + y;
        int c = memcmp(ex->path, ey->path, MIN(ex->path_len, ey->path_len));
        if (c == 0)
                c = (ex->path_len > ey->path_len) - (ex->path_len < ey->path_len);
        return c ? c : (x > y) - (x < y);
}

/* A directory deleted (or renamed away): the last time it was. */
struct dir_delete {
        const char *path;
        size_t path_len;
        size_t last; /* the index of its latest delete among all entries */
};

static int compare_dir_delete(const void *a, const void *b) {
        const struct dir_delete *x = a, *y = b;
        int c = memcmp(x->path, y->path, MIN(x->path_len, y->path_len));
        return c ? c : (x->path_len > y->path_len) - (x->path_len < y->path_len);
}

/* Gone with a directory deleted (or renamed) after it was recorded? Each
 * of its parents looked up: depth times log(deletes), not deletes. */
static bool under_later_dir_delete(const struct catalog_entry *e, size_t index, const struct dir_delete *dels,
                                   size_t n_dels) {
        for (size_t p = 1; n_dels && p < e->path_len; p++) {
                if (e->path[p] != '/')
                        continue;
                struct dir_delete key = { .path = e->path, .path_len = p };
                const struct dir_delete *d = bsearch(&key, dels, n_dels, sizeof(key), compare_dir_delete);
                if (d && d->last > index)
                        return true;
        }
        return false;
}

/* The last word on each path, puts only. */
static int reduce(struct catalog_import *imp, struct catalog_entries *ret) {
        size_t n = imp->all.n, n_dels = 0;
        _cleanup_free_ size_t *order = calloc(n + 1, sizeof(size_t));
        _cleanup_free_ struct dir_delete *dels = calloc(n + 1, sizeof(struct dir_delete));

        if (!order || !dels)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                order[i] = i;
        qsort_r(order, n, sizeof(size_t), compare_latest, imp->all.e);
        /* In path order, each path's entries in the order written: a path's
         * last directory delete is its group's last. */
        for (size_t i = 0; i < n; i++) {
                const struct catalog_entry *e = &imp->all.e[order[i]];
                if (e->op != CATALOG_DEL || e->type != CATALOG_DIR)
                        continue;
                struct dir_delete d = { .path = e->path, .path_len = e->path_len, .last = order[i] };
                if (n_dels && compare_dir_delete(&dels[n_dels - 1], &d) == 0)
                        dels[n_dels - 1].last = d.last;
                else
                        dels[n_dels++] = d;
        }
        for (size_t i = 0; i < n; i++) {
                struct catalog_entry *e = &imp->all.e[order[i]];
                if (i + 1 < n) {
                        const struct catalog_entry *next = &imp->all.e[order[i + 1]];
                        if (next->path_len == e->path_len && memcmp(next->path, e->path, e->path_len) == 0)
                                continue; /* a later entry of the same path */
                }
                if (e->op == CATALOG_PUT && !under_later_dir_delete(e, order[i], dels, n_dels) &&
                    catalog_entries_add(ret, e) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void import_step(struct catalog *c);

/* Between the lease and the tree made, a mark in the state directory: a
 * tierd that dies there imports again when it starts, before its writer
 * would take the half-made tree for the truth. */
static char *import_mark_path(struct tenant *tn) {
        char *p = NULL;
        return asprintf(&p, "%s/%s.catalog-import", tn->t->state_dir, tn->cfg->name) < 0 ? NULL : p;
}

static int import_mark(struct tenant *tn, uint64_t at_usec) {
        _cleanup_free_ char *path = import_mark_path(tn);
        FILE *f;
        if (!path)
                return -ENOMEM;
        (void)mkdir(tn->t->state_dir, 0700);
        if (!(f = fopen(path, "we")))
                return -errno;
        fprintf(f, "%llu\n", (unsigned long long)at_usec);
        int r = fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : -errno;
        fclose(f);
        /* The mark is its name: lost in a power cut unless its directory
         * is synced, and then a half-made tree would pass for the truth. */
        return r < 0 ? r : fsync_dir_of(path);
}

static void import_unmark(struct tenant *tn) {
        _cleanup_free_ char *path = import_mark_path(tn);
        if (path)
                unlink(path);
}

static void on_resumed_import(void *userdata, int error, const char *message) {
        (void)userdata, (void)error, (void)message; /* logged by import_end */
}

int catalog_import_resume_if_marked(struct tenant *tn) {
        _cleanup_free_ char *path = import_mark_path(tn);
        unsigned long long at = 0;
        FILE *f = path ? fopen(path, "re") : NULL;
        if (!f)
                return 0;
        if (fscanf(f, "%llu", &at) != 1)
                at = 0;
        fclose(f);
        log_warning("tenant %s: an import did not finish (tierd stopped during it): importing again", tn->cfg->name);
        return catalog_import(tn, at, on_resumed_import, NULL, NULL);
}

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

/* The lease is taken (error 0): the tree is made. */
static void make_tree(struct catalog *c, int error) {
        _cleanup_(catalog_entries_done) struct catalog_entries tree = {};
        struct catalog_made made = {};
        struct catalog_import *imp = c->import;
        uint32_t epoch = imp->n_epochs + 1;
        uint64_t next_seq = imp->seq;
        int r;

        if (error == -EEXIST) {
                import_fail(c, -EBUSY, "another node took the catalog's lease meanwhile; nothing was made, try again");
                return;
        }
        if (error < 0) {
                import_fail(c, error, "cannot take the catalog's lease: %s; nothing was made", strerror(-error));
                return;
        }
        r = reduce(imp, &tree);
        if (r == 0 && imp->progress)
                imp->progress(imp->userdata, "making the tree", 0, tree.n);
        if (r == 0)
                r = catalog_make_tree(c->tn, &tree, &made);
        if (r == 0)
                import_unmark(c->tn);
        if (r < 0)
                import_finish(c, r, "cannot make the tree: %s", strerror(-r));
        else
                import_finish(c, made.failed ? -EIO : 0,
                              "%llu files (%llu bytes, released), %llu directories, %llu symlinks made from "
                              "snapshot %llu and %llu journal objects; %llu there already, %llu failed (see the log); "
                              "lease epoch %u",
                              (unsigned long long)made.files, (unsigned long long)made.bytes,
                              (unsigned long long)made.dirs, (unsigned long long)made.symlinks,
                              (unsigned long long)imp->snapshot_seq, (unsigned long long)imp->journals_applied,
                              (unsigned long long)made.existing, (unsigned long long)made.failed, epoch);
        /* This node writes the catalog from here on: a snapshot first. */
        catalog_writer_resume(c, epoch, next_seq);
}

static void take_lease(struct catalog *c) {
        struct catalog_import *imp = c->import;
        char key[STUB_KEY_MAX];
        int k = import_mark(c->tn, imp->at_usec);
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
static void hand_tree_over(struct catalog *c) {
        _cleanup_(catalog_entries_done) struct catalog_entries tree = {};
        struct catalog_import *imp = c->import;
        int r = reduce(imp, &tree);
        if (r < 0) {
                import_fail(c, r, "out of memory");
                return;
        }
        c->import = NULL;
        imp->tree_read(imp->userdata, 0, NULL, &tree);
        import_free(imp);
        catalog_writer_continue(c);
}

static void on_journal(void *userdata, int error, const char *data, size_t len) {
        struct catalog *c = userdata;
        struct catalog_header h;
        const char *why = "";

        if (!catalog_request_ended(c))
                return;
        struct catalog_import *imp = c->import;
        if (error == -ENOENT) { /* the end of the journal */
                if (imp->tree_read)
                        hand_tree_over(c);
                else
                        take_lease(c);
                return;
        }
        if (error < 0) {
                import_fail(c, error, "cannot read journal object %llu: %s", (unsigned long long)imp->seq,
                              strerror(-error));
                return;
        }
        /* Check it all before applying any of it. */
        int r = catalog_decode(data, len, &h, NULL, NULL, &why);
        if (r == 0 && (h.kind != CATALOG_JOURNAL || h.seq != imp->seq))
                r = -EBADMSG, why = "its header names another object";
        if (r < 0) {
                import_fail(c, r, "journal object %llu is corrupt (%s): nothing was made; --at a time before it "
                              "imports what came before", (unsigned long long)imp->seq, why);
                return;
        }
        if (imp->at_usec && h.time_usec > imp->at_usec)
                imp->past_at = true;
        /* A fenced writer's object (its lease ended before this number) is
         * not the catalog. */
        if (!imp->past_at && h.epoch == epoch_of(imp, imp->seq)) {
                r = catalog_decode(data, len, &h, keep_entry, imp, &why);
                if (r < 0) {
                        import_fail(c, r, "cannot read journal object %llu: %s", (unsigned long long)imp->seq,
                                      r == -EBADMSG ? why : strerror(-r));
                        return;
                }
                imp->journals_applied++;
        }
        imp->seq++;
        import_step(c);
}

static void on_snapshot(void *userdata, int error, const char *data, size_t len) {
        struct catalog *c = userdata;
        struct catalog_header h;
        const char *why = "";

        if (!catalog_request_ended(c))
                return;
        struct catalog_import *imp = c->import;
        if (error < 0) {
                import_fail(c, error, "cannot read snapshot %llu: %s", (unsigned long long)imp->snapshot_seq,
                              strerror(-error));
                return;
        }
        int r = catalog_decode(data, len, &h, NULL, NULL, &why);
        if (r == 0 && (h.kind != CATALOG_SNAPSHOT || h.seq != imp->snapshot_seq || h.epoch != imp->snapshot_epoch))
                r = -EBADMSG, why = "its header names another object";
        if (r == 0)
                r = catalog_decode(data, len, &h, keep_entry, imp, &why);
        if (r < 0) {
                import_fail(c, r, "snapshot %llu is unreadable (%s): nothing was made",
                              (unsigned long long)imp->snapshot_seq, r == -EBADMSG ? why : strerror(-r));
                return;
        }
        imp->seq = imp->snapshot_seq + 1;
        import_step(c);
}

static void read_index(struct catalog *c);

/* Each epoch's list of snapshots in turn; the latest snapshot written at or
 * before at_usec (0: the latest) wins, a later epoch's on a tie. A fenced
 * writer's snapshot past its epoch's end does not count. */
static void on_index(void *userdata, int error, const char *data, size_t len) {
        struct catalog *c = userdata;

        if (!catalog_request_ended(c))
                return;
        struct catalog_import *imp = c->import;
        uint32_t k = imp->index_epoch;
        if (error < 0 && error != -ENOENT) {
                import_fail(c, error, "cannot read the list of snapshots of epoch %u: %s", k, strerror(-error));
                return;
        }
        uint64_t end = k < imp->n_epochs ? imp->epoch_start[k] - 1 : UINT64_MAX; /* epoch k's last number */
        json_object *o = error == 0 ? catalog_parse_json(data, len) : NULL;
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
        int r = store_get(c->tn, key, CATALOG_SNAPSHOT_MAX, on_snapshot, c);
        if (r < 0) {
                c->busy = false;
                import_fail(c, r, "cannot read a snapshot: %s", strerror(-r));
        }
}

static void read_index(struct catalog *c) {
        char key[STUB_KEY_MAX];
        catalog_index_key(c->import->index_epoch, key);
        c->busy = true;
        int r = store_get(c->tn, key, CATALOG_INDEX_MAX, on_index, c);
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

        if (imp->progress)
                imp->progress(imp->userdata, "reading the catalog", imp->journals_applied + !!imp->snapshot_epoch, 0);
        c->busy = true;
        if (imp->seq == 0) {
                catalog_epoch_key(imp->n_epochs + 1, key);
                r = store_get(c->tn, key, 4096, on_epoch, c);
        } else {
                catalog_journal_key(imp->seq, key);
                r = store_get(c->tn, key, CATALOG_JOURNAL_MAX, on_journal, c);
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
        c->import = imp;
        if (!c->busy)
                catalog_import_run(c);
        return 0;
}

int catalog_read_tree(struct tenant *tn,
                      void (*done)(void *userdata, int error, const char *message, const struct catalog_entries *tree),
                      void *userdata) {
        return import_begin(tn, &(struct catalog_import){ .tree_read = done, .userdata = userdata });
}

int catalog_import(struct tenant *tn, uint64_t at_usec, void (*done)(void *userdata, int error, const char *message),
                   void (*progress)(void *userdata, const char *phase, uint64_t done, uint64_t total), void *userdata) {
        if (tn->gc || tn->audit)
                return -EBUSY; /* the tree it makes names objects a collection may be deleting */
        return import_begin(tn, &(struct catalog_import){ .at_usec = at_usec, .done = done, .progress = progress,
                                                          .userdata = userdata });
}
