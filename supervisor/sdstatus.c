/* SPDX-License-Identifier: MIT */
/*
 * Under systemd, `systemctl status tierd` shows what tierd is doing in one
 * line (sd_notify STATUS=): tenants, workers running, fills in flight,
 * fills done and failed. Refreshed every few seconds and sent only when it
 * changed; it counts what is in memory (tenants, containers, requests in
 * flight), never walks a tree. Without $NOTIFY_SOCKET, nothing runs.
 */
#include "sdstatus.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "log.h"

#define STATUS_USEC (5 * 1000 * 1000ull)

static void count_worker(const struct worker *w, unsigned *workers, unsigned *running, unsigned *in_flight) {
        (*workers)++;
        *running += w->state == WORKER_RUNNING;
        for (const struct request *q = w->requests; q; q = q->next)
                (*in_flight)++;
}

static void status_line(const struct tierd *t, char *buf, size_t size) {
        unsigned workers = 0, running = 0, in_flight = 0, containers = 0;
        uint64_t fills = 0, errors = 0;

        for (size_t i = 0; i < t->n_tenants; i++) {
                const struct tenant *tn = &t->tenants[i];
                count_worker(&tn->worker, &workers, &running, &in_flight);
                fills += tn->counters.fills;
                errors += tn->counters.fill_errors;
        }
        for (const struct container *c = t->containers; c; c = c->next) {
                containers++;
                count_worker(&c->worker, &workers, &running, &in_flight);
        }
        snprintf(buf, size,
                 "%zu tenant(s), %u container(s), %u of %u worker(s) running, %u fill(s) in flight, "
                 "%" PRIu64 " done, %" PRIu64 " failed",
                 t->n_tenants, containers, running, workers, in_flight, fills, errors);
}

static int on_status(sd_event_source *s, uint64_t usec, void *userdata) {
        struct tierd *t = userdata;
        char line[sizeof(t->status)];

        status_line(t, line, sizeof(line));
        if (strcmp(line, t->status) != 0) {
                memcpy(t->status, line, sizeof(line));
                /* One datagram, never blocking for long: systemd reads it. */
                char msg[sizeof(line) + 8];
                snprintf(msg, sizeof(msg), "STATUS=%s", line);
                sd_notify(false, msg);
        }
        return sd_event_source_set_time(s, usec + STATUS_USEC);
}

int sdstatus_start(struct tierd *t) {
        if (!getenv("NOTIFY_SOCKET"))
                return 0;
        int r = sd_event_add_time_relative(t->event, &t->status_src, CLOCK_MONOTONIC, 0, 0, on_status, t);
        if (r >= 0)
                r = sd_event_source_set_enabled(t->status_src, SD_EVENT_ON);
        return r < 0 ? log_error_errno(r, "cannot keep systemd's STATUS= up to date: %m") : 0;
}
