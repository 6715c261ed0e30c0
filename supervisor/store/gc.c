/* SPDX-License-Identifier: MIT */
/*
 * Garbage collection of a tenant's store: the why is in gc.h. The steps,
 * each a request to the tenant's worker or work on a thread (offthread.h:
 * the event loop keeps serving readers; it does no step whose cost grows
 * with the count of files or objects):
 *   list catalog snapshots -> list journal objects -> read those in the
 *   retention period (threads) -> walk the filesystem's stubs (thread) ->
 *   sort the marks (thread) -> list data objects, manifests, access traces
 *   (unless trace_keep is "0s"), each sorted out on a thread -> delete
 *   the doomed, a few at a time. */
#include "gc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "catalogwatch.h"
#include "gcmarks.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "storeio.h"
#include "taskrun.h"
#include "wholefs.h"

#define GC_LIST_MAX (512u << 20)       /* bytes of listing records: ~9.5 million objects */
#define GC_CATALOG_MAX (1024u << 20)   /* a catalog object read (catalog-internal.h's bound) */
#define GC_DELETES_IN_FLIGHT 4
#define GC_WALKS_MAX 5                 /* walks that saw renames, before giving up */
#define GC_SWEEP_SLICE 1024            /* doomed objects gone through a turn */

struct gc_run {
        struct task_run run; /* first: run_free finds the run from it */
        struct tenant *tn;
        bool dry_run;
        gc_done_t done;
        gc_progress_t progress;
        void *userdata;
        int64_t before;     /* objects last changed before this (seconds) may go */
        uint64_t grace, trace_keep; /* seconds: the policy's at the start (a reload may change it) */
        int64_t trace_before;       /* traces last saved before this (trace_keep; 0: none listed) go */
        int64_t retention_start;
        struct hashes marks;    /* sorted once the mark phase is done */
        struct hashes archived; /* sorted: reported by archives since the start */
        struct proto_object *catalog; /* catalog objects to read */
        size_t n_catalog, next_catalog;
        int read_error; /* the object read last, as the thread found it */
        int classify_error; /* classify_work's */
        const char *read_why;
        uint64_t base_seq; /* the snapshot current when the retention period began; 0: none */
        bool have_base;
        struct proto_object *doomed; /* classify_work's, on its thread */
        size_t n_doomed, cap_doomed, next_doomed;
        sd_event_source *sweep_src;
        unsigned deleting;
        uint32_t listing; /* the kind listed last */
        uint64_t listed, listed_bytes, referenced, young, deleted, deleted_bytes, failed;
        uint64_t traces_kept;
        /* The walk, on its own thread (offthread.h, run.on_thread). */
        unsigned walks;        /* tried: walked again when something was renamed meanwhile */
        uint64_t walk_renames; /* catalogwatch_renames() when the walk began */
        int walk_root;
        uint64_t walk_mnt_id; /* copies of the filesystem's: the thread reads no tenant, which */
        char walk_fstype[32]; /* may be freed at an exit meanwhile */
        struct hashes walk_marks;
        int walk_error;
        const char *walk_why; /* wholefs_open could not give the filesystem's root */
};

/* ---- the run ---- */

static void run_free(struct task_run *r) {
        struct gc_run *g = (struct gc_run *)r;

        hashes_done(&g->marks);
        hashes_done(&g->archived);
        hashes_done(&g->walk_marks);
        free(g->catalog);
        free(g->doomed);
        sd_event_source_disable_unref(g->sweep_src);
        safe_close(g->walk_root);
        free(g);
}

/* Its caller told of the end (task_run_finish). */
static void told(struct task_run *r, int error, const char *msg) {
        struct gc_run *g = (struct gc_run *)r;
        g->tn->gc = NULL;
        g->done(g->userdata, error, msg);
}

static bool request_started(struct gc_run *g, int r, const char *what) {
        if (r < 0) {
                task_run_finish(&g->run, r, "cannot %s: %s; nothing was deleted", what, strerror(-r));
                return false;
        }
        g->run.requests++;
        return true;
}

static void list_objects(struct gc_run *g, uint32_t kind);
static void sweep_next(struct gc_run *g);
static void walk_start(struct gc_run *g);

static int mark_entry(void *userdata, const struct catalog_entry *e) {
        struct gc_run *g = userdata;
        int r = 0;
        if (e->op == CATALOG_PUT && e->type == CATALOG_FILE) {
                r = hashes_add(&g->marks, e->sha256);
                if (r == 0 && e->has_manifest)
                        r = hashes_add(&g->marks, e->manifest);
        }
        return r;
}

static void read_next_catalog_object(struct gc_run *g);

/* On a thread (store_get_worked): an object of up to a GiB is parsed
 * there, never on the loop. Unchecked: an object under an old catalog
 * key, or from before keys, still names objects that must stay; a mark
 * only keeps. */
static void mark_object(void *userdata, const char *data, size_t len) {
        struct gc_run *g = userdata;
        struct catalog_header h;

        g->read_why = "";
        g->read_error = catalog_decode(data, len, &catalog_key_unchecked, &h, mark_entry, g, &g->read_why);
}

static void on_catalog_object(void *userdata, int error) {
        struct gc_run *g = userdata;
        char key[STUB_KEY_MAX];

        if (!task_run_request_ended(&g->run))
                return;
        object_key_format(&g->catalog[g->next_catalog - 1], key);
        /* (Gone since the listing: nothing of tierd's deletes catalog
         * objects, so what it named cannot be known.) */
        if (error < 0) {
                task_run_finish(&g->run, error, "cannot read %s: %s; nothing was deleted", key, strerror(-error));
                return;
        }
        if (g->read_error < 0) {
                task_run_finish(&g->run, g->read_error, "%s is %s: the objects it names cannot be known, nothing was "
                                "deleted", key, g->read_error == -EBADMSG ? g->read_why : strerror(-g->read_error));
                return;
        }
        read_next_catalog_object(g);
}

static void read_next_catalog_object(struct gc_run *g) {
        char key[STUB_KEY_MAX];
        g->progress(g->userdata, "reading the catalog", g->next_catalog, g->n_catalog);
        if (g->next_catalog == g->n_catalog) {
                walk_start(g);
                return;
        }
        object_key_format(&g->catalog[g->next_catalog++], key);
        request_started(g, store_get_worked(g->tn, key, GC_CATALOG_MAX, mark_object, on_catalog_object, g),
                        "read the catalog");
}

static int keep_catalog_object(struct gc_run *g, const struct proto_object *o) {
        struct proto_object *p = reallocarray(g->catalog, g->n_catalog + 1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        g->catalog = p;
        g->catalog[g->n_catalog++] = *o;
        return 0;
}

static void on_journals_listed(void *userdata, int error, const struct proto_object *o, size_t n) {
        struct gc_run *g = userdata;
        if (!task_run_request_ended(&g->run))
                return;
        if (error < 0) {
                task_run_finish(&g->run, error, "cannot list the catalog's journal: %s; nothing was deleted", strerror(-error));
                return;
        }
        for (size_t i = 0; i < n; i++)
                if ((!g->have_base || o[i].seq > g->base_seq) && keep_catalog_object(g, &o[i]) < 0) {
                        task_run_finish(&g->run, -ENOMEM, "out of memory");
                        return;
                }
        read_next_catalog_object(g);
}

/* The newest snapshot already there when the retention period began is
 * the tree as of then; it and everything written after it name every
 * object the catalog referred to since. */
static void on_snapshots_listed(void *userdata, int error, const struct proto_object *o, size_t n) {
        struct gc_run *g = userdata;
        if (!task_run_request_ended(&g->run))
                return;
        if (error == -EOPNOTSUPP) {
                task_run_finish(&g->run, error, "the store (%s) cannot list its objects: only file:// and s3:// stores are collected",
                                        g->tn->cfg->backend);
                return;
        }
        if (error < 0) {
                task_run_finish(&g->run, error, "cannot list the catalog's snapshots: %s; nothing was deleted", strerror(-error));
                return;
        }
        /* A second more: a listing's times are whole seconds, cut down. */
        for (size_t i = 0; i < n; i++)
                if (o[i].mtime + 1 < g->retention_start && (!g->have_base || o[i].seq > g->base_seq)) {
                        g->base_seq = o[i].seq;
                        g->have_base = true;
                }
        for (size_t i = 0; i < n; i++)
                if ((!g->have_base || o[i].seq >= g->base_seq) && keep_catalog_object(g, &o[i]) < 0) {
                        task_run_finish(&g->run, -ENOMEM, "out of memory");
                        return;
                }
        request_started(g, store_list(g->tn, PROTO_OBJECT_JOURNAL, GC_LIST_MAX, on_journals_listed, g),
                        "list the catalog's journal");
}

/* ---- the walk: every stub on the filesystem ---- */

static void walk_thread(void *userdata) {
        struct gc_run *g = userdata;
        char self[64];

        /* Test builds: a long walk, for a stop to come during it. */
        offthread_test_pause("TIERD_TEST_GC_WALK_PAUSE_MS", "the collection's walk");
        /* Every stub is read through /proc/thread-self/fd (this thread's
         * own fd table): without it each would look like no stub at all. */
        snprintf(self, sizeof(self), "/proc/thread-self/fd/%d", g->walk_root);
        if (access(self, F_OK) < 0)
                g->walk_error = -ENOMEDIUM;
        else {
                /* The whole filesystem, not only what the admin mounted: a
                 * btrfs snapshot of the tenant made elsewhere on it names
                 * objects too. */
                int fd = wholefs_open(g->walk_mnt_id, g->walk_fstype, g->walk_root, &g->walk_why);
                g->walk_error = fd < 0 ? fd : gc_mark_stubs(fd, &g->walk_marks);
        }
}

/* The entries tierd has not written to the store yet count as catalog
 * entries too. */
static void mark_pending(void *userdata, const uint8_t hash[32]) {
        struct gc_run *g = userdata;
        if (hashes_add(&g->walk_marks, hash) < 0)
                g->walk_error = -ENOMEM;
}

/* On a thread: the walk's marks (and the catalog's pending ones) join
 * the catalog's, and all are sorted. */
static void marks_work(void *userdata) {
        struct gc_run *g = userdata;
        if (hashes_merge_sort(&g->marks, &g->walk_marks) < 0)
                g->walk_error = -ENOMEM;
}

static void on_marks_sorted(void *userdata) {
        struct gc_run *g = userdata;
        if (!task_run_thread_ended(&g->run))
                return;
        if (g->walk_error < 0) {
                task_run_finish(&g->run, g->walk_error, "out of memory; nothing was deleted");
                return;
        }
        list_objects(g, PROTO_OBJECT_DATA);
}

static void on_walked(void *userdata) {
        struct gc_run *g = userdata;

        if (!task_run_thread_ended(&g->run))
                return;
        if (g->walk_error < 0 && g->walk_why) {
                task_run_finish(&g->run, g->walk_error, "cannot walk the whole filesystem of %s (%s: %s), where a btrfs "
                                        "snapshot of the tenant may name objects: nothing was deleted", g->tn->fs->mountpoint,
                                        g->walk_why, strerror(-g->walk_error));
                return;
        }
        if (g->walk_error < 0) {
                task_run_finish(&g->run, g->walk_error, "cannot read every stub on %s (%s): nothing was deleted",
                                        g->tn->fs->mountpoint,
                                        g->walk_error == -ELOOP       ? "deeper than 256 directories"
                                        : g->walk_error == -ENOMEDIUM ? "/proc is not mounted"
                                                                      : strerror(-g->walk_error));
                return;
        }
        /* A tree renamed during the walk may have been passed over, in
         * its old place and its new one: walked again. */
        if (catalogwatch_renames(g->tn->fs) != g->walk_renames) {
                hashes_done(&g->walk_marks);
                if (g->walks < GC_WALKS_MAX) {
                        walk_start(g);
                        return;
                }
                task_run_finish(&g->run, -EBUSY, "files were renamed on %s during each of %u walks: nothing was deleted; try "
                                                   "again when it is quieter", g->tn->fs->mountpoint, g->walks);
                return;
        }
        /* The catalog's changes not written yet name objects too (its
         * queue is bounded); the marks are merged and sorted on a thread. */
        catalog_pending_objects(g->tn, mark_pending, g);
        int r = g->walk_error < 0 ? g->walk_error : offthread_start(g->tn->t->event, NULL, 0, marks_work, on_marks_sorted, g, NULL);
        if (r < 0) {
                task_run_finish(&g->run, r, "cannot sort the marks: %s; nothing was deleted", strerror(-r));
                return;
        }
        g->run.on_thread = true;
}

static void walk_start(struct gc_run *g) {
        int r;
        g->progress(g->userdata, "reading the stubs on the filesystem", g->walks, 0);
        if (g->tn->fs->catalog_fd < 0) {
                task_run_finish(&g->run, -ENOTCONN, "renames on %s cannot be heard (no catalog group): nothing was deleted",
                                        g->tn->fs->mountpoint);
                return;
        }
        g->walks++;
        g->walk_renames = catalogwatch_renames(g->tn->fs);
        g->walk_error = 0;
        g->walk_why = NULL;
        safe_close(g->walk_root);
        g->walk_mnt_id = g->tn->fs->mnt_id;
        snprintf(g->walk_fstype, sizeof(g->walk_fstype), "%s", g->tn->fs->fstype);
        g->walk_root = openat(g->tn->fs->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = g->walk_root < 0 ? -errno : offthread_start(g->tn->t->event, &g->walk_root, 1, walk_thread, on_walked, g, NULL);
        if (r < 0) {
                task_run_finish(&g->run, r, "cannot walk %s: %s; nothing was deleted", g->tn->fs->mountpoint, strerror(-r));
                return;
        }
        g->run.on_thread = true;
}

/* ---- the sweep ---- */

static int grow_doomed(struct gc_run *g) {
        struct proto_object *p = array_room(g->doomed, g->n_doomed, &g->cap_doomed, sizeof(*p), 1024);
        if (!p)
                return -ENOMEM;
        g->doomed = p;
        return 0;
}

/* On a thread (store_list_worked): each object listed is referenced,
 * young, a trace kept, or doomed. The loop touches none of it meanwhile
 * (archives go to g->archived, which the sweep checks). */
static void classify_work(void *userdata, const struct proto_object *o, size_t n) {
        struct gc_run *g = userdata;
        for (size_t i = 0; i < n; i++) {
                g->listed++;
                g->listed_bytes += o[i].size;
                if (o[i].kind == PROTO_OBJECT_TRACE) {
                        /* Nothing refers to a trace: it is kept while its
                         * containers' starts keep saving it. */
                        if (o[i].mtime >= g->trace_before) {
                                g->traces_kept++;
                                continue;
                        }
                } else if (hashes_has(&g->marks, o[i].hash)) {
                        g->referenced++;
                        continue;
                } else if (o[i].mtime >= g->before) {
                        g->young++;
                        continue;
                }
                if (grow_doomed(g) < 0) {
                        g->classify_error = -ENOMEM;
                        return;
                }
                g->doomed[g->n_doomed++] = o[i];
        }
}

static void on_listed(void *userdata, int error) {
        struct gc_run *g = userdata;
        if (!task_run_request_ended(&g->run))
                return;
        if (error < 0) {
                task_run_finish(&g->run, error, "cannot list the store's objects: %s; nothing was deleted", strerror(-error));
                return;
        }
        if (g->classify_error < 0) {
                task_run_finish(&g->run, g->classify_error, "out of memory; nothing was deleted");
                return;
        }
        /* Data first, then manifests, then traces. */
        if (g->listing == PROTO_OBJECT_DATA)
                list_objects(g, PROTO_OBJECT_MANIFEST);
        else if (g->listing == PROTO_OBJECT_MANIFEST && g->trace_keep)
                list_objects(g, PROTO_OBJECT_TRACE);
        else
                sweep_next(g);
}

static void list_objects(struct gc_run *g, uint32_t kind) {
        const char *why = catalog_busy_why(g->tn);
        if (why) { /* another node imported the tenant meanwhile, say */
                task_run_finish(&g->run, -ESTALE, "%s: nothing was deleted", why);
                return;
        }
        g->listing = kind;
        g->progress(g->userdata, "listing the store", 0, 0);
        request_started(g, store_list_worked(g->tn, kind, GC_LIST_MAX, classify_work, on_listed, g),
                        "list the store's objects");
}

struct gc_delete {
        struct gc_run *g;
        uint64_t size;
        bool trace;
};

static void on_deleted(void *userdata, int error) {
        struct gc_delete *d = userdata;
        struct gc_run *g = d->g;
        uint64_t size = d->size;
        bool trace = d->trace;

        free(d);
        if (!task_run_request_ended(&g->run))
                return;
        g->deleting--;
        if (error == 0) {
                g->deleted++;
                g->deleted_bytes += size;
        } else if (error == -EBUSY && trace)
                g->traces_kept++; /* saved since it was listed */
        else if (error == -EBUSY)
                g->young++; /* refreshed by an archive since it was listed */
        else
                g->failed++; /* the worker logged why */
        sweep_next(g);
}

static void report(struct gc_run *g) {
        char traces[96] = "";
        if (g->trace_keep)
                snprintf(traces, sizeof(traces), ", %llu access traces saved within trace_keep (%llus)",
                         (unsigned long long)g->traces_kept, (unsigned long long)g->trace_keep);
        task_run_finish(&g->run, g->failed ? -EIO : 0,
                                "%llu objects in the store (%llu bytes): %llu referenced, %llu younger than the grace period "
                                "(%llus)%s, %llu %s (%llu bytes), %llu failed%s",
                                (unsigned long long)g->listed, (unsigned long long)g->listed_bytes,
                                (unsigned long long)g->referenced, (unsigned long long)g->young,
                                (unsigned long long)g->grace, traces, (unsigned long long)g->deleted,
                                g->dry_run ? "would be deleted" : "deleted", (unsigned long long)g->deleted_bytes,
                                (unsigned long long)g->failed, g->failed ? " (see the log)" : "");
}

static int on_sweep_slice(sd_event_source *s, void *userdata) {
        struct gc_run *g = userdata;
        (void)s;
        if (!g->run.ended)
                sweep_next(g);
        return 0;
}

static void sweep_next(struct gc_run *g) {
        unsigned slice = 0;
        while (g->deleting < GC_DELETES_IN_FLIGHT && g->next_doomed < g->n_doomed) {
                /* A dry run (or a sweep of objects archives took back)
                 * goes on without a reply to wait for: a slice a turn. */
                if (++slice > GC_SWEEP_SLICE) {
                        if (tierd_defer_once(g->tn->t->event, &g->sweep_src, on_sweep_slice, g) < 0)
                                task_run_finish(&g->run, -ENOMEM, "out of memory");
                        return;
                }
                const struct proto_object *o = &g->doomed[g->next_doomed++];
                char key[STUB_KEY_MAX];
                if (o->kind != PROTO_OBJECT_TRACE && hashes_has(&g->archived, o->hash)) {
                        g->referenced++; /* an archive relies on it now */
                        continue;
                }
                object_key_format(o, key);
                if (g->dry_run) {
                        log_info("tenant %s: gc: would delete %s (%llu bytes)", g->tn->cfg->name, key,
                                 (unsigned long long)o->size);
                        g->deleted++;
                        g->deleted_bytes += o->size;
                        continue;
                }
                struct gc_delete *d = malloc(sizeof(*d));
                if (!d) {
                        task_run_finish(&g->run, -ENOMEM, "out of memory");
                        return;
                }
                *d = (struct gc_delete){ .g = g, .size = o->size, .trace = o->kind == PROTO_OBJECT_TRACE };
                log_info("tenant %s: gc: deleting %s (%llu bytes)", g->tn->cfg->name, key, (unsigned long long)o->size);
                int64_t before = o->kind == PROTO_OBJECT_TRACE ? g->trace_before : g->before;
                int r = store_delete_if_old(g->tn, key, o->size, before, on_deleted, d);
                if (r < 0)
                        free(d);
                if (!request_started(g, r, "delete an object"))
                        return;
                g->deleting++;
        }
        g->progress(g->userdata, g->dry_run ? "counting" : "deleting", g->next_doomed - g->deleting, g->n_doomed);
        if (g->deleting == 0 && g->next_doomed == g->n_doomed)
                report(g);
}

/* ---- the API ---- */

void gc_note_archived(struct tenant *tn, const uint8_t sha256[32], const uint8_t *manifest) {
        struct gc_run *g = tn->gc;
        if (!g)
                return;
        if (hashes_insert_sorted(&g->archived, sha256) < 0 || (manifest && hashes_insert_sorted(&g->archived, manifest) < 0))
                task_run_finish(&g->run, -ENOMEM, "out of memory while an archive ran: stopped, to be sure nothing it "
                                                    "relies on goes");
}

bool gc_running(const struct tenant *tn) { return tn->gc != NULL; }

int gc_start(struct tenant *tn, bool dry_run, gc_done_t done, gc_progress_t progress, void *userdata,
             const char **why) {
        struct timespec now;
        struct gc_run *g;

        if (tn->t->stopping)
                return *why = "tierd is stopping", -ESHUTDOWN;
        if (tn->gc)
                return *why = "a collection of this tenant is running", -EBUSY;
        if (tn->audit)
                return *why = "an audit of this tenant is running", -EBUSY;
        /* First: it is the policy's to change, not a moment's. */
        for (size_t i = 0; i < tn->t->n_tenants; i++)
                if (&tn->t->tenants[i] != tn && store_same_place(&tn->t->tenants[i], tn))
                        return *why = "another tenant keeps its objects in the same store: its stubs are not "
                                      "this tenant's, so nothing there is collected",
                               -EADDRINUSE;
        if ((*why = catalog_busy_why(tn)))
                return -EBUSY;
        if (!(g = calloc(1, sizeof(*g))))
                return -ENOMEM;
        clock_gettime(CLOCK_REALTIME, &now);
        *g = (struct gc_run){ .run = { .tn = tn, .name = "gc", .told = told, .free = run_free }, .tn = tn, .dry_run = dry_run,
                              .done = done, .progress = progress, .userdata = userdata,
                              .grace = tn->cfg->gc_grace_usec / 1000000, .trace_keep = tn->cfg->trace_keep_usec / 1000000,
                              .before = now.tv_sec - (int64_t)(tn->cfg->gc_grace_usec / 1000000),
                              .trace_before = now.tv_sec - (int64_t)(tn->cfg->trace_keep_usec / 1000000),
                              .retention_start = now.tv_sec - (int64_t)(tn->cfg->catalog_retention_usec / 1000000),
                              .walk_root = -1 };
        tn->gc = g;
        log_info("tenant %s: gc started%s: grace %llus, catalog retention %llus, traces kept %llus (0: all)",
                 tn->cfg->name, dry_run ? " (dry run)" : "", (unsigned long long)g->grace,
                 (unsigned long long)(tn->cfg->catalog_retention_usec / 1000000), (unsigned long long)g->trace_keep);
        int r = store_list(tn, PROTO_OBJECT_SNAPSHOT, GC_LIST_MAX, on_snapshots_listed, g);
        if (r < 0) {
                tn->gc = NULL;
                run_free(&g->run);
                return *why = "cannot ask the worker", r;
        }
        g->run.requests++;
        return 0;
}

void gc_stop(struct tenant *tn) {
        if (tn->gc)
                task_run_finish(&tn->gc->run, -ECANCELED, "stopped (canceled, or tierd stops): nothing more is deleted; %llu "
                                                          "deleted before", (unsigned long long)tn->gc->deleted);
}
