/* SPDX-License-Identifier: MIT */
/*
 * The catalog writer (its lease and state; snapshots in catalogsnapshot.c,
 * journal objects in catalogjournal.c): one request to the store at a
 * time, in this order:
 * find or take the lease, write a snapshot of the tree, then journal
 * objects of what was archived, at most one a second, each after checking
 * that no newer writer took the lease. A snapshot again after 1,000
 * journal objects or an hour.
 */
#include "catalog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog-internal.h"
#include "json-strict.h"
#include "log.h"
#include "quota.h"
#include "storeio.h"
#include "usage.h"

#define FLUSH_EVERY_USEC (1000 * 1000ull)
#define BACKOFF_MAX_USEC (60 * 1000 * 1000ull)

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

uint64_t catalog_realtime_usec(void) {
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
        json_object_object_add(o, "time", json_object_new_uint64(catalog_realtime_usec()));
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

void catalog_wake_waiters(struct catalog *c) {
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
        if (c->counted_detached)
                c->tn->t->imports_detached--;
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
        catalog_wake_waiters(c);
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
void catalog_retry_later(struct catalog *c, int error, const char *what) {
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
void catalog_request_started(struct catalog *c, int r, const char *what) {
        if (r < 0) {
                c->busy = false;
                catalog_retry_later(c, r, what);
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
                catalog_retry_later(c, error, "cannot take the lease");
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
        catalog_request_started(c, text ? store_put(c->tn, key, text, strlen(text), true, on_epoch_taken, c) : -ENOMEM,
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
                catalog_retry_later(c, error, "cannot find the last journal object");
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
        catalog_request_started(c, store_head(c->tn, key, on_seq_probed, c), "cannot find the last journal object");
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
                catalog_retry_later(c, error, "cannot read the lease");
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
        c->next_seq = MAX(c->latest_start_seq, catalog_seq_hint_load(c->tn) + 1);
        c->state = CATALOG_READY;
        c->seq_known = false; /* probe_seq from here */
        catalog_writer_continue(c);
}

static void discover_next(struct catalog *c) {
        char key[STUB_KEY_MAX];
        catalog_epoch_key(c->probe_epoch, key);
        c->busy = true;
        catalog_request_started(c, store_get(c->tn, key, 4096, on_epoch_read, c), "cannot read the lease");
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
                catalog_write_snapshot(c);
                return;
        }
        if (c->sending) { /* written, the lease not checked after it yet */
                catalog_check_fence_after_put(c);
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
        catalog_check_fence_then_put(c);
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
        /* Entries not written are found again by the next snapshot. An
         * import ends at its next step, and a stop of tierd waits for it
         * (catalog_import_pending). */
        catalog_import_stop_catalog(c);
        if (c->busy && c->import) {
                c->counted_detached = true;
                tn->t->imports_detached++;
        }
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
