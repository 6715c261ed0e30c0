/* SPDX-License-Identifier: MIT */
/*
 * The audit (audit.h): the catalog's tree read, the store listed, the
 * subvolume walked, then the three compared; with --repair, the archived
 * files whose object is gone uploaded again.
 */
#include "audit.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "catalog.h"
#include "catalogtree.h"
#include "gc.h"
#include "fileops.h"
#include "log.h"
#include "macro.h"
#include "objkey.h"
#include "offthread.h"
#include "storeio.h"
#include "taskrun.h"
#include "utf8.h"

#define AUDIT_LIST_MAX (512u << 20)
#define AUDIT_FINDINGS_MAX 10000 /* kept and told; the rest are counted */
#define AUDIT_SLICE 256           /* files whose object is missing, looked at a turn */

/* A file on disk whose object the store lost: whole (archived or
 * dirty: every byte here, so it can be uploaded again) as its stub said
 * to the walk's thread. */
struct missing {
        const struct catalog_entry *e; /* in a->disk */
        bool whole;
};

struct audit_run {
        struct task_run run; /* first: run_free finds the run from it; the walk counts as a request */
        struct tenant *tn;
        int walk_fd; /* the walk's copy of tn->subvol_fd (its thread keeps the number) */
        bool repair;
        audit_done_t done;
        audit_progress_t progress;
        void *userdata;
        struct catalog_entries catalog; /* sorted by path */
        struct catalog_entries disk;    /* the walk's: sorted by path */
        int walk_error;
        struct proto_object *objects;   /* data and manifests in the store, sorted by hash */
        size_t n_objects;
        int list_error;                 /* append_work's */
        bool listed_manifests, compared;
        struct missing *missing;        /* the walk thread's, gone through on the loop a slice a turn */
        size_t n_missing, next_missing;
        struct audit_finding *later;    /* the walk thread's findings, told after the missing files' */
        size_t n_later, next_later, later_found;
        sd_event_source *slice_src;
        struct audit_finding *findings;
        size_t n_findings, n_found;
        uint64_t repairs, repaired, repair_failed, lost;
        bool catalog_differs;
};

/* ---- the run ---- */

static void run_free(struct task_run *r) {
        struct audit_run *a = (struct audit_run *)r;

        catalog_entries_done(&a->catalog);
        catalog_entries_done(&a->disk);
        free(a->objects);
        free(a->missing);
        for (size_t i = a->next_later; i < a->n_later; i++)
                free(a->later[i].name);
        free(a->later);
        sd_event_source_disable_unref(a->slice_src);
        for (size_t i = 0; i < a->n_findings; i++)
                free(a->findings[i].name);
        free(a->findings);
        free(a);
}

/* Its caller told of the end (task_run_finish). */
static void told(struct task_run *r, int error, const char *msg) {
        struct audit_run *a = (struct audit_run *)r;
        a->tn->audit = NULL;
        a->done(a->userdata, error, msg, a->findings, a->n_findings);
}

static char *shown_name(const char *name, size_t name_len) {
        _cleanup_free_ char *raw = strndup(name, name_len);
        return raw ? utf8_escape(raw) : NULL;
}

/* f kept in *list (its name taken) unless that holds AUDIT_FINDINGS_MAX. */
static bool keep_finding(struct audit_finding **list, size_t *n, struct audit_finding f) {
        struct audit_finding *p = *n < AUDIT_FINDINGS_MAX && f.name ? reallocarray(*list, *n + 1, sizeof(*p)) : NULL;
        if (!p) {
                free(f.name);
                return false;
        }
        *list = p;
        (*list)[(*n)++] = f;
        return true;
}

/* On the loop: counted, kept and logged. */
static void tell(struct audit_run *a, struct audit_finding f) {
        a->n_found++;
        if (keep_finding(&a->findings, &a->n_findings, f))
                log_warning("tenant %s: audit: %s: %s (%s)", a->tn->cfg->name, f.kind, f.name, f.detail);
}

static void found(struct audit_run *a, const char *kind, const char *name, size_t name_len, const char *detail) {
        bool room = a->n_findings < AUDIT_FINDINGS_MAX;
        tell(a, (struct audit_finding){ .kind = kind, .name = room ? shown_name(name, name_len) : NULL, .detail = detail });
}

/* On the walk's thread, which touches nothing the loop may (the tenant,
 * a->findings: a stop tells them meanwhile): kept for the loop to tell
 * after the missing files' (a repair's findings first). */
static void found_later(struct audit_run *a, const char *kind, const char *name, size_t name_len, const char *detail) {
        bool room = a->n_later < AUDIT_FINDINGS_MAX;
        a->later_found++;
        (void)keep_finding(&a->later, &a->n_later,
                           (struct audit_finding){ .kind = kind, .name = room ? shown_name(name, name_len) : NULL,
                                                   .detail = detail });
}

/* ---- comparing ---- */

static int compare_entries(const void *x, const void *y) {
        const struct catalog_entry *a = x, *b = y;
        int c = memcmp(a->path, b->path, MIN(a->path_len, b->path_len));
        return c ? c : (a->path_len > b->path_len) - (a->path_len < b->path_len);
}

static int compare_hash(const void *a, const void *b) { return memcmp(a, b, 32); }

/* (A proto_object's hash is not its first field.) */
static int compare_objects(const void *a, const void *b) {
        return memcmp(((const struct proto_object *)a)->hash, ((const struct proto_object *)b)->hash, 32);
}

static bool in_store(const struct audit_run *a, const uint8_t h[32]) {
        struct proto_object key = {};
        memcpy(key.hash, h, 32);
        return a->n_objects && bsearch(&key, a->objects, a->n_objects, sizeof(key), compare_objects);
}

static const struct catalog_entry *find_entry(const struct catalog_entries *l, const struct catalog_entry *e) {
        return l->n ? bsearch(e, l->e, l->n, sizeof(*e), compare_entries) : NULL;
}

static bool has_object(const struct catalog_entry *e) { return e->type == CATALOG_FILE && e->size > 0; }

static bool same_entry(const struct catalog_entry *a, const struct catalog_entry *b) {
        return a->type == b->type && (!has_object(a) || (a->size == b->size && memcmp(a->sha256, b->sha256, 32) == 0));
}

/* Every object the entries name, sorted: data and manifests alike. */
static int named_objects_work(const struct catalog_entries *const lists[2], uint8_t (**ret)[32], size_t *n) {
        size_t max = lists[0]->n * 2 + lists[1]->n * 2, k = 0;
        uint8_t(*h)[32] = calloc(max + 1, 32);
        if (!h)
                return -ENOMEM;
        for (size_t l = 0; l < 2; l++)
                for (size_t i = 0; i < lists[l]->n; i++) {
                        const struct catalog_entry *e = &lists[l]->e[i];
                        if (has_object(e))
                                memcpy(h[k++], e->sha256, 32);
                        if (has_object(e) && e->has_manifest)
                                memcpy(h[k++], e->manifest, 32);
                }
        qsort(h, k, 32, compare_hash);
        *ret = h;
        *n = k;
        return 0;
}

static void repair_next(struct audit_run *a);

struct repair {
        struct audit_run *a;
        struct file_ref ref;
};

static void on_repaired(void *userdata, int error, const char *message) {
        struct repair *r = userdata;
        struct audit_run *a = r->a;
        if (error < 0) {
                a->repair_failed++;
                log_error("tenant %s: audit: %s: not uploaded again: %s", a->tn->cfg->name, r->ref.name,
                          message ?: strerror(-error));
        } else {
                a->repaired++;
                log_info("tenant %s: audit: %s uploaded again", a->tn->cfg->name, r->ref.name);
        }
        file_ref_done(&r->ref);
        free(r);
        if (!task_run_request_ended(&a->run))
                return;
        a->progress(a->userdata, "repairing", a->repaired + a->repair_failed, a->repairs);
        if (a->compared && a->repaired + a->repair_failed == a->repairs)
                repair_next(a);
}

/* On the loop, a missing one the thread found: uploaded again if its
 * bytes are all here, else lost. The path is looked up from the kernel's
 * lookup cache only (the walk just went through it). */
static void object_missing(struct audit_run *a, const struct missing *m) {
        _cleanup_(file_ref_done) struct file_ref ref = {};
        _cleanup_free_ char *path = NULL;
        const struct catalog_entry *e = m->e;
        struct proto_object o = { .kind = PROTO_OBJECT_DATA };
        char msg[512], key[STUB_KEY_MAX];

        int k = asprintf(&path, "%s/%.*s", a->tn->cfg->subvolume, (int)e->path_len, e->path) < 0
                        ? -ENOMEM
                        : file_ref_from_path(a->tn->t, path, &ref, msg, sizeof(msg));
        if (k < 0 && k != -EAGAIN) {
                found(a, "object-missing", e->path, e->path_len, "the store lost this file's object; it is gone "
                                                                 "from the disk too");
                return;
        }
        if (k == -EAGAIN) {
                /* Not walked on the loop: a thread brings its path in for the next audit. */
                file_ref_warm(a->tn->t, &ref);
                found(a, "object-missing", e->path, e->path_len, "the store lost this file's object; its path was not "
                                                                 "in the kernel's lookup cache: audit again to repair it");
                return;
        }
        if (!m->whole) {
                a->lost++;
                found(a, "object-missing", e->path, e->path_len,
                      "the store lost this file's object and the file is not whole here: its bytes are lost");
                return;
        }
        struct repair *r = calloc(1, sizeof(*r));
        if (!r)
                return;
        *r = (struct repair){ .a = a, .ref = ref };
        ref = (struct file_ref){};
        memcpy(o.hash, e->sha256, 32);
        object_key_format(&o, key);
        found(a, "object-missing", e->path, e->path_len, "the store lost this file's object: uploaded again");
        log_info("tenant %s: audit: %s: uploading it again (%s)", a->tn->cfg->name, r->ref.name, key);
        a->repairs++;
        a->run.requests++;
        if (file_job_when_cached(a->tn->t, &r->ref, job_archive_again, on_repaired, r) < 0)
                on_repaired(r, -ENOMEM, NULL);
}

/* On the walk's thread: is the file every byte of which its stub says
 * is here (archived, or changed since)? Read through the walk's own fd,
 * beneath it, following no link. */
static bool whole_here(const struct audit_run *a, const struct catalog_entry *e) {
        struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
        struct file_status st = { .tenant = "", .state = "" };
        _cleanup_free_ char *rel = strndup(e->path, e->path_len);
        char msg[512];

        if (!rel)
                return false;
        _cleanup_close_ int fd = (int)syscall(SYS_openat2, a->walk_fd, rel, &how, sizeof(how));
        return fd >= 0 && file_status_fd(fd, rel, &st, msg, sizeof(msg)) == 0 &&
               (strcmp(st.state, "archived") == 0 || strcmp(st.state, "dirty") == 0);
}

static int note_missing(struct audit_run *a, const struct catalog_entry *e) {
        struct missing *p = reallocarray(a->missing, a->n_missing + 1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        a->missing = p;
        a->missing[a->n_missing++] = (struct missing){ .e = e, .whole = whole_here(a, e) };
        return 0;
}

/* On the walk's thread: the three sorted and compared; what only the
 * loop may do (a repair) noted in a->missing. 0, or -ENOMEM. */
static int compare_work(struct audit_run *a, struct catalog_entries *disk) {
        const struct catalog_entries *const lists[2] = { disk, &a->catalog };
        _cleanup_free_ uint8_t(*named)[32] = NULL;
        char key[STUB_KEY_MAX];
        size_t n_named = 0;

        qsort(a->catalog.e, a->catalog.n, sizeof(*a->catalog.e), compare_entries);
        qsort(a->objects, a->n_objects, sizeof(*a->objects), compare_objects);
        qsort(disk->e, disk->n, sizeof(*disk->e), compare_entries);
        /* What the disk has: in the store, and in the catalog as it is? */
        for (size_t i = 0; i < disk->n; i++) {
                const struct catalog_entry *e = &disk->e[i], *c = find_entry(&a->catalog, e);
                if (has_object(e) && !in_store(a, e->sha256)) {
                        if (!a->repair)
                                found_later(a, "object-missing", e->path, e->path_len, "the store lost this file's object");
                        else if (note_missing(a, e) < 0)
                                return -ENOMEM;
                } else if (has_object(e) && e->has_manifest && !in_store(a, e->manifest))
                        found_later(a, "manifest-missing", e->path, e->path_len,
                              "the store lost this file's chunk manifest: its ranged reads restore it whole");
                if (!c || !same_entry(e, c)) {
                        a->catalog_differs = true;
                        found_later(a, "not-in-catalog", e->path, e->path_len,
                              c ? "the catalog has it otherwise" : "the catalog does not have it");
                }
        }
        /* What the catalog has and the disk not. */
        for (size_t i = 0; i < a->catalog.n; i++)
                if (!find_entry(disk, &a->catalog.e[i])) {
                        a->catalog_differs = true;
                        found_later(a, "catalog-only", a->catalog.e[i].path, a->catalog.e[i].path_len,
                              "in the catalog, not on disk");
                }
        /* What nothing here names. */
        if (named_objects_work(lists, &named, &n_named) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < a->n_objects; i++)
                if (!n_named || !bsearch(a->objects[i].hash, named, n_named, 32, compare_hash)) {
                        object_key_format(&a->objects[i], key);
                        found_later(a, "unreferenced", key, strlen(key),
                              "no stub of the subvolume and no catalog entry names it");
                }
        return 0;
}

static void repair_next(struct audit_run *a) {
        if (a->repair && a->catalog_differs) {
                catalog_note_lost(a->tn); /* a snapshot soon, made from the disk */
                a->catalog_differs = false;
        }
        task_run_finish(&a->run, 0, "%zu finding(s)%s; %llu object(s) uploaded again, %llu failed, %llu file(s) lost%s",
                              a->n_found, a->n_found > a->n_findings ? " (the first 10000 told)" : "",
                              (unsigned long long)a->repaired, (unsigned long long)a->repair_failed,
                              (unsigned long long)a->lost,
                              a->repair ? "" : " (nothing repaired: --repair uploads what it can and snapshots the catalog)");
}

/* ---- the steps ---- */

static void walk_run(void *userdata);
static void on_walked(void *userdata);
static void on_listed(void *userdata, int error);

/* On a thread (store_list_worked): the listing kept, sorted later. */
static void append_work(void *userdata, const struct proto_object *o, size_t n) {
        struct audit_run *a = userdata;
        struct proto_object *p = reallocarray(a->objects, a->n_objects + n + 1, sizeof(*p));
        if (!p) {
                a->list_error = -ENOMEM;
                return;
        }
        a->objects = p;
        memcpy(a->objects + a->n_objects, o, n * sizeof(*o));
        a->n_objects += n;
}

static void list_objects(struct audit_run *a, uint32_t kind) {
        a->run.requests++;
        int r = store_list_worked(a->tn, kind, AUDIT_LIST_MAX, append_work, on_listed, a);
        if (r < 0) {
                a->run.requests--;
                task_run_finish(&a->run, r, "cannot list the store: %s", strerror(-r));
        }
}

static void on_listed(void *userdata, int error) {
        struct audit_run *a = userdata;
        if (!task_run_request_ended(&a->run))
                return;
        if (error < 0 || a->list_error < 0) {
                task_run_finish(&a->run, error ?: a->list_error, "cannot list the store: %s", strerror(-(error ?: a->list_error)));
                return;
        }
        if (!a->listed_manifests) {
                a->listed_manifests = true;
                list_objects(a, PROTO_OBJECT_MANIFEST);
                return;
        }
        /* The walk: what is on disk now, and the comparison, on a thread. */
        a->progress(a->userdata, "reading the stubs", 0, 0);
        a->run.requests++;
        a->walk_fd = a->tn->subvol_fd; /* the thread reads no tenant: it may be freed at an exit meanwhile */
        int r = offthread_start(a->tn->t->event, &a->tn->subvol_fd, 1, walk_run, on_walked, a, NULL);
        if (r < 0) {
                a->run.requests--;
                task_run_finish(&a->run, r, "cannot walk the subvolume: %s", strerror(-r));
        }
}

static void walk_run(void *userdata) {
        struct audit_run *a = userdata;
        a->walk_error = catalog_walk(a->walk_fd, "", &a->disk);
        if (a->walk_error == 0 && compare_work(a, &a->disk) < 0)
                a->walk_error = -ENOMEM;
}

/* The files whose object is missing, a slice a turn (each is a lookup
 * and maybe a job), then the walk's other findings, told and logged.
 * Then the last repair to end ends the audit. */
static int on_missing_slice(sd_event_source *s, void *userdata) {
        struct audit_run *a = userdata;
        size_t end = MIN(a->n_missing, a->next_missing + AUDIT_SLICE);
        (void)s;

        if (a->run.ended)
                return 0;
        while (a->next_missing < end)
                object_missing(a, &a->missing[a->next_missing++]);
        for (end = MIN(a->n_later, a->next_later + AUDIT_SLICE); a->next_missing == a->n_missing && a->next_later < end;)
                tell(a, a->later[a->next_later++]); /* its name taken */
        if (a->next_missing < a->n_missing || a->next_later < a->n_later) {
                if (tierd_defer_once(a->tn->t->event, &a->slice_src, on_missing_slice, a) < 0)
                        task_run_finish(&a->run, -ENOMEM, "out of memory");
                return 0;
        }
        a->n_found += a->later_found - a->n_later; /* counted, not kept */
        a->compared = true;
        if (a->repaired + a->repair_failed == a->repairs)
                repair_next(a);
        return 0;
}

static void on_walked(void *userdata) {
        struct audit_run *a = userdata;
        if (!task_run_request_ended(&a->run))
                return;
        if (a->walk_error == -ENOMEM) {
                task_run_finish(&a->run, -ENOMEM, "out of memory");
                return;
        }
        if (a->walk_error < 0) {
                task_run_finish(&a->run, a->walk_error, "cannot walk the subvolume: %s", strerror(-a->walk_error));
                return;
        }
        a->progress(a->userdata, "comparing", 0, 0);
        on_missing_slice(NULL, a);
}

/* The catalog's tree, taken (its entries sorted on the walk's thread). */
static void on_tree(void *userdata, int error, const char *message, struct catalog_entries *tree) {
        struct audit_run *a = userdata;
        if (!task_run_request_ended(&a->run))
                return;
        if (error < 0) {
                task_run_finish(&a->run, error, "cannot read the catalog: %s", message);
                return;
        }
        catalog_entries_done(&a->catalog);
        a->catalog = *tree;
        *tree = (struct catalog_entries){};
        a->progress(a->userdata, "listing the store", 0, 0);
        list_objects(a, PROTO_OBJECT_DATA);
}

int audit_start(struct tenant *tn, bool repair, audit_done_t done, audit_progress_t progress, void *userdata,
                const char **why) {
        struct audit_run *a;

        if (tn->t->stopping)
                return *why = "tierd is stopping", -ESHUTDOWN;
        if (tn->audit)
                return *why = "an audit of this tenant is running", -EBUSY;
        if (gc_running(tn))
                return *why = "a collection of this tenant is running", -EBUSY;
        if ((*why = catalog_busy_why(tn)))
                return -EBUSY;
        if (!(a = calloc(1, sizeof(*a))))
                return -ENOMEM;
        *a = (struct audit_run){ .run = { .tn = tn, .name = "audit", .requests = 1, .told = told, .free = run_free }, .tn = tn,
                                 .repair = repair, .done = done, .progress = progress, .userdata = userdata };
        tn->audit = a; /* first: a failure may end it before catalog_read_tree returns */
        int r = catalog_read_tree(tn, on_tree, a);
        if (r < 0) {
                tn->audit = NULL;
                free(a);
                return *why = "cannot read the catalog", r;
        }
        return 0;
}

void audit_stop(struct tenant *tn) {
        if (tn->audit)
                task_run_finish(&tn->audit->run, -ECANCELED, "stopped: tierd stops, or the tenant's catalog was turned off");
}
