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
        void (*free)(struct task_run *r);
};

/* The end: its message into msg (size bytes), logged (at error level for
 * an error), and the run marked ended. The caller then tells its caller
 * and calls task_run_release. */
void task_run_end(struct task_run *r, int error, char *msg, size_t size, const char *fmt, va_list ap)
        __attribute__((format(printf, 5, 0)));
/* Frees an ended run that nothing holds any more. */
void task_run_release(struct task_run *r);
/* Every reply from the worker starts here: false if the run ended (and
 * then freed, if that was the last thing that held it). */
bool task_run_request_ended(struct task_run *r);
/* Work on a thread is over: false likewise. */
bool task_run_thread_ended(struct task_run *r);
