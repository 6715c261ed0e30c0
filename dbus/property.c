/* SPDX-License-Identifier: MIT */
/* Shapes the tenant, container and job objects share: properties, node lists. */
#include "property.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

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

int bus_append_wait_property(sd_bus_message *reply, const char *property, const struct wait_histogram *h) {
        if (strcmp(property, "ReaderWaitSeconds") == 0)
                return sd_bus_message_append(reply, "d", h->seconds);
        if (strcmp(property, "ReaderWaitBuckets") == 0)
                return bus_append_wait_buckets(reply, h);
        return bus_append_wait_percentiles(reply, h);
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
