/* SPDX-License-Identifier: MIT */
/*
 * Files a caller names by path (org.tierd1.Manager's *Paths methods and
 * FileStatus). Each path is walked on a thread (pathwarm_check), never on
 * the event loop: a directory on the way that is not in the kernel's
 * lookup cache costs a lookup in the filesystem, as many as the tenant
 * made levels. The call is answered once every path was walked; it
 * keeps its message (sd_bus_message_ref) meanwhile. What the loop does
 * for each path (name it, queue its walk, answer for it) is done
 * SLICE paths a turn: a call may name 100,000.
 */
#include "pathbus.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "batch.h"
#include "jobbus.h"
#include "macro.h"
#include "utf8.h"

#define MAX_PATH_LEN 4096
/* Calls whose paths are being walked: what waits on the threads is
 * bounded (each call's paths are). */
#define PATH_CALLS_MAX 8
/* Paths named, queued or answered for in one turn of the loop. */
#define SLICE 4096

/* Where a slice that starts at done (of n) ends. */
static size_t slice_end(size_t done, size_t n) {
        return n - done > SLICE ? done + SLICE : n;
}

struct paths_call {
        sd_bus_message *m;
        struct tierd *t;
        const char *operation;
        file_job_t fn; /* NULL: FileStatus */
        const char **paths; /* in m */
        size_t n, allocated;
        bool read_all; /* every path read from m (read_slice) */
        struct file_ref *refs; /* refs[i].tn NULL: paths[i] names no tenant's file */
        struct path_check *checks;
        size_t named, queued;
        size_t chunks;                   /* pathwarm_check runs not ended, and 1 until all are queued */
        void (*walked)(void *userdata);  /* once all are */
        sd_event_source *prepare_src;    /* naming and queueing, SLICE a turn */
        sd_bus_message *reply;           /* FileStatus's, made SLICE answers a turn */
        size_t replied;
        sd_event_source *slice_src;
};

static void paths_call_free(struct paths_call *c) {
        for (size_t i = 0; c->refs && i < c->n; i++)
                file_ref_done(&c->refs[i]);
        for (size_t i = 0; c->checks && i < c->n; i++)
                free(c->checks[i].status_msg);
        free(c->refs);
        free(c->checks);
        free(c->paths);
        sd_bus_message_unref(c->reply);
        sd_event_source_disable_unref(c->slice_src);
        sd_event_source_disable_unref(c->prepare_src);
        bool counted = c->m; /* paths_call_start counted it */
        sd_bus_message_unref(c->m);
        if (counted && --c->t->path_calls == 0)
                tierd_check_idle(c->t); /* a stop waits for the calls' answers */
        free(c);
}

static void paths_call_freep(struct paths_call **c) {
        if (*c)
                paths_call_free(*c);
}

/* The call is answered with error name and message, and freed: 0. */
__attribute__((format(printf, 3, 4))) static int paths_call_fail(struct paths_call *c, const char *name,
                                                                 const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        (void)sd_bus_reply_method_errorfv(c->m, name, fmt, ap);
        va_end(ap);
        paths_call_free(c);
        return 0;
}

/* SLICE more of the call's paths read (the strings stay in its message)
 * and checked: absolute, of at most MAX_PATH_LEN bytes, at most MAX_PATHS
 * of them. All of 100,000 in one turn held the loop 12-18 ms. One
 * string at a time, in time linear in their number:
 * sd_bus_message_read_strv measures its array anew for each string it
 * adds (100,000 paths held the loop 1.6 s). 0: the call was answered
 * and freed. */
static int read_slice(struct paths_call *c) {
        const char *p;
        int r = 1;

        for (size_t k = 0; k < SLICE && (r = sd_bus_message_read_basic(c->m, 's', &p)) > 0; k++) {
                if (c->n == MAX_PATHS)
                        return paths_call_fail(c, ERROR_INVALID_ARGS, "at most %d paths per call", MAX_PATHS);
                if (strlen(p) > MAX_PATH_LEN || p[0] != '/')
                        return paths_call_fail(c, ERROR_INVALID_ARGS,
                                               "path #%zu is not an absolute path of at most %d bytes", c->n,
                                               MAX_PATH_LEN);
                const char **grown = array_room(c->paths, c->n, &c->allocated, sizeof(char *), 16);
                if (!grown)
                        return paths_call_fail(c, SD_BUS_ERROR_NO_MEMORY, "out of memory");
                c->paths = grown;
                c->paths[c->n++] = p;
        }
        if (r > 0)
                return 1; /* more next turn */
        if (r == 0)
                r = sd_bus_message_exit_container(c->m);
        if (r >= 0 && c->fn && c->n == 0)
                return paths_call_fail(c, ERROR_INVALID_ARGS, "no files given");
        if (r >= 0 && (!(c->refs = calloc(c->n ?: 1, sizeof(*c->refs))) ||
                       !(c->checks = calloc(c->n ?: 1, sizeof(*c->checks)))))
                r = -ENOMEM;
        if (r < 0) {
                (void)sd_bus_reply_method_errnof(c->m, r, "cannot read the paths: %m");
                paths_call_free(c);
                return 0;
        }
        c->read_all = true;
        return 1;
}

/* A call by path: its array of paths entered, read SLICE a turn
 * (read_slice). */
static int paths_call_new(sd_bus_message *m, struct tierd *t, struct paths_call **ret, sd_bus_error *error) {
        _cleanup_free_ struct paths_call *c = NULL;
        int r;

        if (t->path_calls >= PATH_CALLS_MAX)
                return sd_bus_error_setf(error, ERROR_TRY_AGAIN, "%d calls by path are being walked already: try again",
                                         PATH_CALLS_MAX);
        if (!(c = calloc(1, sizeof(*c))))
                return -ENOMEM;
        if ((r = sd_bus_message_enter_container(m, 'a', "s")) < 0)
                return r;
        c->t = t;
        *ret = TAKE_PTR(c);
        return 0;
}

/* Path i named. One that names no tenant's file fails a job's call
 * (answered here, c freed: -1), nothing walked; a status says why. */
static int name_path(struct paths_call *c, size_t i) {
        char msg[512] = "";
        int r = file_ref_name(c->t, c->paths[i], &c->refs[i], msg, sizeof(msg));

        if (!c->fn)
                c->checks[i].want_status = true;
        if (r >= 0 || !c->fn)
                return 0;
        _cleanup_free_ char *safe = utf8_escape(msg);
        paths_call_fail(c, bus_job_error_name(r), "%s", safe ?: "");
        return -1;
}

static void chunk_walked(void *userdata) {
        struct paths_call *c = userdata;
        if (--c->chunks == 0)
                c->walked(c); /* frees c */
}

/* SLICE paths' walks to the thread. Those it cannot queue say so. */
static void queue_slice(struct paths_call *c) {
        size_t k = slice_end(c->queued, c->n) - c->queued;

        c->chunks++;
        if (pathwarm_check(c->t, c->refs + c->queued, c->checks + c->queued, k, chunk_walked, c) < 0) {
                c->chunks--;
                for (size_t i = c->queued; i < c->queued + k; i++)
                        c->checks[i] = (struct path_check){ .error = -ENOMEM };
        }
        c->queued += k;
}

static int prepare_later(struct paths_call *c);

/* A turn's slice: every path read, then named (a job's call fails before
 * anything is walked), then queued; once all are, the last walk's end
 * (or this, if they ended already) calls c->walked. */
static int on_prepare_slice(sd_event_source *s, void *userdata) {
        struct paths_call *c = userdata;
        (void)s;

        if (c->named < c->n || !c->read_all) {
                if (c->t->stopping) /* its walks would not be made */
                        return paths_call_fail(c, ERROR_SHUTTING_DOWN, "tierd is shutting down");
                if (!c->read_all)
                        return read_slice(c) == 0 ? 0 : prepare_later(c);
                for (size_t end = slice_end(c->named, c->n); c->named < end; c->named++)
                        if (name_path(c, c->named) < 0)
                                return 0;
        } else
                queue_slice(c);
        return prepare_later(c);
}

/* The next slice next turn, or, once all are queued, the hold goes. */
static int prepare_later(struct paths_call *c) {
        int r = 0;

        if ((c->queued < c->n || !c->read_all) &&
            (r = tierd_defer_once(c->t->event, &c->prepare_src, on_prepare_slice, c)) >= 0)
                return 0;
        if (!c->read_all || (c->queued == 0 && c->n > 0)) { /* nothing queued yet */
                (void)sd_bus_reply_method_errnof(c->m, r, "cannot walk the paths: %m");
                paths_call_free(c);
                return 0;
        }
        for (; c->queued < c->n; c->queued++) /* the loop cannot come back: these are not walked */
                c->checks[c->queued] = (struct path_check){ .error = -ENOMEM };
        chunk_walked(c); /* all queued: the hold goes */
        return 0;
}

/* Every path named and walked, a slice a turn; walked(c) on the loop once
 * all are, which answers and frees c. 1: the call is answered later. */
static int paths_call_start(struct paths_call *c, sd_bus_message *m, void (*walked)(void *userdata)) {
        c->m = sd_bus_message_ref(m);
        c->t->path_calls++;
        c->walked = walked;
        c->chunks = 1;
        int r = tierd_defer_once(c->t->event, &c->prepare_src, on_prepare_slice, c);
        if (r < 0) {
                paths_call_free(c);
                return r;
        }
        return 1;
}

/* What the thread found for path i, as a job's error: 0, or -errno and
 * msg. The ref then names the inode found, which a job's open checks. */
static int path_checked(struct paths_call *c, size_t i, char msg[512]) {
        const struct path_check *k = &c->checks[i];
        struct file_ref *f = &c->refs[i];

        if (k->error < 0)
                return file_ref_open_error(f, k->error, msg, 512);
        if (!k->regular) {
                snprintf(msg, 512, "%s: not a regular file", f->name);
                return -EINVAL;
        }
        f->dev = k->dev, f->ino = k->ino;
        return 0;
}

static void on_job_paths_walked(void *userdata) {
        _cleanup_(paths_call_freep) struct paths_call *c = userdata;
        char msg[512];
        int r;

        /* First: a stop cancels the walks it finds waiting. */
        if (c->t->stopping) {
                (void)sd_bus_reply_method_errorf(c->m, ERROR_SHUTTING_DOWN, "tierd is shutting down");
                return;
        }
        for (size_t i = 0; i < c->n; i++)
                if ((r = path_checked(c, i, msg)) < 0) {
                        _cleanup_free_ char *safe = utf8_escape(msg); /* cut mid-character? */
                        (void)sd_bus_reply_method_errorf(c->m, bus_job_error_name(r), "%s", safe ?: "");
                        return;
                }
        if ((r = bus_file_job_reply(c->m, c->t, c->operation, c->fn, c->refs, c->n)) < 0)
                (void)sd_bus_reply_method_errnof(c->m, r, "cannot start the job: %m");
}

int path_bus_file_job(sd_bus_message *m, struct tierd *t, const char *operation, file_job_t fn, sd_bus_error *error) {
        struct paths_call *c = NULL;
        int r;

        if ((r = bus_file_job_allowed(m, t, error)) != 0)
                return r;
        if ((r = paths_call_new(m, t, &c, error)) < 0)
                return r;
        if (!c)
                return -ENOMEM;
        c->operation = operation;
        c->fn = fn; /* none given: read_slice says so */
        return paths_call_start(c, m, on_job_paths_walked);
}

/* Path i's status, read by the thread that walked it: the loop reads
 * no stub of a file a caller named (a cold one waits for the disk). */
static int append_checked_status(sd_bus_message *reply, struct paths_call *c, size_t i) {
        struct path_check *k = &c->checks[i];
        struct file_ref *f = &c->refs[i];
        struct file_status st = { .tenant = "", .state = "" };
        char msg[512] = "";
        int r = 0;

        if (!f->tn) { /* named no tenant's file: said again why */
                struct file_ref unnamed = {};
                (void)file_ref_name(c->t, c->paths[i], &unnamed, msg, sizeof(msg));
                file_ref_done(&unnamed);
        } else if ((r = path_checked(c, i, msg)) >= 0 && k->status_error >= 0) {
                st = k->status;
                st.tenant = f->tn->cfg->name;
        } else if (r >= 0)
                snprintf(msg, sizeof(msg), "%s", k->status_msg ?: "out of memory");
        return bus_append_status(reply, f->name ?: c->paths[i], msg, &st);
}

/* SLICE more answers; the reply is sent after the last. */
static int on_status_slice(sd_event_source *s, void *userdata) {
        struct paths_call *c = userdata;
        size_t end = slice_end(c->replied, c->n);
        int r = 0;
        (void)s;

        for (; r >= 0 && c->replied < end; c->replied++)
                r = append_checked_status(c->reply, c, c->replied);
        if (r >= 0 && c->replied < c->n && (r = tierd_defer_once(c->t->event, &c->slice_src, on_status_slice, c)) >= 0)
                return 0;
        if ((r = bus_array_reply_send(TAKE_PTR(c->reply), r)) < 0)
                (void)sd_bus_reply_method_errnof(c->m, r, "cannot answer: %m");
        paths_call_free(c);
        return 0;
}

static void on_status_paths_walked(void *userdata) {
        struct paths_call *c = userdata;
        int r = bus_array_reply_open(c->m, "(ssssttb)", &c->reply);

        if (r >= 0)
                r = tierd_defer_once(c->t->event, &c->slice_src, on_status_slice, c);
        if (r < 0) {
                (void)sd_bus_reply_method_errnof(c->m, r, "cannot answer: %m");
                paths_call_free(c);
        }
}

/* By path: for root and the admin group only. Anyone else would learn,
 * through tierd's eyes, whether a file exists behind a directory they
 * cannot enter, and its size; they pass the files themselves
 * (FileStatusFds), which they can only do for files they reach. */
int path_bus_method_file_status(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        sd_bus_error denied = SD_BUS_ERROR_NULL;
        struct paths_call *c = NULL;
        int r;

        if (t->stopping) /* its walks would not be made */
                return sd_bus_error_set(error, ERROR_SHUTTING_DOWN, "tierd is shutting down");
        r = bus_check_admin(t, m, &denied);
        if (r > 0) /* not known yet: m comes back */
                return r;
        if (r < 0 && !sd_bus_error_has_name(&denied, ERROR_ACCESS_DENIED))
                return sd_bus_error_move(error, &denied); /* TryAgain, or the caller not known */
        sd_bus_error_free(&denied);
        if (r < 0)
                return sd_bus_error_set(error, ERROR_ACCESS_DENIED,
                                        "FileStatus by path is for root and the admin group: pass the files "
                                        "themselves (FileStatusFds), as tierctl status does");
        if ((r = paths_call_new(m, t, &c, error)) < 0)
                return r;
        if (!c)
                return -ENOMEM;
        /* A path that names no tenant's file is answered for with its error. */
        return paths_call_start(c, m, on_status_paths_walked);
}

int bus_file_job_allowed(sd_bus_message *m, struct tierd *t, sd_bus_error *error) {
        int r = bus_check_admin(t, m, error);
        if (r != 0)
                return r;
        if (t->stopping)
                return sd_bus_error_set(error, ERROR_SHUTTING_DOWN, "tierd is shutting down");
        return 0;
}

int bus_file_job_reply(sd_bus_message *m, struct tierd *t, const char *operation, file_job_t fn,
                       struct file_ref *refs, size_t n) {
        struct batch *b = NULL;
        char path[64];
        int r = batch_start_files(t, operation, fn, refs, n, &b);

        if (r < 0)
                return r;
        job_bus_path(b->id, path);
        (void)sd_bus_reply_method_return(m, "o", path); /* a caller gone: the job goes on */
        batch_run(t);
        return 1;
}

int bus_array_reply_open(sd_bus_message *call, const char *contents, sd_bus_message **reply) {
        int r = sd_bus_message_new_method_return(call, reply);
        return r < 0 ? r : sd_bus_message_open_container(*reply, 'a', contents);
}

int bus_array_reply_send(sd_bus_message *reply, int r) {
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 1;
}

int bus_append_status(sd_bus_message *reply, const char *name, const char *msg, const struct file_status *st) {
        _cleanup_free_ char *safe = utf8_escape(msg);
        if (!safe)
                return -ENOMEM;
        return sd_bus_message_append(reply, "(ssssttb)", name, safe, st->tenant, st->state, st->size, st->resident,
                                     (int)st->pinned);
}
