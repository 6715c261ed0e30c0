/* SPDX-License-Identifier: MIT */
/*
 * FileStatusFds: the status of files a caller passes open (O_PATH is
 * enough), for anyone: an fd is proof the caller reached the file. The
 * loop checks that each names a tenant's regular file (file_ref_from_fd:
 * cached lookups only). The stubs are read on a thread: a stub's read is
 * a lookup in the filesystem's tree that may wait for the disk, and a
 * caller may pick files whose records left the cache. The thread reads
 * each file through the caller's own fd, found through /proc/self/fd (the
 * loop's fd table: the loop runs on the process's first thread), and the
 * call's message holds those fds open until the answer.
 */
#include "statusbus.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileops.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "callers.h"
#include "pathbus.h"

/* Calls whose stubs are being read: each holds a thread. More wait, in
 * the order they came but a caller with none being read first: one
 * user's many calls (of cold files, slow to read) delay another's by one
 * call at most, never make it try again. Each call waiting holds its fds
 * (up to 253): a few wait, a few a user, then TryAgain. */
#define STATUS_CALLS_MAX 8
#define STATUS_WAITING_MAX 16
#define STATUS_WAITING_PER_UID 4

struct fd_status {
        int fd;    /* the caller's, in the message */
        int error; /* file_ref_from_fd's, then the stub read's: msg says it */
        char *msg;
        const struct tenant *tn; /* its name read when answering: a reload frees the policy's strings */
        struct file_status st;
};

struct status_call {
        sd_bus_message *m;
        struct tierd *t;
        struct fd_status *items;
        size_t n;
        uid_t uid;                /* the caller's */
        struct status_call *next; /* waiting */
};

static struct status_call *running[STATUS_CALLS_MAX];
static struct status_call *waiting; /* oldest first */

static void status_call_free(struct status_call *c) {
        for (size_t i = 0; i < c->n; i++)
                free(c->items[i].msg);
        free(c->items);
        if (c->m && --c->t->status_calls == 0)
                tierd_check_idle(c->t); /* a stop waits for the answers */
        sd_bus_message_unref(c->m);
        free(c);
}

static void status_call_freep(struct status_call **c) {
        if (*c)
                status_call_free(*c);
}

static void item_say(struct fd_status *s, int error, const char *msg) {
        s->error = error;
        s->msg = strdup(msg);
}

/* On the thread: each stub, through the caller's fd. */
static void status_work(void *userdata) {
        struct status_call *c = userdata;

        /* Test builds: stubs slow to read (cold, on a busy disk). */
        offthread_test_pause("TIERD_TEST_STATUS_PAUSE_MS", "a status read");

        for (size_t i = 0; i < c->n; i++) {
                struct fd_status *s = &c->items[i];
                char proc[40], name[32], msg[512];
                if (s->error < 0)
                        continue;
                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", s->fd);
                snprintf(name, sizeof(name), "file #%zu", i);
                _cleanup_close_ int fd = open(proc, O_PATH | O_CLOEXEC);
                int r = fd < 0 ? -errno : file_status_fd(fd, name, &s->st, msg, sizeof(msg));
                if (fd < 0)
                        snprintf(msg, sizeof(msg), "%s: %s", name, strerror(-r));
                if (r < 0)
                        item_say(s, r, msg);
        }
}

static void status_dispatch(struct tierd *t);

static void status_done(void *userdata) {
        _cleanup_(status_call_freep) struct status_call *c = userdata;
        sd_bus_message *reply = NULL;
        int r = bus_array_reply_open(c->m, "(ssssttb)", &reply);

        for (size_t i = 0; i < STATUS_CALLS_MAX; i++)
                if (running[i] == c)
                        running[i] = NULL;
        status_dispatch(c->t); /* first: the threads kept busy */

        for (size_t i = 0; r >= 0 && i < c->n; i++) {
                struct fd_status *s = &c->items[i];
                struct file_status none = { .tenant = "", .state = "" };
                char name[32];
                snprintf(name, sizeof(name), "file #%zu", i);
                if (s->error >= 0)
                        s->st.tenant = s->tn->cfg->name;
                r = bus_append_status(reply, name, s->error < 0 ? s->msg ?: "out of memory" : "",
                                      s->error < 0 ? &none : &s->st);
        }
        if (reply)
                r = bus_array_reply_send(reply, r);
        if (r < 0)
                (void)sd_bus_reply_method_errnof(c->m, r, "cannot answer: %m");
}

/* The call's fds, each checked on the loop: at most MAX_PATHS. */
static int read_fds(sd_bus_message *m, struct status_call *c, sd_bus_error *error) {
        size_t size = 0;
        int r = sd_bus_message_enter_container(m, 'a', "h"), fd;

        while (r >= 0 && (r = sd_bus_message_read(m, "h", &fd)) > 0) {
                if (c->n == MAX_PATHS)
                        return sd_bus_error_setf(error, ERROR_INVALID_ARGS, "at most %d files per call", MAX_PATHS);
                struct fd_status *grown = array_room(c->items, c->n, &size, sizeof(*grown), 16);
                if (!grown)
                        return -ENOMEM;
                c->items = grown;
                struct fd_status *s = &c->items[c->n++];
                _cleanup_(file_ref_done) struct file_ref f = {};
                char msg[512] = "";
                *s = (struct fd_status){ .fd = fd };
                int k = file_ref_from_fd(c->t, fd, &f, msg, sizeof(msg));
                if (k == -EAGAIN) /* not walked here: a thread brings it in for the next call */
                        file_ref_warm(c->t, &f);
                if (k < 0)
                        item_say(s, k, msg);
                else
                        s->tn = f.tn;
        }
        return r < 0 ? r : sd_bus_message_exit_container(m);
}

/* Calls of uid being read (any uid's: all). */
static unsigned running_count(const uid_t *uid) {
        unsigned n = 0;
        for (size_t i = 0; i < STATUS_CALLS_MAX; i++)
                n += running[i] && (!uid || running[i]->uid == *uid);
        return n;
}

static void tell_waiting_stopping(void) {
        while (waiting) {
                struct status_call *c = waiting;
                waiting = c->next;
                (void)sd_bus_reply_method_errorf(c->m, ERROR_SHUTTING_DOWN, "tierd is shutting down");
                status_call_free(c);
        }
}

/* Threads for waiting calls while there are threads to spare: the oldest
 * whose caller has none being read, else the oldest. */
static void status_dispatch(struct tierd *t) {
        if (t->stopping) /* not started: told at once, the stop does not wait for them */
                tell_waiting_stopping();
        while (waiting && running_count(NULL) < STATUS_CALLS_MAX) {
                struct status_call **pick = &waiting, *c;
                for (struct status_call **p = &waiting; *p; p = &(*p)->next)
                        if (running_count(&(*p)->uid) == 0) {
                                pick = p;
                                break;
                        }
                if (!(c = *pick))
                        break;
                *pick = c->next;
                c->next = NULL;
                size_t slot = 0;
                while (running[slot])
                        slot++;
                int r = offthread_start(t->event, NULL, 0, status_work, status_done, c, NULL);
                if (r < 0) {
                        (void)sd_bus_reply_method_errnof(c->m, r, "cannot read the files' status: %m");
                        status_call_free(c);
                        continue;
                }
                running[slot] = c;
        }
}

static int status_queue(struct status_call *c, sd_bus_error *error) {
        unsigned n = 0, of_uid = 0;
        struct status_call **tail = &waiting;
        for (; *tail; tail = &(*tail)->next) {
                n++;
                of_uid += (*tail)->uid == c->uid;
        }
        if (n >= STATUS_WAITING_MAX || of_uid >= STATUS_WAITING_PER_UID)
                return sd_bus_error_setf(error, ERROR_TRY_AGAIN, "%u status calls%s wait to be read already: try again",
                                         n >= STATUS_WAITING_MAX ? n : of_uid, n >= STATUS_WAITING_MAX ? "" : " of yours");
        *tail = c;
        return 0;
}

int status_bus_method_file_status_fds(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(status_call_freep) struct status_call *c = NULL;
        const struct caller_creds *cr = NULL;
        struct tierd *t = userdata;
        int r;

        if (t->stopping)
                return sd_bus_error_set(error, ERROR_SHUTTING_DOWN, "tierd is shutting down");
        if ((r = callers_lookup(m, &cr, error)) != 0) /* whose: each caller's turn comes */
                return r;
        if (!(c = calloc(1, sizeof(*c))))
                return -ENOMEM;
        *c = (struct status_call){ .t = t, .uid = cr->uid };
        if ((r = read_fds(m, c, error)) < 0)
                return r;
        if (c->n == 0) { /* nothing to read */
                c->m = sd_bus_message_ref(m);
                t->status_calls++;
                status_done(TAKE_PTR(c));
                return 1;
        }
        if ((r = status_queue(c, error)) < 0)
                return r;
        c->m = sd_bus_message_ref(m);
        t->status_calls++;
        TAKE_PTR(c);
        status_dispatch(t);
        return 1;
}

void status_bus_close(void) {
        tell_waiting_stopping();
}
