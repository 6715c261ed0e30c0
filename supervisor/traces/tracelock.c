/* SPDX-License-Identifier: MIT */
#include "tracelock.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "storeio.h"
#include "traceformat.h"
#include "utf8.h"

#define LOCK_TEXT_MAX 512

struct trace_lock {
        struct tenant *tn;
        char name[TRACE_NAME_MAX + 1];
        char key[TRACE_NAME_MAX + 16];
        char text[LOCK_TEXT_MAX]; /* as this node last wrote it */
        size_t len;
        char seen[LOCK_TEXT_MAX]; /* another's, as last read, and since when */
        size_t seen_len;
        uint64_t seen_since_usec;
        uint64_t give_up_usec; /* monotonic */
        trace_lock_done_t done;
        void *userdata;
        sd_event_source *retry;
        bool held, said_waiting, breaking_by_sight;
};

static int64_t now_sec(void) { return (int64_t)time(NULL); }

/* How long a lock read unchanged is its dead holder's, whatever it says. */
static uint64_t stale_usec(void) {
#ifdef TIERD_TEST_HOOKS
        const char *s = getenv("TIERD_TEST_TRACE_LOCK_STALE_SEC");
        if (s)
                return strtoull(s, NULL, 10) * 1000000ull;
#endif
        return TRACE_LOCK_STALE_SEC * 1000000ull;
}

static void lock_free(struct trace_lock *l) {
        sd_event_source_disable_unref(l->retry);
        free(l);
}

static int try_take(struct trace_lock *l);

static void finish(struct trace_lock *l, int error) { l->done(l->userdata, error); }

/* The wait is over: -ECANCELED (tierd stops), or -ETIMEDOUT; else 0. */
static int given_up(const struct trace_lock *l) {
        return l->tn->t->stopping ? -ECANCELED : tierd_now_usec(l->tn->t) >= l->give_up_usec ? -ETIMEDOUT : 0;
}

/* Another try now, unless the wait is over (a lock that comes and goes
 * as fast as the store answers must not keep this node going). */
static void take_again(struct trace_lock *l) {
        int r = given_up(l);
        if (r == 0)
                r = try_take(l);
        if (r < 0)
                finish(l, r);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        struct trace_lock *l = userdata;
        (void)s;
        (void)usec;
        l->retry = sd_event_source_disable_unref(l->retry);
        take_again(l);
        return 0;
}

/* Another node holds it: polled again in about a second (jittered, so
 * that nodes that found it together do not come back together). */
static void wait_for_it(struct trace_lock *l, const char *holder) {
        struct timespec ts;
        int r;

        if ((r = given_up(l)) < 0) {
                finish(l, r);
                return;
        }
        if (!l->said_waiting)
                log_info("tenant %s: trace %s: waits for another save of it to end (%s)", l->tn->cfg->name, l->name,
                         holder);
        l->said_waiting = true;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t delay = 700 * 1000 + (uint64_t)(ts.tv_nsec / 1000) % (600 * 1000);
        if ((r = sd_event_add_time_relative(l->tn->t->event, &l->retry, CLOCK_MONOTONIC, delay, 10 * 1000, on_retry,
                                            l)) < 0)
                finish(l, r);
}

static void on_broken(void *userdata, int error) {
        struct trace_lock *l = userdata;

        if (error == 0) {
                if (l->breaking_by_sight)
                        log_warning("tenant %s: trace %s: a lock read unchanged for %llu s deleted (its node stopped "
                                    "saving)", l->tn->cfg->name, l->name,
                                    (unsigned long long)(stale_usec() / 1000000));
                else
                        log_warning("tenant %s: trace %s: a lock older than %d s deleted (its node stopped saving)",
                                    l->tn->cfg->name, l->name, TRACE_LOCK_STALE_SEC);
                take_again(l);
        } else if (error == -EBUSY || !l->breaking_by_sight)
                /* Written again since it was read (a live holder's), or a
                 * store that does not say ages: the lock is watched. */
                wait_for_it(l, error == -EBUSY ? "a lock taken again" : "a lock the store gives no age of");
        else
                finish(l, error);
}

/* Deletes the lock read (len bytes): by_sight, if it is still of that
 * size; else only if the store has not seen it written for
 * TRACE_LOCK_STALE_SEC either (store_delete_if_old). */
static void break_lock(struct trace_lock *l, size_t len, bool by_sight) {
        int64_t before = by_sight ? INT64_MAX : now_sec() - TRACE_LOCK_STALE_SEC;
        int r;

        l->breaking_by_sight = by_sight;
        if ((r = store_delete_if_old(l->tn, l->key, len, before, on_broken, l)) < 0)
                finish(l, r);
}

/* Who holds it and since when, as it says: bytes any node with the
 * store's credentials writes, read only as far as two fields, escaped. */
static char *holder_of(const char *data, size_t len, long long *taken) {
        char text[LOCK_TEXT_MAX], who[160];

        snprintf(text, sizeof(text), "%.*s", (int)MIN(len, sizeof(text) - 1), data);
        const char *node = strstr(text, "\nnode="), *at = strstr(text, "\ntaken=");
        *taken = at ? strtoll(at + 7, NULL, 10) : 0;
        snprintf(who, sizeof(who), "node %.*s since %lld", node ? (int)MIN(strcspn(node + 6, "\n"), 100u) : 1,
                 node ? node + 6 : "?", *taken);
        return utf8_escape(who);
}

/* The lock found there. Stale when it says it is over TRACE_LOCK_STALE_SEC
 * old (and the store agrees), or when this node has read it unchanged for
 * that long by its own clock, whatever it says (clocks apart, a store that
 * gives no ages, a time in the future). */
static void on_got(void *userdata, int error, const char *data, size_t len) {
        struct trace_lock *l = userdata;
        uint64_t now = tierd_now_usec(l->tn->t);
        long long taken = 0;

        if (error == -ENOENT) { /* let go meanwhile */
                take_again(l);
                return;
        }
        if (error < 0) {
                finish(l, error);
                return;
        }
        if (len == l->len && memcmp(data, l->text, len) == 0) {
                /* This node's own: a PUT sent again after its worker died. */
                l->held = true;
                finish(l, 0);
                return;
        }
        if (len != l->seen_len || memcmp(data, l->seen, len) != 0) {
                memcpy(l->seen, data, len); /* len <= LOCK_TEXT_MAX: store_get's max */
                l->seen_len = len;
                l->seen_since_usec = now;
        }
        _cleanup_free_ char *who = holder_of(data, len, &taken);
        if (now - l->seen_since_usec >= stale_usec())
                break_lock(l, len, true);
        else if (taken > 0 && taken < now_sec() - TRACE_LOCK_STALE_SEC)
                break_lock(l, len, false);
        else
                wait_for_it(l, who ?: "?");
}

static void on_put(void *userdata, int error) {
        struct trace_lock *l = userdata;
        int r = error;

        if (r == 0)
                l->held = true;
        else if (r == -EOPNOTSUPP) {
                log_info("tenant %s: trace %s: the store cannot create an object only if absent: saved without "
                         "a lock (two nodes saving it at once may lose one run)", l->tn->cfg->name, l->name);
                r = 0;
        } else if (r == -EEXIST) {
                if ((r = store_get(l->tn, l->key, LOCK_TEXT_MAX, on_got, l)) >= 0)
                        return;
        }
        finish(l, r);
}

static int try_take(struct trace_lock *l) {
        char host[128] = "?";
        uint64_t nonce = 0;

        (void)gethostname(host, sizeof(host) - 1);
        (void)getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK);
        int n = snprintf(l->text, sizeof(l->text), "tierd trace lock\nnode=%s\npid=%d\ntaken=%lld\nnonce=%016llx\n",
                         host, (int)getpid(), (long long)now_sec(), (unsigned long long)nonce);
        l->len = MIN((size_t)n, sizeof(l->text) - 1);
        return store_put(l->tn, l->key, l->text, l->len, true, on_put, l);
}

int trace_lock_take(struct tenant *tn, const char *name, trace_lock_done_t done, void *userdata,
                    struct trace_lock **ret) {
        struct trace_lock *l = calloc(1, sizeof(*l));
        int r;

        if (!l)
                return -ENOMEM;
        *l = (struct trace_lock){ .tn = tn, .done = done, .userdata = userdata,
                                  .give_up_usec = tierd_now_usec(tn->t) + TRACE_LOCK_WAIT_SEC * 1000000ull };
        snprintf(l->name, sizeof(l->name), "%s", name);
        int n = snprintf(l->key, sizeof(l->key), "tracelock/%s", name);
        if (!trace_name_valid(name) || n < 0 || (size_t)n >= sizeof(l->key))
                r = -EINVAL;
        else
                r = try_take(l);
        if (r < 0) {
                lock_free(l);
                return r;
        }
        *ret = l;
        return 0;
}

bool trace_lock_waiting(const struct trace_lock *l) { return l->retry != NULL; }

static void on_unlocked(void *userdata, int error) {
        struct trace_lock *l = userdata;

        if (error < 0)
                log_error_errno(error, "tenant %s: trace %s: cannot delete its lock (another node deletes it "
                                "after %d s): %m", l->tn->cfg->name, l->name, TRACE_LOCK_STALE_SEC);
        lock_free(l);
}

/* Deleted only if it is still this node's: a save that took longer than
 * TRACE_LOCK_STALE_SEC may have seen its lock broken and taken again. */
static void on_own_got(void *userdata, int error, const char *data, size_t len) {
        struct trace_lock *l = userdata;
        int r = error;

        if (r == 0 && (len != l->len || memcmp(data, l->text, len) != 0)) {
                log_warning("tenant %s: trace %s: its lock was taken over during the save (it took over %d s)",
                            l->tn->cfg->name, l->name, TRACE_LOCK_STALE_SEC);
                r = -ENOENT;
        }
        if (r == 0 && (r = store_delete_if_old(l->tn, l->key, l->len, INT64_MAX, on_unlocked, l)) >= 0)
                return;
        if (r < 0 && r != -ENOENT)
                on_unlocked(l, r);
        else
                lock_free(l);
}

void trace_lock_release(struct trace_lock *l) {
        if (!l)
                return;
        l->retry = sd_event_source_disable_unref(l->retry);
        if (l->held && store_get(l->tn, l->key, LOCK_TEXT_MAX, on_own_got, l) >= 0)
                return;
        lock_free(l);
}
