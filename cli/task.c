/* SPDX-License-Identifier: MIT */
/*
 * tierctl gc, audit and tenant import: tierd's Start* methods reply at once
 * with a Job, and the manager's TaskFinished (subscribed to before the
 * call) says how it ended. On a terminal, the job's phase and count show
 * on stderr; Ctrl-C cancels a gc (an audit or an import cannot be stopped
 * half way: tierctl then says so and keeps waiting).
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "tierctl.h"

struct task_wait {
        const char *verb;
        char *job;                /* its object, once the call replied */
        char *tierd;              /* tierd's unique name: whether it is still there */
        sd_bus_message *finished; /* its TaskFinished */
        bool gone, removed, progress;
};

static volatile sig_atomic_t task_interrupted;

static void on_task_interrupt(int sig) {
        (void)sig;
        task_interrupted = 1;
}

static int on_finished(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct task_wait *w = userdata;
        const char *path;
        uint32_t id;
        (void)error;
        if (!w->job || w->finished || sd_bus_message_read(m, "uo", &id, &path) < 0 || strcmp(path, w->job) != 0)
                return 0;
        w->finished = sd_bus_message_ref(m);
        return 0;
}

/* TaskFinished comes just before; a job removed without it ended in a
 * way tierd could not tell (say so, do not wait for ever). */
static int on_removed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct task_wait *w = userdata;
        const char *path;
        uint32_t id;
        (void)error;
        if (w->job && sd_bus_message_read(m, "uo", &id, &path) >= 0 && strcmp(path, w->job) == 0)
                w->removed = true;
        return 0;
}

static int on_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct task_wait *w = userdata;
        const char *name, *old_owner, *new_owner;
        (void)error;
        if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) >= 0 && strcmp(name, BUS_NAME) == 0 &&
            w->tierd && strcmp(old_owner, w->tierd) == 0)
                w->gone = true;
        return 0;
}

/* The job's Phase and FilesDone/FilesTotal (its items) as they change. */
static int on_progress(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct task_wait *w = userdata;
        const char *phase = NULL;
        uint32_t done = 0, total = 0;
        (void)error;
        if (!w->job || strcmp(sd_bus_message_get_path(m) ?: "", w->job) != 0 ||
            job_progress_read(m, &phase, &done, &total) <= 0)
                return 0;
        if (phase && total)
                fprintf(stderr, "\r\033[K%s: %s %u/%u", w->verb, phase, done, total);
        else if (phase)
                fprintf(stderr, "\r\033[K%s: %s %u", w->verb, phase, done);
        return 0;
}

static int subscribe(sd_bus *bus, struct task_wait *w) {
        int r = sd_bus_match_signal(bus, NULL, BUS_NAME, BUS_PATH, BUS_MANAGER, "TaskFinished", on_finished, w);
        if (r >= 0)
                r = sd_bus_match_signal(bus, NULL, BUS_NAME, BUS_PATH, BUS_MANAGER, "JobRemoved", on_removed, w);
        if (r >= 0 && w->progress)
                r = sd_bus_match_signal(bus, NULL, BUS_NAME, NULL, "org.freedesktop.DBus.Properties",
                                        "PropertiesChanged", on_progress, w);
        if (r >= 0)
                r = sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                        "org.freedesktop.DBus", "NameOwnerChanged", on_owner_changed, w);
        return r;
}

/* Until TaskFinished, tierd gone, or the bus fails. */
static int wait_finished(sd_bus *bus, struct task_wait *w) {
        bool canceling = false;
        while (!w->finished && !w->gone && !w->removed) {
                if (task_interrupted && !canceling) {
                        sd_bus_error e = SD_BUS_ERROR_NULL;
                        canceling = true;
                        if (sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_MANAGER, "CancelJob", &e, NULL, "o",
                                               w->job) < 0)
                                fprintf(stderr, "\ntierctl: %s: %s: waiting for it to finish\n", w->verb,
                                        e.message ?: "cannot cancel");
                        sd_bus_error_free(&e);
                }
                int r = sd_bus_process(bus, NULL);
                if (r < 0)
                        return call_failed("reading the bus", NULL, r);
                if (r == 0 && (r = sd_bus_wait(bus, 200 * 1000)) < 0 && r != -EINTR)
                        return call_failed("waiting on the bus", NULL, r);
        }
        return EXIT_OK;
}

int task_run(sd_bus *bus, const char *verb, sd_bus_message *call, sd_bus_message **ret_finished,
             const char **ret_result, const char **ret_summary) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct task_wait w = { .verb = verb, .progress = isatty(STDERR_FILENO) };
        sd_bus_error e = SD_BUS_ERROR_NULL;
        const char *job, *operation;
        int r, ret;

        if ((r = subscribe(bus, &w)) < 0)
                return call_failed("AddMatch", NULL, r);
        signal(SIGINT, on_task_interrupt);
        r = sd_bus_call(bus, call, 0, &e, &reply);
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &job);
        if (r < 0) {
                r = call_failed(verb, &e, r);
                sd_bus_error_free(&e);
                return r;
        }
        if (!(w.job = strdup(job)) || !(w.tierd = strdup(sd_bus_message_get_sender(reply) ?: "")))
                ret = call_failed(verb, NULL, -ENOMEM);
        else
                ret = wait_finished(bus, &w);
        if (w.progress)
                fputs("\r\033[K", stderr);
        if (ret == EXIT_OK && !w.finished) {
                fprintf(stderr, "tierctl: %s: %s: its result is unknown (see tierd's log)\n", verb,
                        w.gone ? "tierd stopped or restarted before the job ended" : "the job ended without a word");
                ret = EXIT_FAILED;
        }
        if (ret == EXIT_OK && sd_bus_message_read(w.finished, "sss", &operation, ret_result, ret_summary) < 0)
                ret = call_failed(verb, NULL, -EBADMSG);
        if (ret == EXIT_OK)
                *ret_finished = sd_bus_message_ref(w.finished);
        sd_bus_message_unref(w.finished);
        free(w.job);
        free(w.tierd);
        return ret;
}
