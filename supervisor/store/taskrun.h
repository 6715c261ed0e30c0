/* SPDX-License-Identifier: MIT */
/*
 * A tenant's long task (gc, audit): it ends once, told to its caller with
 * a message, and its run is freed when nothing still needs it: no request
 * to the worker in flight and no work on a thread. Embedded in the task's
 * own run; free() frees that.
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct tenant;

struct task_run {
        struct tenant *tn;
        const char *name;   /* "gc", "audit": in log lines */
        unsigned requests;  /* to the worker, in flight */
        bool on_thread;     /* work on a thread still holds the run */
        bool ended;         /* told: freed when nothing holds it */
        /* The task's caller told of its end (the run is still whole; msg is
         * the run's own, valid for the call only). */
        void (*told)(struct task_run *r, int error, const char *msg);
        void (*free)(struct task_run *r);
};

/* A long task's end message: formatted into msg (size bytes) and logged,
 * at error level for an error. Shared with the catalog's import, whose
 * run the catalog holds. */
void task_end_message(const struct tenant *tn, const char *name, int error, char *msg, size_t size,
                      const char *fmt, va_list ap) __attribute__((format(printf, 6, 0)));
/* The end, once: the message formatted, logged (at error level for an
 * error), told, and the run freed unless a request or a thread still
 * holds it. */
void task_run_finish(struct task_run *r, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Every reply from the worker starts here: false if the run ended (and
 * then freed, if that was the last thing that held it). */
bool task_run_request_ended(struct task_run *r);
/* Work on a thread is over: false likewise. */
bool task_run_thread_ended(struct task_run *r);
