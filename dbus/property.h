/* SPDX-License-Identifier: MIT */
/* A property getter's signature, as sd-bus calls it, and the shapes
 * tenants and containers share. */
#pragma once

#include <systemd/sd-bus.h>

#include "tierd.h"

/* ReaderWaitBuckets (a(dt): cumulative, as Prometheus histograms are:
 * upper bound, count <= it, the last bound +Inf), ReaderWaitSeconds (d) or
 * ReaderWaitPercentiles (a{sd}: p50, p90, p99, each the upper bound of the
 * bucket holding it) of h. */
int bus_append_wait_property(sd_bus_message *reply, const char *property, const struct wait_histogram *h);

/* A node enumerator's answer, built one path at a time: bus_nodes_add
 * takes path (NULL: out of memory) into *v, which holds *n paths and a
 * NULL after them, and frees it all on failure; bus_nodes_done hands v
 * (an empty list for none) to sd-bus. */
int bus_nodes_add(char ***v, size_t *n, char *path);
int bus_nodes_done(char **v, char ***nodes);

#define GETTER(fn) \
        static int fn(sd_bus *bus, const char *path, const char *interface, const char *property, \
                      sd_bus_message *reply, void *userdata, sd_bus_error *error)
