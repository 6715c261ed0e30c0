/* SPDX-License-Identifier: MIT */
#include "taskrun.h"

#include <stdarg.h>
#include <stdio.h>

#include "log.h"
#include "tierd.h"

static void task_run_release(struct task_run *r) {
        if (r->ended && r->requests == 0 && !r->on_thread)
                r->free(r);
}

void task_end_message(const struct tenant *tn, const char *name, int error, char *msg, size_t size,
                      const char *fmt, va_list ap) {
        vsnprintf(msg, size, fmt, ap);
        if (error < 0)
                log_error("tenant %s: %s: %s", tn->cfg->name, name, msg);
        else
                log_info("tenant %s: %s: %s", tn->cfg->name, name, msg);
}

void task_run_finish(struct task_run *r, int error, const char *fmt, ...) {
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        task_end_message(r->tn, r->name, error, msg, sizeof(msg), fmt, ap);
        va_end(ap);
        r->ended = true;
        r->told(r, error, msg);
        task_run_release(r);
}

bool task_run_request_ended(struct task_run *r) {
        r->requests--;
        if (!r->ended)
                return true;
        task_run_release(r);
        return false;
}

bool task_run_thread_ended(struct task_run *r) {
        r->on_thread = false;
        if (!r->ended)
                return true;
        task_run_release(r);
        return false;
}
