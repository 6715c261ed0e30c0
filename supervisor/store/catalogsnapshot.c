/* SPDX-License-Identifier: MIT */
/*
 * The catalog writer's snapshots: the whole tree walked on a thread,
 * encoded, put under this epoch's name, then added to the epoch's list of
 * snapshots (which `--at` reads); old snapshots leave that list after a
 * week.
 */

#include "catalog-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalogtree.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "storeio.h"

#define SNAPSHOT_RETRY_USEC (60 * 1000 * 1000ull)  /* after one that missed entries */
#define INDEX_KEEP_USEC (7 * 24 * 3600 * 1000 * 1000ull) /* snapshots listed for --at */

/* The object of h->entries entries, which next() gives one by one. */
int catalog_encode_entries(const struct catalog_header *h, const struct catalog_key *key,
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
                catalog_retry_later(c, error, "cannot write the list of snapshots");
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
                catalog_wake_waiters(c);
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
                catalog_retry_later(c, r, "cannot write the list of snapshots");
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
                catalog_retry_later(c, error, "cannot write a snapshot");
                return;
        }
        put_index(p);
}

/* On a thread: up to 4 MiB of JSON. The writer is busy meanwhile: the
 * loop leaves c->index alone. */
static void index_read_work(void *userdata, const char *data, size_t len) {
        struct catalog *c = userdata;
        c->index = catalog_parse_json(data, len);
}

static void on_index_read(void *userdata, int error) {
        struct catalog *c = userdata;
        if (!catalog_request_ended(c))
                return;
        if (error < 0 && error != -ENOENT) {
                catalog_retry_later(c, error, "cannot read the list of snapshots");
                return;
        }
        json_object *o = TAKE_PTR(c->index);
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

/* A snapshot's walk and encoding, on a thread of its own (offthread.h):
 * 100,000 files take seconds, and readers are answered meanwhile. It
 * reads through the subvolume's fd only. */
struct snapshot_walk {
        struct catalog *c; /* not touched by the thread */
        int subvol_fd;     /* the tenant's, kept by the thread (catalog_walk) */
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

        w->error = catalog_walk(w->subvol_fd, "", &l);
        w->h.entries = l.n;
        w->failed = l.failed;
        struct array_cursor cur = { .e = l.e };
        if (w->error == 0)
                w->error = catalog_encode_entries(&w->h, &w->key, array_next, &cur, &w->data, &w->len);
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
                catalog_retry_later(c, r, "cannot make a snapshot");
                return;
        }
        if (!(p = calloc(1, sizeof(*p)))) {
                catalog_retry_later(c, -ENOMEM, "cannot make a snapshot");
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
                catalog_retry_later(c, r, "cannot write a snapshot");
        }
}

void catalog_write_snapshot(struct catalog *c) {
        struct snapshot_walk *w;
        char key[STUB_KEY_MAX];

        if (!c->index) { /* this epoch's, read once: each snapshot adds to it */
                catalog_index_key(c->epoch, key);
                c->busy = true;
                int r = store_get_worked(c->tn, key, CATALOG_INDEX_MAX, index_read_work, on_index_read, c);
                catalog_request_started(c, r, "cannot read the list of snapshots");
                return;
        }
        if (!(w = calloc(1, sizeof(*w)))) {
                catalog_retry_later(c, -ENOMEM, "cannot make a snapshot");
                return;
        }
        /* As of the last journal object: what is archived meanwhile is in
         * the journal after it too. */
        *w = (struct snapshot_walk){ .c = c, .subvol_fd = c->tn->subvol_fd, .dropped_gen = c->dropped_gen, .key = c->tn->catalog_key,
                                     .h = { .kind = CATALOG_SNAPSHOT, .epoch = c->epoch, .seq = c->next_seq - 1,
                                            .time_usec = catalog_realtime_usec() } };
        c->busy = true; /* the walk is the writer's request in flight */
        int r = offthread_start(c->tn->t->event, &c->tn->subvol_fd, 1, snapshot_walk_run, on_snapshot_walked, w, NULL);
        if (r < 0) {
                free(w);
                catalog_request_started(c, r, "cannot make a snapshot");
        }
}

