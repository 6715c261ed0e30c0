/* SPDX-License-Identifier: MIT */
/* Shapes the tenant, container and job objects share: properties, node lists. */
#include "property.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "workers.h"

static int bus_append_wait_buckets(sd_bus_message *reply, const struct wait_histogram *h) {
        uint64_t sum = 0;
        int r = sd_bus_message_open_container(reply, 'a', "(dt)");
        for (size_t i = 0; r >= 0 && i < LATENCY_BUCKETS; i++) {
                sum += h->buckets[i];
                r = sd_bus_message_append(reply, "(dt)", latency_bounds[i], sum);
        }
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int bus_append_wait_percentiles(sd_bus_message *reply, const struct wait_histogram *h) {
        static const struct { const char *name; double q; } ps[] = { { "p50", 0.5 }, { "p90", 0.9 }, { "p99", 0.99 } };
        int r = sd_bus_message_open_container(reply, 'a', "{sd}");
        for (size_t k = 0; r >= 0 && k < ARRAY_SIZE(ps); k++) {
                uint64_t rank = (uint64_t)(ps[k].q * (double)h->count + 0.999999), seen = 0;
                double v = 0;
                for (size_t i = 0; h->count && i < LATENCY_BUCKETS; i++)
                        if ((seen += h->buckets[i]) >= rank) {
                                v = latency_bounds[i];
                                break;
                        }
                r = sd_bus_message_append(reply, "{sd}", ps[k].name, v);
        }
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

#define UNUSED_GETTER_ARGS (void)bus, (void)path, (void)interface, (void)property, (void)error

GETTER_SIGNATURE(bus_property_get_u64) {
        UNUSED_GETTER_ARGS;
        return sd_bus_message_append(reply, "t", *(const uint64_t *)userdata);
}

GETTER_SIGNATURE(bus_property_get_u32) {
        UNUSED_GETTER_ARGS;
        return sd_bus_message_append(reply, "u", (uint32_t)*(const unsigned *)userdata);
}

GETTER_SIGNATURE(bus_property_get_bool) {
        UNUSED_GETTER_ARGS;
        return sd_bus_message_append(reply, "b", (int)*(const bool *)userdata);
}

GETTER_SIGNATURE(bus_property_get_string) {
        UNUSED_GETTER_ARGS;
        return sd_bus_message_append(reply, "s", *(char *const *)userdata ?: "");
}

GETTER_SIGNATURE(bus_property_get_pid) {
        pid_t pid = *(const pid_t *)userdata;
        UNUSED_GETTER_ARGS;
        return sd_bus_message_append(reply, "u", (uint32_t)(pid > 0 ? pid : 0));
}

/* Cumulative, as Prometheus histograms are: upper bound, count <= it,
 * the last bound +Inf. */
GETTER_SIGNATURE(bus_property_get_wait_buckets) {
        UNUSED_GETTER_ARGS;
        return bus_append_wait_buckets(reply, userdata);
}

GETTER_SIGNATURE(bus_property_get_wait_seconds) {
        UNUSED_GETTER_ARGS;
        return sd_bus_message_append(reply, "d", ((const struct wait_histogram *)userdata)->seconds);
}

/* p50, p90, p99: each the upper bound of the bucket holding it. */
GETTER_SIGNATURE(bus_property_get_wait_percentiles) {
        UNUSED_GETTER_ARGS;
        return bus_append_wait_percentiles(reply, userdata);
}

GETTER_SIGNATURE(bus_property_get_worker_state) {
        UNUSED_GETTER_ARGS;
        return sd_bus_message_append(reply, "s", worker_state_to_string(((const struct worker *)userdata)->state));
}

GETTER_SIGNATURE(bus_property_get_worker_in_flight) {
        uint32_t n = 0;
        UNUSED_GETTER_ARGS;
        for (const struct request *q = ((const struct worker *)userdata)->requests; q; q = q->next)
                n++;
        return sd_bus_message_append(reply, "u", n);
}

static void nodes_free(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

int bus_nodes_add(char ***v, size_t *n, char *path) {
        char **grown = path ? reallocarray(*v, *n + 2, sizeof(char *)) : NULL;
        if (!grown) {
                free(path);
                nodes_free(*v, *n);
                *v = NULL;
                *n = 0;
                return -ENOMEM;
        }
        grown[(*n)++] = path;
        grown[*n] = NULL;
        *v = grown;
        return 0;
}

int bus_nodes_done(char **v, char ***nodes) {
        if (!v && !(v = calloc(1, sizeof(char *))))
                return -ENOMEM;
        *nodes = v;
        return 0;
}
