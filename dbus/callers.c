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
 * At most WAITING_MAX methods are put aside at once (then TryAgain): a
 * caller's calls wait for one answer, asked once.
 */
#include "callers.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "pathbus.h"

#define CALLERS_MAX 256
#define WAITING_MAX 256
#define ASK_TIMEOUT_USEC (25 * 1000000ULL)

_Static_assert(sizeof(gid_t) == sizeof(uint32_t), "the bus's group ids are u");

struct caller {
        char *name;          /* its unique name; NULL: a free slot */
        sd_bus_slot *asking; /* the question in flight */
        int error;           /* < 0: the bus did not say (the caller left) */
        struct caller_creds creds;
        uint64_t used;       /* the least recently used goes first */
};

static struct caller callers[CALLERS_MAX];
static uint64_t use_clock;
static sd_bus_message *waiting[WAITING_MAX];
static size_t n_waiting;

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
                sd_bus_message *m = waiting[i];
                const char *s = sd_bus_message_get_sender(m);
                if (sender && (!s || strcmp(s, sender) != 0)) {
                        waiting[kept++] = m;
                        continue;
                }
                redispatch(m);
                sd_bus_message_unref(m);
        }
        n_waiting = kept;
}

void callers_wake_all(void) {
        wake(NULL);
}

int callers_wait(sd_bus_message *m, sd_bus_error *error) {
        if (n_waiting >= WAITING_MAX)
                return sd_bus_error_set(error, ERROR_TRY_AGAIN,
                                        "too many calls wait for their callers to be identified: try again");
        waiting[n_waiting++] = sd_bus_message_ref(m);
        return 1;
}

static int on_answer(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        struct caller *c = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        (void)ret_error;

        c->asking = sd_bus_slot_unref(c->asking);
        c->error = e ? -(sd_bus_error_get_errno(e) ?: EIO) : read_creds(reply, &c->creds);
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
        if (!(c = caller_find(sender))) {
                if (!(c = caller_slot()))
                        return sd_bus_error_set(error, ERROR_TRY_AGAIN,
                                                "too many callers are being identified at once: try again");
                if ((r = ask(sd_bus_message_get_bus(m), c, sender)) < 0)
                        return sd_bus_error_set_errnof(error, -r, "cannot ask the bus who the caller is: %m");
        }
        c->used = ++use_clock;
        if (c->asking)
                return callers_wait(m, error);
        if (c->error < 0)
                return sd_bus_error_set_errnof(error, -c->error, "cannot identify the caller: %m");
        *ret = &c->creds;
        return 0;
}

void callers_close(void) {
        for (size_t i = 0; i < n_waiting; i++) {
                (void)sd_bus_reply_method_errorf(waiting[i], ERROR_SHUTTING_DOWN, "tierd is stopping");
                sd_bus_message_unref(waiting[i]);
        }
        n_waiting = 0;
        for (size_t i = 0; i < CALLERS_MAX; i++)
                caller_forget(&callers[i]);
        use_clock = 0;
}
