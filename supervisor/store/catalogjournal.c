/* SPDX-License-Identifier: MIT */
/*
 * The catalog writer's journal objects: the changes queued since the last
 * one, put at most once a second, each between two checks that no newer
 * writer took the lease (a fenced writer's object is one readers ignore).
 */

#include "catalog-internal.h"

#include <errno.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "storeio.h"

#define JOURNAL_ENTRIES_MAX 10000                  /* per journal object: well under what a reader takes */
#define SNAPSHOT_EVERY_JOURNALS 1000
#define SNAPSHOT_EVERY_USEC (3600 * 1000 * 1000ull)

static void journal_done(struct catalog *c) {
        catalog_pending_free_list(c->sending);
        c->sending = NULL;
        c->sending_data = mfree(c->sending_data);
        catalog_seq_hint_save(c->tn, c->next_seq);
        c->next_seq++;
        c->journals_since_snapshot++;
        c->backoff_usec = 0;
        c->last_put_usec = tierd_now_usec(c->tn->t);
        if (c->journals_since_snapshot >= SNAPSHOT_EVERY_JOURNALS ||
            c->last_put_usec - c->snapshot_usec >= SNAPSHOT_EVERY_USEC)
                c->snapshot_due = true;
        catalog_wake_waiters(c);
}

/* Is there a newer lease than ours? then() hears the store's answer. */
static void check_fence(struct catalog *c, store_got_t then) {
        char key[STUB_KEY_MAX];
        catalog_epoch_key(c->epoch + 1, key);
        c->busy = true;
        catalog_request_started(c, store_head(c->tn, key, then, c), "cannot check the lease");
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
                catalog_retry_later(c, error, "cannot check the lease");
                return; /* checked again next time: the object is written, its entries pending */
        }
        journal_done(c);
        catalog_writer_continue(c);
}

void catalog_check_fence_after_put(struct catalog *c) { check_fence(c, on_fence_checked_after); }

/* On a thread (store_get_worked): whose the journal object at our number
 * is. It may be 64 MiB another node (or whoever writes the store) wrote,
 * decrypted whole to be read. The loop leaves what this reads alone: the
 * writer is busy. */
static void read_back_work(void *userdata, const char *data, size_t len) {
        struct catalog *c = userdata;
        struct catalog_header h = {};
        const char *why;

        if (len == c->sending_len && memcmp(data, c->sending_data, len) == 0)
                c->read_back = CATALOG_READ_BACK_OURS;
        else if (catalog_decode(data, len, &c->read_back_key, &h, NULL, NULL, &why) == 0 && h.epoch > c->epoch)
                c->read_back = CATALOG_READ_BACK_NEWER;
        else
                c->read_back = CATALOG_READ_BACK_OTHER;
}

static void on_journal_read_back(void *userdata, int error) {
        struct catalog *c = userdata;

        if (!catalog_request_ended(c))
                return;
        if (error == 0 && c->read_back == CATALOG_READ_BACK_OURS) {
                catalog_check_fence_after_put(c); /* ours: written before a worker died */
                return;
        }
        if (error == 0 && c->read_back == CATALOG_READ_BACK_NEWER) {
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
                catalog_retry_later(c, error, "cannot read a journal object back");
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
                c->read_back_key = c->tn->catalog_key;
                int r = store_get_worked(c->tn, key, CATALOG_JOURNAL_MAX, read_back_work, on_journal_read_back, c);
                if (r < 0) {
                        c->busy = false;
                        journal_requeue(c);
                        catalog_retry_later(c, r, "cannot read a journal object back");
                }
                return;
        }
        if (error < 0) {
                journal_requeue(c);
                catalog_retry_later(c, error, "cannot write a journal object");
                return;
        }
        catalog_check_fence_after_put(c);
}

static const struct catalog_entry *pending_next(void *ctx) {
        struct catalog_pending **p = ctx;
        const struct catalog_entry *e = &(*p)->e;
        *p = (*p)->next;
        return e;
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
                                    .time_usec = catalog_realtime_usec(), .entries = n };
        struct catalog_pending *cur = c->sending;
        r = catalog_encode_entries(&h, &c->tn->catalog_key, pending_next, &cur, &c->sending_data, &c->sending_len);
        catalog_journal_key(c->next_seq, key);
        c->busy = true;
        if (r == 0)
                r = store_put(c->tn, key, c->sending_data, c->sending_len, true, on_journal_put, c);
        if (r < 0) {
                c->busy = false;
                journal_requeue(c);
                catalog_retry_later(c, r, "cannot write a journal object");
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
                catalog_retry_later(c, error, "cannot check the lease");
                return;
        }
        put_journal(c);
}

/* Before each journal object. */
void catalog_check_fence_then_put(struct catalog *c) { check_fence(c, on_fence_checked); }

