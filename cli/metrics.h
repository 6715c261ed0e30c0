/* SPDX-License-Identifier: MIT */
/* tierctl metrics: what tierd's objects say, in the Prometheus text format. */
#pragma once

#include <stdio.h>
#include <systemd/sd-bus.h>

struct object_metrics;

struct metrics {
        char *version; /* tierd's; NULL: tierd did not answer */
        struct object_metrics *objects;
        size_t n;
};

/* Every tenant's and container's counters, in one GetManagedObjects call,
 * and tierd's Version ("unknown" from a tierd without it): 0, or -errno
 * with e set if tierd said why. */
int metrics_read(sd_bus *bus, struct metrics *ms, sd_bus_error *e);
void metrics_free(struct metrics *ms);
/* The text format 0.0.4; with nothing read (tierd absent), tierd_up 0. */
void metrics_print(FILE *f, const struct metrics *ms);

/* tierctl metrics --listen ADDRESS: serves GET /metrics until SIGTERM or
 * SIGINT (cli/metricsd.c). An exit code. */
int metrics_serve(const char *address);
