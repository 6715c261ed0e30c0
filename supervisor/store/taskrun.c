/* SPDX-License-Identifier: MIT */
#include "taskrun.h"

#include <stdio.h>

#include "log.h"
#include "tierd.h"

void task_run_end(struct task_run *r, int error, char *msg, size_t size, const char *fmt, va_list ap) {
        vsnprintf(msg, size, fmt, ap);
        if (error < 0)
                log_error("tenant %s: %s: %s", r->tn->cfg->name, r->name, msg);
        else
                log_info("tenant %s: %s: %s", r->tn->cfg->name, r->name, msg);
        r->ended = true;
}

void task_run_release(struct task_run *r) {
        if (r->ended && r->requests == 0 && !r->on_thread)
                r->free(r);
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
