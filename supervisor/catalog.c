/* SPDX-License-Identifier: MIT */
/*
 * The catalog writer: one request to the store at a time, in this order:
 * find or take the lease, write a snapshot of the tree, then journal
 * objects of what was archived, at most one a second, each after checking
 * that no newer writer took the lease. A snapshot again after 1,000
 * journal objects or an hour.
 */
#include "catalog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog-internal.h"
#include "catalogtree.h"
#include "engine.h"
#include "json-strict.h"
#include "log.h"
#include "macro.h"
#include "objkey.h"
#include "offthread.h"
#include "quota.h"
#include "storeio.h"
#include "usage.h"

#define FLUSH_EVERY_USEC (1000 * 1000ull)
#define BACKOFF_MAX_USEC (60 * 1000 * 1000ull)
#define SNAPSHOT_EVERY_JOURNALS 1000
#define SNAPSHOT_EVERY_USEC (3600 * 1000 * 1000ull)
#define SNAPSHOT_RETRY_USEC (60 * 1000 * 1000ull)  /* after one that missed entries */
#define JOURNAL_ENTRIES_MAX 10000                  /* per journal object: well under what a reader takes */
#define INDEX_KEEP_USEC (7 * 24 * 3600 * 1000 * 1000ull) /* snapshots listed for --at */

struct catalog_waiter {
        struct catalog_waiter *next;
        void (*callback)(void *userdata);
        void *userdata;
};


void catalog_epoch_key(uint32_t epoch, char key[STUB_KEY_MAX]) {
        snprintf(key, STUB_KEY_MAX, CATALOG_KEY_PREFIX "epoch/%08x", epoch);
}

void catalog_journal_key(uint64_t seq, char key[STUB_KEY_MAX]) {
        object_key_format(&(struct proto_object){ .kind = PROTO_OBJECT_JOURNAL, .seq = seq }, key);
}

void catalog_snapshot_key(uint64_t seq, uint32_t epoch, char key[STUB_KEY_MAX]) {
        object_key_format(&(struct proto_object){ .kind = PROTO_OBJECT_SNAPSHOT, .seq = seq, .epoch = epoch }, key);
}

void catalog_index_key(uint32_t epoch, char key[STUB_KEY_MAX]) {
        snprintf(key, STUB_KEY_MAX, CATALOG_KEY_PREFIX "snapshots/%08x", epoch);
}

static uint64_t realtime_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

char *catalog_format_epoch(uint32_t epoch, uint64_t start_seq, const char *node) {
        json_object *o = json_object_new_object();
        char *text = NULL;
        if (!o)
                return NULL;
        json_object_object_add(o, "epoch", json_object_new_uint64(epoch));
        json_object_object_add(o, "start_seq", json_object_new_uint64(start_seq));
        json_object_object_add(o, "node", json_object_new_string(node));
        json_object_object_add(o, "time", json_object_new_uint64(realtime_usec()));
        text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        return text;
}

json_object *catalog_parse_json(const char *data, size_t len) {
        _cleanup_free_ char *why = NULL, *dup = NULL;
        json_object *o = NULL;
        return json_parse_strict(data, len, &o, &why, &dup) == 0 ? o : NULL;
}

int catalog_parse_epoch(const char *data, size_t len, uint32_t epoch, uint64_t *start_seq, char *node, size_t node_size) {
        json_object *o = catalog_parse_json(data, len), *v;
        int r = -EBADMSG;

        if (o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, "epoch", &v) &&
            json_object_is_type(v, json_type_int) && json_object_get_uint64(v) == epoch &&
            json_object_object_get_ex(o, "start_seq", &v) && json_object_is_type(v, json_type_int) &&
            json_object_get_int64(v) > 0) {
                *start_seq = json_object_get_uint64(v);
                if (json_object_object_get_ex(o, "node", &v) && json_object_is_type(v, json_type_string)) {
                        snprintf(node, node_size, "%s", json_object_get_string(v));
                        r = 0;
                }
        }
        json_object_put(o);
        return r;
}

/* Which node this is, for the lease: the machine and the subvolume. */
static void node_name(struct tenant *tn, char *out, size_t size) {
        char id[64] = "unknown";
        FILE *f = fopen("/etc/machine-id", "re");
        if (f) {
                if (!fgets(id, sizeof(id), f))
                        snprintf(id, sizeof(id), "unknown");
                id[strcspn(id, "\n")] = 0;
                fclose(f);
        }
        snprintf(out, size, "%s:%s", id, tn->cfg->subvolume);
}

/* ---- the last journal number written, kept across restarts ---- */

static char *seq_hint_path(struct tenant *tn) {
        char *p = NULL;
        return asprintf(&p, "%s/%s.catalog-seq", tn->t->state_dir, tn->cfg->name) < 0 ? NULL : p;
}

static uint64_t seq_hint_load(struct tenant *tn) {
        _cleanup_free_ char *path = seq_hint_path(tn);
        unsigned long long v = 0;
        FILE *f = path ? fopen(path, "re") : NULL;
        if (f) {
                if (fscanf(f, "%llu", &v) != 1)
                        v = 0;
                fclose(f);
        }
        return v;
}

static void seq_hint_save(struct tenant *tn, uint64_t seq) {
        _cleanup_free_ char *path = seq_hint_path(tn);
        FILE *f = path ? fopen(path, "we") : NULL;
        if (f) {
                fprintf(f, "%llu\n", (unsigned long long)seq);
                fclose(f);
        }
}

/* ---- waiting and state ---- */

/* Each waiter asks again (and finds its answer, or waits again). */
static void call_waiters(struct catalog_waiter *w) {
        while (w) {
                struct catalog_waiter *next = w->next;
                w->callback(w->userdata);
                free(w);
                w = next;
        }
}

static void wake_waiters(struct catalog *c) {
        struct catalog_waiter *w = c->waiters;
        c->waiters = NULL;
        call_waiters(w);
        /* Files whose entries were not written were passed over: the
         * watermark may take them now. */
        usage_clear_flag(c->tn, ENGINE_BUSY);
        quota_candidates_changed(c->tn);
}

void catalog_pending_free_list(struct catalog_pending *p) {
        while (p) {
                struct catalog_pending *next = p->next;
                catalog_entry_done(&p->e);
                free(p);
                p = next;
        }
}

static void catalog_free(struct catalog *c) {
        catalog_pending_free_list(c->queue);
        catalog_pending_free_list(c->sending);
        free(c->sending_data);
        sd_event_source_unref(c->timer);
        json_object_put(c->index);
        catalog_import_abort(c);
        struct catalog_waiter *w = c->waiters;
        free(c);
        call_waiters(w); /* nobody waits for a catalog that went */
}

bool catalog_request_ended(struct catalog *c) {
        c->busy = false;
        if (c->stopping) {
                catalog_free(c);
                return false;
        }
        return true;
}

void catalog_writer_fence(struct catalog *c, const char *why) {
        c->state = CATALOG_FENCED;
        log_error("tenant %s: catalog: %s: this node no longer writes the catalog and releases nothing "
                  "(tierctl tenant import takes it back)", c->tn->cfg->name, why);
        tenant_set_last_error(c->tn, "catalog: %s", why);
        catalog_queue_drop(c);
        /* Entries were dropped: should an import make this node the writer
         * again, nothing is released before its first snapshot. */
        c->first_snapshot_done = false;
        wake_waiters(c);
        catalog_writer_continue(c); /* an import waiting for the writer runs now */
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct catalog *c = userdata;
        (void)s, (void)usec;
        c->retry_pending = false;
        catalog_writer_continue(c);
        return 0;
}

static void continue_after(struct catalog *c, uint64_t delay_usec) {
        uint64_t when = tierd_now_usec(c->tn->t) + delay_usec;
        int r = 0;
        if (!c->timer)
                r = sd_event_add_time(c->tn->t->event, &c->timer, CLOCK_MONOTONIC, when, 0, on_timer, c);
        else
                r = sd_event_source_set_time(c->timer, when);
        if (r >= 0)
                r = sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
        if (r < 0)
                log_error_errno(r, "tenant %s: catalog: cannot schedule: %m", c->tn->cfg->name);
}

/* A store error: the same step again later, waiting longer each time. */
static void retry_later(struct catalog *c, int error, const char *what) {
        c->backoff_usec = c->backoff_usec ? MIN(c->backoff_usec * 2, BACKOFF_MAX_USEC) : FLUSH_EVERY_USEC;
        log_error("tenant %s: catalog: %s: %s; trying again in %llu s", c->tn->cfg->name, what, strerror(-error),
                  (unsigned long long)(c->backoff_usec / 1000000));
        tenant_set_last_error(c->tn, "catalog: %s: %s", what, strerror(-error));
        c->retry_pending = true; /* nothing new starts before (a change heard meanwhile waits too) */
        continue_after(c, c->backoff_usec);
        /* Those waiting for an entry hear of it (and give up). */
        struct catalog_waiter *w = c->waiters;
        c->waiters = NULL;
        call_waiters(w);
}

/* A request to the store was given (busy set before): if it could not
 * even start, the step waits its backoff. */
static void request_started(struct catalog *c, int r, const char *what) {
        if (r < 0) {
                c->busy = false;
                retry_later(c, r, what);
        }
}

/* ---- the lease ---- */

static void discover_next(struct catalog *c);

static void on_epoch_taken(void *userdata, int error) {
        struct catalog *c = userdata;
        if (!catalog_request_ended(c))
                return;
        if (error == -EEXIST) { /* another node was quicker: look again */
                c->probe_epoch = 1;
                catalog_writer_continue(c);
                return;
        }
        if (error < 0) {
                retry_later(c, error, "cannot take the lease");
                return;
        }
        c->backoff_usec = 0;
        log_info("tenant %s: catalog: lease taken (epoch %u)", c->tn->cfg->name, c->probe_epoch);
        catalog_writer_resume(c, c->probe_epoch, c->latest_start_seq);
}

static void take_epoch(struct catalog *c, uint32_t epoch, uint64_t start_seq) {
        char key[STUB_KEY_MAX];
        _cleanup_free_ char *text = catalog_format_epoch(epoch, start_seq, c->node);

        c->probe_epoch = epoch;
        c->latest_start_seq = start_seq;
        catalog_epoch_key(epoch, key);
        c->busy = true;
        request_started(c, text ? store_put(c->tn, key, text, strlen(text), true, on_epoch_taken, c) : -ENOMEM,
                        "cannot take the lease");
}

static void on_seq_probed(void *userdata, int error, const char *data, size_t len) {
        struct catalog *c = userdata;
        (void)data, (void)len;
        if (!catalog_request_ended(c))
                return;
        if (error == 0) {
                c->next_seq++;
                catalog_writer_continue(c);
                return;
        }
        if (error != -ENOENT) {
                retry_later(c, error, "cannot find the last journal object");
                return;
        }
        c->backoff_usec = 0;
        catalog_writer_resume(c, c->epoch, c->next_seq);
}

/* Ours already (this node wrote it before a restart): on from the first
 * journal number not in the store. */
static void probe_seq(struct catalog *c) {
        char key[STUB_KEY_MAX];
        catalog_journal_key(c->next_seq, key);
        c->busy = true;
        request_started(c, store_head(c->tn, key, on_seq_probed, c), "cannot find the last journal object");
}

static void on_epoch_read(void *userdata, int error, const char *data, size_t len) {
        struct catalog *c = userdata;

        if (!catalog_request_ended(c))
                return;
        uint32_t latest = c->probe_epoch - 1;
        if (error == 0) {
                if (catalog_parse_epoch(data, len, c->probe_epoch, &c->latest_start_seq, c->latest_node,
                                        sizeof(c->latest_node)) < 0) {
                        catalog_writer_fence(c, "a lease object in the store is corrupt");
                        return;
                }
                c->probe_epoch++;
                catalog_writer_continue(c);
                return;
        }
        if (error != -ENOENT) {
                retry_later(c, error, "cannot read the lease");
                return;
        }
        if (latest == 0) {
                take_epoch(c, 1, 1); /* a new catalog */
                return;
        }
        if (strcmp(c->latest_node, c->node) != 0) {
                char why[CATALOG_NODE_MAX + 64];
                snprintf(why, sizeof(why), "its lease (epoch %u) is held by %s", latest, c->latest_node);
                catalog_writer_fence(c, why);
                return;
        }
        c->epoch = latest;
        c->next_seq = MAX(c->latest_start_seq, seq_hint_load(c->tn) + 1);
        c->state = CATALOG_READY;
        c->seq_known = false; /* probe_seq from here */
        catalog_writer_continue(c);
}

static void discover_next(struct catalog *c) {
        char key[STUB_KEY_MAX];
        catalog_epoch_key(c->probe_epoch, key);
        c->busy = true;
        request_started(c, store_get(c->tn, key, 4096, on_epoch_read, c), "cannot read the lease");
}

/* ---- snapshots ---- */

/* The object of h->entries entries, which next() gives one by one. */
static int encode_entries(const struct catalog_header *h, const struct catalog_key *key,
                          const struct catalog_entry *(*next)(void *ctx), void *ctx, char **ret, size_t *ret_len) {
        FILE *f = open_memstream(ret, ret_len);
        struct catalog_writer *w;
        int r;

        if (!f)
                return -ENOMEM;
        r = catalog_writer_new(f, h, key, &w);
        for (uint64_t i = 0; r == 0 && i < h->entries; i++)
                if ((r = catalog_writer_add(w, next(ctx))) < 0)
                        catalog_writer_free(w);
        if (r == 0)
                r = catalog_writer_finish(w);
        if (fclose(f) != 0 && r == 0)
                r = -ENOMEM;
        if (r < 0) {
                free(*ret);
                *ret = NULL;
        }
        return r;
}

/* A snapshot on its way: the object, then the list of snapshots. */
struct snapshot_put {
        struct catalog *c;
        uint64_t seq, time_usec;
        size_t failed;         /* entries the walk could not make */
        uint64_t dropped_gen;  /* c->dropped_gen when its walk began */
};

static void on_index_put(void *userdata, int error) {
        struct snapshot_put *p = userdata;
        struct catalog *c = p->c;
        size_t failed = p->failed;
        /* Changes dropped after its walk began are not in it. */
        bool dropped_since = p->dropped_gen != c->dropped_gen;

        free(p);
        if (!catalog_request_ended(c))
                return;
        if (error < 0) {
                retry_later(c, error, "cannot write the list of snapshots");
                return;
        }
        c->backoff_usec = 0;
        c->snapshot_due = false;
        c->journals_since_snapshot = 0;
        c->snapshot_usec = tierd_now_usec(c->tn->t);
        /* Entries it could not make: nothing is released until a snapshot
         * without them, tried again in a minute. */
        if (failed) {
                log_error("tenant %s: catalog: %zu entries could not be recorded (see above): no release until "
                          "they are", c->tn->cfg->name, failed);
                tenant_set_last_error(c->tn, "catalog: %zu entries could not be recorded", failed);
                c->snapshot_due = true;
                c->snapshot_after_usec = c->snapshot_usec + SNAPSHOT_RETRY_USEC;
        }
        if (dropped_since && !failed) {
                c->snapshot_due = true;
                c->snapshot_after_usec = c->snapshot_usec + CATALOG_SNAPSHOT_SPILL_USEC;
        }
        bool was_unrecorded = c->unrecorded;
        c->unrecorded = failed > 0 || dropped_since;
        if (!dropped_since)
                c->spilled = false; /* what was dropped is in this snapshot */
        if (!c->first_snapshot_done || was_unrecorded) {
                c->first_snapshot_done = true;
                log_info("tenant %s: catalog: snapshot written (journal %llu, epoch %u)", c->tn->cfg->name,
                         (unsigned long long)(c->next_seq - 1), c->epoch);
                wake_waiters(c);
        }
        catalog_writer_continue(c);
}

/* The list of snapshots, for imports --at: the new one added, those past
 * the retention dropped (the latest always kept). */
static void put_index(struct snapshot_put *p) {
        struct catalog *c = p->c;
        uint64_t seq = p->seq, time_usec = p->time_usec;
        json_object *n = json_object_new_array(), *e = json_object_new_object();
        size_t len = c->index ? json_object_array_length(c->index) : 0;
        int r = -ENOMEM;

        if (n && e) {
                for (size_t i = 0; i < len; i++) {
                        json_object *x = json_object_array_get_idx(c->index, i), *t;
                        if (json_object_object_get_ex(x, "time", &t) &&
                            json_object_get_uint64(t) + INDEX_KEEP_USEC >= time_usec)
                                json_object_array_add(n, json_object_get(x));
                }
                json_object_object_add(e, "seq", json_object_new_uint64(seq));
                json_object_object_add(e, "time", json_object_new_uint64(time_usec));
                json_object_object_add(e, "epoch", json_object_new_uint64(c->epoch));
                json_object_array_add(n, e);
                e = NULL;
                json_object_put(c->index);
                c->index = n;
                n = NULL;
                const char *text = json_object_to_json_string_ext(c->index, JSON_C_TO_STRING_PLAIN);
                char key[STUB_KEY_MAX];
                catalog_index_key(c->epoch, key);
                c->busy = true;
                r = store_put(c->tn, key, text, strlen(text), false, on_index_put, p);
        }
        json_object_put(n);
        json_object_put(e);
        if (r < 0) {
                free(p);
                c->busy = false;
                retry_later(c, r, "cannot write the list of snapshots");
        }
}

static void on_snapshot_put(void *userdata, int error) {
        struct snapshot_put *p = userdata;
        struct catalog *c = p->c;

        if (!catalog_request_ended(c)) {
                free(p);
                return;
        }
        if (error < 0) {
                free(p);
                retry_later(c, error, "cannot write a snapshot");
                return;
        }
        put_index(p);
}

static void on_index_read(void *userdata, int error, const char *data, size_t len) {
        struct catalog *c = userdata;
        if (!catalog_request_ended(c))
                return;
        if (error < 0 && error != -ENOENT) {
                retry_later(c, error, "cannot read the list of snapshots");
                return;
        }
        json_object *o = error == 0 ? catalog_parse_json(data, len) : NULL;
        if (!o || !json_object_is_type(o, json_type_array)) {
                if (error == 0)
                        log_warning("tenant %s: catalog: the list of snapshots is corrupt: written anew",
                                    c->tn->cfg->name);
                json_object_put(o);
                o = json_object_new_array();
        }
        c->index = o;
        catalog_writer_continue(c);
}

struct array_cursor {
        const struct catalog_entry *e;
        size_t i;
};

static const struct catalog_entry *array_next(void *ctx) {
        struct array_cursor *a = ctx;
        return &a->e[a->i++];
}

static const struct catalog_entry *pending_next(void *ctx) {
        struct catalog_pending **p = ctx;
        const struct catalog_entry *e = &(*p)->e;
        *p = (*p)->next;
        return e;
}

/* A snapshot's walk and encoding, on a thread of its own (offthread.h):
 * 100,000 files take seconds, and readers are answered meanwhile. It
 * reads through the subvolume's fd only. */
struct snapshot_walk {
        struct catalog *c; /* not touched by the thread */
        struct tenant *tn;
        struct catalog_header h;
        struct catalog_key key; /* a copy: a reload may change the tenant's meanwhile */
        char *data;
        size_t len, failed;
        uint64_t dropped_gen;
        int error;
};

static void snapshot_walk_run(void *userdata) {
        _cleanup_(catalog_entries_done) struct catalog_entries l = {};
        struct snapshot_walk *w = userdata;

        w->error = catalog_walk(w->tn, "", &l);
        w->h.entries = l.n;
        w->failed = l.failed;
        struct array_cursor cur = { .e = l.e };
        if (w->error == 0)
                w->error = encode_entries(&w->h, &w->key, array_next, &cur, &w->data, &w->len);
}

static void on_snapshot_walked(void *userdata) {
        struct snapshot_walk *w = userdata;
        struct catalog *c = w->c;
        _cleanup_free_ char *data = w->data;
        struct catalog_header h = w->h;
        struct snapshot_put *p;
        char key[STUB_KEY_MAX];
        int r = w->error;
        size_t len = w->len, failed = w->failed;
        uint64_t dropped_gen = w->dropped_gen;

        free(w);
        if (!catalog_request_ended(c))
                return;
        if (r < 0) {
                retry_later(c, r, "cannot make a snapshot");
                return;
        }
        if (!(p = calloc(1, sizeof(*p)))) {
                retry_later(c, -ENOMEM, "cannot make a snapshot");
                return;
        }
        *p = (struct snapshot_put){ .c = c, .seq = h.seq, .time_usec = h.time_usec, .failed = failed,
                                    .dropped_gen = dropped_gen };
        catalog_snapshot_key(h.seq, c->epoch, key);
        c->busy = true;
        /* Ours (the key has our epoch): written again after a restart. */
        r = store_put(c->tn, key, data, len, false, on_snapshot_put, p);
        if (r < 0) {
                c->busy = false;
                free(p);
                retry_later(c, r, "cannot write a snapshot");
        }
}

static void write_snapshot(struct catalog *c) {
        struct snapshot_walk *w;
        char key[STUB_KEY_MAX];

        if (!c->index) { /* this epoch's, read once: each snapshot adds to it */
                catalog_index_key(c->epoch, key);
                c->busy = true;
                request_started(c, store_get(c->tn, key, CATALOG_INDEX_MAX, on_index_read, c),
                                "cannot read the list of snapshots");
                return;
        }
        if (!(w = calloc(1, sizeof(*w)))) {
                retry_later(c, -ENOMEM, "cannot make a snapshot");
                return;
        }
        /* As of the last journal object: what is archived meanwhile is in
         * the journal after it too. */
        *w = (struct snapshot_walk){ .c = c, .tn = c->tn, .dropped_gen = c->dropped_gen, .key = c->tn->catalog_key,
                                     .h = { .kind = CATALOG_SNAPSHOT, .epoch = c->epoch, .seq = c->next_seq - 1,
                                            .time_usec = realtime_usec() } };
        c->busy = true; /* the walk is the writer's request in flight */
        int r = offthread_start(c->tn->t->event, &c->tn->subvol_fd, 1, snapshot_walk_run, on_snapshot_walked, w, NULL);
        if (r < 0) {
                free(w);
                request_started(c, r, "cannot make a snapshot");
        }
}

/* ---- journal ---- */

static void journal_done(struct catalog *c) {
        catalog_pending_free_list(c->sending);
        c->sending = NULL;
        c->sending_data = mfree(c->sending_data);
        seq_hint_save(c->tn, c->next_seq);
        c->next_seq++;
        c->journals_since_snapshot++;
        c->backoff_usec = 0;
        c->last_put_usec = tierd_now_usec(c->tn->t);
        if (c->journals_since_snapshot >= SNAPSHOT_EVERY_JOURNALS ||
            c->last_put_usec - c->snapshot_usec >= SNAPSHOT_EVERY_USEC)
                c->snapshot_due = true;
        wake_waiters(c);
}

/* The entries in flight go back to the head of the queue. */
static void journal_requeue(struct catalog *c) {
        struct catalog_pending **end = &c->sending;
        while (*end) {
                c->queued_bytes += catalog_entry_bytes(&(*end)->e);
                end = &(*end)->next;
                c->n_queued++;
        }
        *end = c->queue;
        if (!c->queue)
                c->queue_tail = end;
        c->queue = c->sending;
        c->sending = NULL;
        c->sending_data = mfree(c->sending_data);
}

/* After the PUT as before it: a lease taken in between (an import
 * elsewhere that read up to this number) makes the object one readers
 * ignore, and its entries are not in the catalog. */
static void on_fence_checked_after(void *userdata, int error, const char *data, size_t len) {
        struct catalog *c = userdata;
        (void)data, (void)len;
        if (!catalog_request_ended(c))
                return;
        if (error == 0) {
                journal_requeue(c);
                catalog_writer_fence(c, "another node took the catalog over (a newer lease is in the store)");
                return;
        }
        if (error != -ENOENT) {
                retry_later(c, error, "cannot check the lease");
                return; /* checked again next time: the object is written, its entries pending */
        }
        journal_done(c);
        catalog_writer_continue(c);
}

static void check_fence_after_put(struct catalog *c) {
        char key[STUB_KEY_MAX];
        catalog_epoch_key(c->epoch + 1, key);
        c->busy = true;
        request_started(c, store_head(c->tn, key, on_fence_checked_after, c), "cannot check the lease");
}

static void on_journal_read_back(void *userdata, int error, const char *data, size_t len) {
        struct catalog *c = userdata;
        struct catalog_header h = {};
        const char *why;

        if (!catalog_request_ended(c))
                return;
        if (error == 0 && len == c->sending_len && memcmp(data, c->sending_data, len) == 0) {
                check_fence_after_put(c); /* ours: written before a worker died */
                return;
        }
        if (error == 0 && catalog_decode(data, len, &c->tn->catalog_key, &h, NULL, NULL, &why) == 0 && h.epoch > c->epoch) {
                journal_requeue(c);
                catalog_writer_fence(c, "another node took the catalog over (a newer lease wrote this journal number)");
                return;
        }
        if (error == -ENOENT) { /* there, then gone: the same number again */
                journal_requeue(c);
                catalog_writer_continue(c);
                return;
        }
        if (error < 0 && error != -EFBIG) {
                journal_requeue(c);
                retry_later(c, error, "cannot read a journal object back");
                return;
        }
        /* A fenced writer's leftover (or an object no reader takes): the
         * next number. */
        log_warning("tenant %s: catalog: journal %llu is another writer's: skipped", c->tn->cfg->name,
                    (unsigned long long)c->next_seq);
        c->next_seq++;
        journal_requeue(c);
        catalog_writer_continue(c);
}

static void on_journal_put(void *userdata, int error) {
        struct catalog *c = userdata;
        char key[STUB_KEY_MAX];

        if (!catalog_request_ended(c))
                return;
        if (error == -EEXIST) {
                catalog_journal_key(c->next_seq, key);
                c->busy = true;
                int r = store_get(c->tn, key, CATALOG_JOURNAL_MAX, on_journal_read_back, c);
                if (r < 0) {
                        c->busy = false;
                        journal_requeue(c);
                        retry_later(c, r, "cannot read a journal object back");
                }
                return;
        }
        if (error < 0) {
                journal_requeue(c);
                retry_later(c, error, "cannot write a journal object");
                return;
        }
        check_fence_after_put(c);
}

static void put_journal(struct catalog *c) {
        char key[STUB_KEY_MAX];
        size_t n = 0;
        int r;

        /* At most JOURNAL_ENTRIES_MAX entries an object: the rest go next.
         * A subtree heard while the lease was checked is walked first. */
        struct catalog_pending **cut = &c->queue;
        size_t bytes = 0;
        while (*cut && n < JOURNAL_ENTRIES_MAX && !(*cut)->subtree) {
                bytes += catalog_entry_bytes(&(*cut)->e);
                cut = &(*cut)->next;
                n++;
        }
        if (n == 0) {
                catalog_writer_continue(c);
                return;
        }
        c->sending = c->queue;
        c->queue = *cut;
        *cut = NULL;
        c->n_queued -= n;
        c->queued_bytes -= MIN(c->queued_bytes, bytes);
        if (!c->queue)
                c->queue_tail = &c->queue;
        struct catalog_header h = { .kind = CATALOG_JOURNAL, .epoch = c->epoch, .seq = c->next_seq,
                                    .time_usec = realtime_usec(), .entries = n };
        struct catalog_pending *cur = c->sending;
        r = encode_entries(&h, &c->tn->catalog_key, pending_next, &cur, &c->sending_data, &c->sending_len);
        catalog_journal_key(c->next_seq, key);
        c->busy = true;
        if (r == 0)
                r = store_put(c->tn, key, c->sending_data, c->sending_len, true, on_journal_put, c);
        if (r < 0) {
                c->busy = false;
                journal_requeue(c);
                retry_later(c, r, "cannot write a journal object");
        }
}

static void on_fence_checked(void *userdata, int error, const char *data, size_t len) {
        struct catalog *c = userdata;
        (void)data, (void)len;
        if (!catalog_request_ended(c))
                return;
        if (error == 0) {
                catalog_writer_fence(c, "another node took the catalog over (a newer lease is in the store)");
                return;
        }
        if (error != -ENOENT) {
                retry_later(c, error, "cannot check the lease");
                return;
        }
        put_journal(c);
}

/* Before each journal object: is there a newer lease than ours? */
static void check_fence_then_put(struct catalog *c) {
        char key[STUB_KEY_MAX];
        catalog_epoch_key(c->epoch + 1, key);
        c->busy = true;
        request_started(c, store_head(c->tn, key, on_fence_checked, c), "cannot check the lease");
}

/* ---- the writer's next step ---- */

void catalog_writer_continue(struct catalog *c) {
        if (c->busy || c->stopping || c->retry_pending)
                return;
        if (c->import) {
                catalog_import_run(c); /* it resumes the writer when done */
                return;
        }
        switch (c->state) {
        case CATALOG_FENCED:
                return;
        case CATALOG_STARTING:
                discover_next(c);
                return;
        case CATALOG_READY:
                break;
        }
        if (!c->seq_known) {
                probe_seq(c);
                return;
        }
        uint64_t now = tierd_now_usec(c->tn->t);
        if (!c->first_snapshot_done || (c->snapshot_due && now >= c->snapshot_after_usec)) {
                write_snapshot(c);
                return;
        }
        if (c->sending) { /* written, the lease not checked after it yet */
                check_fence_after_put(c);
                return;
        }
        if (!c->queue) {
                if (c->snapshot_due)
                        continue_after(c, c->snapshot_after_usec - now);
                return;
        }
        /* A directory renamed or made: its entries first, walked on a
         * thread (catalognote.c). */
        if (c->n_subtrees) {
                catalog_subtrees_resolve(c);
                return;
        }
        if (c->last_put_usec && now < c->last_put_usec + FLUSH_EVERY_USEC) {
                continue_after(c, c->last_put_usec + FLUSH_EVERY_USEC - now);
                return;
        }
        check_fence_then_put(c);
}

void catalog_writer_resume(struct catalog *c, uint32_t epoch, uint64_t next_seq) {
        if (epoch != c->epoch) { /* a new lease: its list of snapshots starts empty */
                json_object_put(c->index);
                c->index = json_object_new_array();
        }
        c->state = CATALOG_READY;
        c->epoch = epoch;
        c->next_seq = next_seq;
        c->seq_known = true;
        c->snapshot_due = true; /* the tree as this writer starts it */
        catalog_writer_continue(c);
}

/* ---- public ---- */

int catalog_start(struct tenant *tn) {
        struct catalog *c;

        if (!tn->cfg->catalog || tn->catalog)
                return 0;
        if (!(c = calloc(1, sizeof(*c))))
                return -ENOMEM;
        c->tn = tn;
        c->queue_tail = &c->queue;
        c->probe_epoch = 1;
        node_name(tn, c->node, sizeof(c->node));
        tn->catalog = c;
        int r = catalog_import_resume_if_marked(tn);
        if (r < 0)
                log_error_errno(r, "tenant %s: cannot import again: %m", tn->cfg->name);
        catalog_writer_continue(c);
        return 0;
}

void catalog_stop(struct tenant *tn) {
        struct catalog *c = tn->catalog;
        if (!c)
                return;
        tn->catalog = NULL;
        /* Entries not written are found again by the next snapshot. */
        if (c->busy)
                c->stopping = true; /* freed when its request ends */
        else
                catalog_free(c);
}

const char *catalog_busy_why(const struct tenant *tn) {
        const struct catalog *c = tn->catalog;
        if (!c)
                return "the tenant keeps no catalog (\"catalog\": true in its policy), so what its catalog names "
                       "cannot be known";
        if (c->import)
                return "an import of the tenant is running";
        switch (c->state) {
        case CATALOG_STARTING:
                return "the tenant's catalog is starting (finding its lease): try again in a moment";
        case CATALOG_FENCED:
                return "another node has taken the tenant's catalog: collect its garbage there";
        case CATALOG_READY:
                break;
        }
        return NULL;
}

int catalog_when_written(struct tenant *tn, void (*callback)(void *userdata), void *userdata) {
        struct catalog *c = tn->catalog;
        struct catalog_waiter *w;

        if (!c || c->state == CATALOG_FENCED)
                return -ESTALE;
        if (c->backoff_usec)
                return -EIO; /* the store fails: no waiting on it */
        if (!(w = calloc(1, sizeof(*w))))
                return -ENOMEM;
        *w = (struct catalog_waiter){ .next = c->waiters, .callback = callback, .userdata = userdata };
        c->waiters = w;
        return 0;
}
