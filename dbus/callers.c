/* SPDX-License-Identifier: MIT */
/*
 * Who is asking, from the bus's own record of the caller
 * (GetConnectionCredentials: the uid the bus saw when the caller
 * connected, and its groups where the bus says them), never /proc: a process may
 * exit and its pid be reused between its call and our look.
 *
 * Asked without waiting. The loop that would wait for the bus daemon's
 * answer also answers every tenant's readers, and that answer queues
 * behind whatever any local user sends the daemon (a call of 10 MB takes
 * it tens of milliseconds). So the question is sent, the method is put
 * aside (its handler returns 1, having done nothing), and when the answer
 * is in the method is dispatched again (sd_bus_enqueue_for_read, as
 * systemd's polkit checks do) and its handler runs anew, finding it.
 *
 * A connection's unique name is never reused while the bus runs, and
 * what the bus recorded for it never changes: the answer is kept for the
 * connection's life, for the last CALLERS_MAX connections heard from.
 * A caller's calls wait for one answer, asked once; how many may wait,
 * and how long, is below (WAITING_*).
 */
#include "callers.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "log.h"
#include "macro.h"
#include "pathbus.h"

#define CALLERS_MAX 256
#define ASK_TIMEOUT_USEC (20 * 1000000ULL)
/* Calls put aside. Each holds its message (its fds, up to the bus's
 * 32 MiB): a few a connection while the bus is asked who it is, a few a
 * uid while the user database is, never more than 20 s (the client's own
 * timeout is 25 s: it is told TryAgain first). The user database's
 * waiters have a share of their own, so no uid's can crowd out the calls
 * not identified yet (root's among them). */
#define WAITING_MAX 512
#define WAITING_LOOKUP_MAX 128
#define WAITING_PER_CALLER 8
#define WAIT_MAX_USEC (20 * 1000000ULL)

_Static_assert(sizeof(gid_t) == sizeof(uint32_t), "the bus's group ids are u");

struct caller {
        char *name;          /* its unique name; NULL: a free slot */
        sd_bus_slot *asking; /* the question in flight */
        int error;           /* < 0: the bus did not say (kept until error_until) */
        uint64_t error_until; /* 0: for the connection's life (it is gone) */
        struct caller_creds creds;
        uint64_t used;       /* the least recently used goes first */
};

struct waiter {
        sd_bus_message *m;
        uint64_t since;
        bool lookup; /* waits for the user database about uid, not for the bus */
        uid_t uid;
};

static struct caller callers[CALLERS_MAX];
static uint64_t use_clock;
static struct waiter waiting[WAITING_MAX];
static size_t n_waiting;
static sd_event_source *expiry_src; /* while calls wait */
/* When each call dispatched again was first put aside: its 20 s count
 * from then, however many times it waits (for the bus, then the user
 * database). By the message and its cookie; the oldest overwritten. */
static struct {
        const sd_bus_message *m;
        uint64_t cookie, since;
} first_aside[WAITING_MAX];
static size_t first_next;

static void caller_forget(struct caller *c) {
        sd_bus_slot_unref(c->asking);
        free(c->name);
        free(c->creds.groups);
        *c = (struct caller){ 0 };
}

static struct caller *caller_find(const char *name) {
        for (size_t i = 0; i < CALLERS_MAX; i++)
                if (callers[i].name && strcmp(callers[i].name, name) == 0)
                        return &callers[i];
        return NULL;
}

/* A free slot, or the least recently used that is not being asked
 * about; NULL if all are. */
static struct caller *caller_slot(void) {
        struct caller *best = NULL;
        for (size_t i = 0; i < CALLERS_MAX; i++) {
                struct caller *c = &callers[i];
                if (!c->name)
                        return c;
                if (!c->asking && (!best || c->used < best->used))
                        best = c;
        }
        if (best)
                caller_forget(best);
        return best;
}

static int read_groups(sd_bus_message *reply, struct caller_creds *cr) {
        const void *p = NULL;
        size_t size = 0;
        int r = sd_bus_message_enter_container(reply, 'v', "au");
        if (r >= 0)
                r = sd_bus_message_read_array(reply, 'u', &p, &size);
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return r;
        free(cr->groups);
        cr->n_groups = size / sizeof(uint32_t);
        if (!(cr->groups = calloc(cr->n_groups ?: 1, sizeof(gid_t))))
                return -ENOMEM;
        if (size)
                memcpy(cr->groups, p, cr->n_groups * sizeof(gid_t));
        cr->have_groups = true;
        return 0;
}

/* GetConnectionCredentials' a{sv}: UnixUserID (required), UnixGroupIDs. */
static int read_creds(sd_bus_message *reply, struct caller_creds *cr) {
        bool have_uid = false;
        int r = sd_bus_message_enter_container(reply, 'a', "{sv}");

        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key;
                uint32_t uid;
                if ((r = sd_bus_message_read(reply, "s", &key)) < 0)
                        break;
                if (strcmp(key, "UnixUserID") == 0) {
                        if ((r = sd_bus_message_read(reply, "v", "u", &uid)) >= 0) {
                                cr->uid = (uid_t)uid;
                                have_uid = true;
                        }
                } else if (strcmp(key, "UnixGroupIDs") == 0)
                        r = read_groups(reply, cr);
                else
                        r = sd_bus_message_skip(reply, "v");
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0 && !have_uid)
                r = -ENODATA;
#ifdef TIERD_TEST_HOOKS
        /* Test builds: a bus that does not say the groups (as one without
         * SO_PEERGROUPS), for the user database to be asked. */
        if (getenv("TIERD_TEST_BUS_NO_GROUPS"))
                cr->have_groups = false;
#endif
        return r < 0 ? r : 0;
}

/* Dispatches m again: its handler runs anew, from its first argument. */
static void redispatch(sd_bus_message *m) {
        int r = sd_bus_message_rewind(m, true);
        if (r >= 0)
                r = sd_bus_enqueue_for_read(sd_bus_message_get_bus(m), m);
        if (r < 0) {
                log_warning_errno(r, "cannot dispatch a call put aside again: %m");
                (void)sd_bus_reply_method_errnof(m, r, "cannot dispatch the call again: %m");
        }
}

/* Every method put aside by sender (all if NULL) is dispatched again. */
static void wake(const char *sender) {
        size_t kept = 0;
        for (size_t i = 0; i < n_waiting; i++) {
                sd_bus_message *m = waiting[i].m;
                const char *s = sd_bus_message_get_sender(m);
                if (sender && (!s || strcmp(s, sender) != 0)) {
                        waiting[kept++] = waiting[i];
                        continue;
                }
                uint64_t cookie = 0;
                (void)sd_bus_message_get_cookie(m, &cookie);
                first_aside[first_next].m = m;
                first_aside[first_next].cookie = cookie;
                first_aside[first_next].since = waiting[i].since;
                first_next = (first_next + 1) % WAITING_MAX;
                redispatch(m);
                sd_bus_message_unref(m);
        }
        n_waiting = kept;
}

static uint64_t aside_since(sd_bus_message *m, uint64_t now) {
        uint64_t cookie = 0;
        (void)sd_bus_message_get_cookie(m, &cookie);
        for (size_t i = 0; i < WAITING_MAX; i++)
                if (first_aside[i].m == m && first_aside[i].cookie == cookie) {
                        first_aside[i].m = NULL; /* taken: it waits again */
                        return first_aside[i].since;
                }
        return now;
}

void callers_wake_all(void) {
        wake(NULL);
}

static uint64_t now_usec(sd_bus_message *m) {
        uint64_t now = 0;
        (void)sd_event_now(sd_bus_get_event(sd_bus_message_get_bus(m)), CLOCK_MONOTONIC, &now);
        return now;
}

/* Calls waiting 20 s: told TryAgain (the client would give up soon). */
static int on_expiry(sd_event_source *s, uint64_t usec, void *userdata) {
        uint64_t now = usec;
        size_t kept = 0;
        (void)userdata;
        (void)sd_event_now(sd_event_source_get_event(s), CLOCK_MONOTONIC, &now); /* not when it was due */
        for (size_t i = 0; i < n_waiting; i++) {
                if (now < waiting[i].since + WAIT_MAX_USEC) {
                        waiting[kept++] = waiting[i];
                        continue;
                }
                (void)sd_bus_reply_method_errorf(waiting[i].m, ERROR_TRY_AGAIN, "%s did not say who the caller is "
                                                 "within 20 s: try again", waiting[i].lookup ? "the user database" : "the bus");
                sd_bus_message_unref(waiting[i].m);
        }
        n_waiting = kept;
        if (n_waiting)
                (void)sd_event_source_set_time(s, now + 1000000);
        (void)sd_event_source_set_enabled(s, n_waiting ? SD_EVENT_ONESHOT : SD_EVENT_OFF);
        return 0;
}

static int expiry_arm(sd_bus_message *m, uint64_t now) {
        sd_event *e = sd_bus_get_event(sd_bus_message_get_bus(m));
        int r = 0;
        if (!expiry_src)
                r = sd_event_add_time(e, &expiry_src, CLOCK_MONOTONIC, now + 1000000, 0, on_expiry, NULL);
        else if (sd_event_source_get_enabled(expiry_src, NULL) == 0)
                r = sd_event_source_set_time(expiry_src, now + 1000000);
        return r < 0 ? r : sd_event_source_set_enabled(expiry_src, SD_EVENT_ONESHOT);
}

/* 1, or < 0 with error set: too many wait, of this caller's or all. */
static int wait_aside(sd_bus_message *m, const uid_t *uid, sd_bus_error *error) {
        const char *sender = sd_bus_message_get_sender(m);
        size_t mine = 0, lookups = 0;
        uint64_t now = now_usec(m);

        for (size_t i = 0; i < n_waiting; i++) {
                const char *s = sd_bus_message_get_sender(waiting[i].m);
                lookups += waiting[i].lookup;
                mine += uid ? waiting[i].lookup && waiting[i].uid == *uid
                            : !waiting[i].lookup && s && sender && strcmp(s, sender) == 0;
        }
        if (mine >= WAITING_PER_CALLER || n_waiting >= WAITING_MAX || (uid && lookups >= WAITING_LOOKUP_MAX))
                return sd_bus_error_setf(error, ERROR_TRY_AGAIN, "%zu calls of %s wait to be identified already: try "
                                         "again", mine >= WAITING_PER_CALLER ? mine : n_waiting,
                                         mine >= WAITING_PER_CALLER ? "yours" : "all callers");
        if (expiry_arm(m, now) < 0)
                return sd_bus_error_set_errnof(error, ENOMEM, "cannot put the call aside: %m");
        waiting[n_waiting++] = (struct waiter){ .m = sd_bus_message_ref(m), .since = aside_since(m, now), .lookup = uid != NULL,
                                                .uid = uid ? *uid : 0 };
        return 1;
}

int callers_wait(sd_bus_message *m, uid_t uid, sd_bus_error *error) {
        return wait_aside(m, &uid, error);
}

static int on_answer(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        struct caller *c = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        (void)ret_error;

        c->asking = sd_bus_slot_unref(c->asking);
        c->error = e ? -(sd_bus_error_get_errno(e) ?: EIO) : read_creds(reply, &c->creds);
        /* Gone: for good. Else (a timeout, a bus too busy): asked again
         * after a second, for the calls to come. */
        if (c->error < 0 && !sd_bus_error_has_name(e, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                c->error_until = now_usec(reply) + 1000000;
        if (c->error < 0)
                log_debug("the bus does not say who %s is: %s", c->name, strerror(-c->error));
        wake(c->name);
        return 0;
}

static int ask(sd_bus *bus, struct caller *c, const char *sender) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *q = NULL;
        int r = -ENOMEM;

        if ((c->name = strdup(sender)))
                r = sd_bus_message_new_method_call(bus, &q, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                   "org.freedesktop.DBus", "GetConnectionCredentials");
        if (r >= 0)
                r = sd_bus_message_append(q, "s", sender);
        if (r >= 0)
                r = sd_bus_call_async(bus, &c->asking, q, on_answer, c, ASK_TIMEOUT_USEC);
        if (r < 0)
                caller_forget(c);
        return r;
}

int callers_lookup(sd_bus_message *m, const struct caller_creds **ret, sd_bus_error *error) {
        const char *sender = sd_bus_message_get_sender(m);
        struct caller *c;
        int r;

        if (!sender)
                return sd_bus_error_set_errnof(error, ENXIO, "cannot identify the caller: the call has no sender");
        if ((c = caller_find(sender)) && c->error_until && now_usec(m) >= c->error_until)
                caller_forget(c), c = NULL;
        if (!c) {
                if (!(c = caller_slot()))
                        return sd_bus_error_set(error, ERROR_TRY_AGAIN,
                                                "too many callers are being identified at once: try again");
                if ((r = ask(sd_bus_message_get_bus(m), c, sender)) < 0)
                        return sd_bus_error_set_errnof(error, -r, "cannot ask the bus who the caller is: %m");
        }
        c->used = ++use_clock;
        if (c->asking)
                return wait_aside(m, NULL, error);
        if (c->error < 0)
                return sd_bus_error_set_errnof(error, -c->error, "cannot identify the caller: %m");
        *ret = &c->creds;
        return 0;
}

void callers_close(void) {
        for (size_t i = 0; i < n_waiting; i++) {
                (void)sd_bus_reply_method_errorf(waiting[i].m, ERROR_SHUTTING_DOWN, "tierd is stopping");
                sd_bus_message_unref(waiting[i].m);
        }
        n_waiting = 0;
        expiry_src = sd_event_source_disable_unref(expiry_src);
        memset(first_aside, 0, sizeof(first_aside));
        for (size_t i = 0; i < CALLERS_MAX; i++)
                caller_forget(&callers[i]);
        use_clock = 0;
}
