/* SPDX-License-Identifier: MIT */
/*
 * After a lost notification (a queue overflow, a written file under someone
 * else's lease) tierd cannot trust a stub's "archived": a release must see
 * that the bytes are the archived ones. Hashing a whole file takes seconds
 * per GiB, so never on the event loop: a check hashes the file on a thread,
 * one file per tenant at a time (one tenant's releases delay only its own),
 * and remembers the answer with the file's size, mtime and ctime as they
 * were, under the release's write lease, before the hash began. A later
 * release, under its own lease, trusts the answer only if all three are
 * still the same: every write moves ctime, and nobody can set ctime back.
 */
#include "contentcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"

#define CHECKS_QUEUED_MAX 64
#define CHECKS_KNOWN_MAX 64

struct check_key {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime, ctime;
        uint8_t sha256[32];
};

struct check_waiter {
        struct check_waiter *next;
        void (*callback)(void *userdata);
        void (*drop)(void *userdata); /* a check dropped: userdata freed (may be NULL) */
        void *userdata;
};

struct check {
        struct check *next;
        struct contentchecks *owner; /* NULL once abandoned */
        struct check_key key;
        const char *why; /* for the log: why the bytes are checked */
        int fd; /* the loop's copy; the thread has its own */
        int error;
        bool same, coarse;
        struct check_waiter *waiters;
};

struct contentchecks {
        struct tenant *tn;
        struct check *queue;         /* in order: the head may run */
        struct check *queue_running; /* the head, while its thread runs */
        struct offthread *thread;
        size_t n_queued;
        struct {
                struct check_key key;
                bool same;
        } known[CHECKS_KNOWN_MAX];
        size_t n_known, next_known;
};

static void key_of(struct check_key *k, const struct stat *st, const struct stub *s) {
        *k = (struct check_key){ .dev = st->st_dev, .ino = st->st_ino, .size = st->st_size, .mtime = st->st_mtim,
                                 .ctime = st->st_ctim };
        if (s)
                memcpy(k->sha256, s->sha256, sizeof(k->sha256));
}

static bool same_time(const struct timespec *a, const struct timespec *b) {
        return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

static bool same_state(const struct check_key *a, const struct check_key *b) {
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size && same_time(&a->mtime, &b->mtime) &&
               same_time(&a->ctime, &b->ctime);
}

static bool same_key(const struct check_key *a, const struct check_key *b) {
        return same_state(a, b) && memcmp(a->sha256, b->sha256, sizeof(a->sha256)) == 0;
}

bool content_stat_same(const struct stat *was, const struct stat *now) {
        struct check_key a, b;
        key_of(&a, was, NULL);
        key_of(&b, now, NULL);
        return same_state(&a, &b);
}

static struct contentchecks *checks_of(struct tenant *tn) {
        if (!tn->contentchecks && (tn->contentchecks = calloc(1, sizeof(*tn->contentchecks))))
                tn->contentchecks->tn = tn;
        return tn->contentchecks;
}

int content_known(struct tenant *tn, const struct stat *st, const struct stub *s) {
        struct contentchecks *c = tn->contentchecks;
        struct check_key k;

        key_of(&k, st, s);
        for (size_t i = 0; c && i < c->n_known; i++)
                if (same_key(&c->known[i].key, &k))
                        return c->known[i].same;
        return -ENOENT;
}

static void check_free(struct check *ch) {
        for (struct check_waiter *w; (w = ch->waiters);) {
                ch->waiters = w->next;
                if (w->drop)
                        w->drop(w->userdata);
                free(w);
        }
        safe_close(ch->fd);
        free(ch);
}

static void hash_run(void *userdata) {
        struct check *ch = userdata;
        struct check_key now;
        uint8_t got[32];
        struct stat st;

#ifdef TIERD_TEST_HOOKS
        /* Test builds: a check that starts late, for a write to land between
         * its queueing and its hash. */
        const char *pause = getenv("TIERD_TEST_CHECK_PAUSE_MS");
        if (pause)
                usleep((useconds_t)atoi(pause) * 1000);
#endif
        ch->error = sha256_fd(ch->fd, (uint64_t)ch->key.size, got);
        ch->same = ch->error == 0 && memcmp(got, ch->key.sha256, sizeof(got)) == 0;
        /* Written while it was read: what was hashed is neither the file as
         * it was nor as it is. Nothing is known. */
        if (ch->error == 0 && (fstat(ch->fd, &st) < 0 || (key_of(&now, &st, NULL), !same_state(&now, &ch->key))))
                ch->error = -ESTALE;
}

static void hash_release(void *userdata) { check_free(userdata); }

static void start_next(struct contentchecks *c);

static void hash_done(void *userdata) {
        struct check *ch = userdata;
        struct contentchecks *c = ch->owner;

        c->queue = ch->next;
        c->n_queued--;
        c->queue_running = NULL;
        c->thread = NULL;
        if (ch->error < 0)
                log_warning("tenant %s: cannot check a file's bytes (%lld) against its SHA-256 %s: %s", c->tn->cfg->name,
                            (long long)ch->key.size, ch->why, strerror(-ch->error));
        else
                log_info("tenant %s: a file's bytes (%lld) checked %s: %s", c->tn->cfg->name, (long long)ch->key.size,
                         ch->why, ch->same ? "the archived bytes" : "not the archived bytes");
        if (ch->error == 0 && !(ch->coarse && ch->same)) {
                c->known[c->next_known].key = ch->key;
                c->known[c->next_known].same = ch->same;
                c->next_known = (c->next_known + 1) % CHECKS_KNOWN_MAX;
                c->n_known = MIN(c->n_known + 1, (size_t)CHECKS_KNOWN_MAX);
        }
        struct check_waiter *w = ch->waiters;
        ch->waiters = NULL;
        check_free(ch);
        start_next(c);
        /* Last: a waiter may start another check. */
        for (struct check_waiter *next; w; w = next) {
                next = w->next;
                w->callback(w->userdata);
                free(w);
        }
}

static void start_next(struct contentchecks *c) {
        while (!c->queue_running && c->queue) {
                struct check *ch = c->queue;
                int r = offthread_start(c->tn->t->event, &ch->fd, 1, hash_run, hash_done, ch, &c->thread);
                if (r >= 0) {
                        log_info("tenant %s: checking a file's bytes (%lld) against its SHA-256 %s", c->tn->cfg->name,
                                 (long long)ch->key.size, ch->why);
                        c->queue_running = ch;
                        return;
                }
                ch->error = r;
                hash_done(ch); /* its waiters learn nothing: they ask again */
        }
}

int content_check(struct tenant *tn, int fd, const struct stat *st, const struct stub *s, const char *why) {
        struct contentchecks *c = checks_of(tn);
        struct check *ch, **at;
        struct check_key k;

        if (!c)
                return -ENOMEM;
        key_of(&k, st, s);
        for (at = &c->queue; *at; at = &(*at)->next)
                if (same_key(&(*at)->key, &k))
                        return 0;
        if (c->n_queued >= CHECKS_QUEUED_MAX)
                return -EBUSY;
        if (!(ch = calloc(1, sizeof(*ch))))
                return -ENOMEM;
        /* Read-only, its own: the release's fd is writable (exec of the
         * file would fail with ETXTBSY while the check holds it). */
        char self[64];
        snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
        *ch = (struct check){ .owner = c, .key = k, .why = why, .fd = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC) };
        /* Whole seconds only (ext4 with 128-byte inodes): a write later in
         * this very second would leave ctime as it is. Checked, but not
         * remembered: the release asks again once the second is past. */
        ch->coarse = st->st_ctim.tv_nsec == 0 && time(NULL) - st->st_ctim.tv_sec < 2;
        if (ch->fd < 0) {
                int r = -errno;
                free(ch);
                return r;
        }
        *at = ch;
        c->n_queued++;
        start_next(c);
        return 0;
}

/* The last check queued for the file behind fd (by inode: once it ends,
 * every earlier one of the file has), or NULL. */
static struct check *last_check_of(struct tenant *tn, int fd) {
        struct check *found = NULL;
        struct stat st;

        if (!tn->contentchecks || fstat(fd, &st) < 0)
                return NULL;
        for (struct check *ch = tn->contentchecks->queue; ch; ch = ch->next)
                if (ch->key.dev == st.st_dev && ch->key.ino == st.st_ino)
                        found = ch;
        return found;
}

bool content_check_queued(struct tenant *tn, int fd) { return last_check_of(tn, fd) != NULL; }

int content_when_checked(struct tenant *tn, int fd, void (*callback)(void *userdata), void (*drop)(void *userdata),
                         void *userdata) {
        struct check *ch = last_check_of(tn, fd);
        struct check_waiter *w;

        if (!ch)
                return -ENOENT;
        if (!(w = calloc(1, sizeof(*w))))
                return -ENOMEM;
        *w = (struct check_waiter){ .next = ch->waiters, .callback = callback, .drop = drop, .userdata = userdata };
        ch->waiters = w;
        return 0;
}

void content_checks_stop(struct tenant *tn) {
        struct contentchecks *c = tn->contentchecks;

        if (!c)
                return;
        for (struct check *ch; (ch = c->queue);) {
                c->queue = ch->next;
                if (ch == c->queue_running)
                        offthread_abandon(c->thread, hash_release); /* freed when its thread ends */
                else
                        check_free(ch);
                c->queue_running = NULL;
        }
        free(c);
        tn->contentchecks = NULL;
}
