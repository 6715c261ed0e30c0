/* SPDX-License-Identifier: MIT */
/*
 * tierctl metrics: the Prometheus text format (0.0.4) for node_exporter's
 * textfile collector, which refuses timestamps. One GetManagedObjects call;
 * reader waits as a histogram, which can be aggregated across nodes (a
 * percentile cannot).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "tierctl.h"

#define MAX_BUCKETS 32

struct tenant_metrics {
        char *name;
        char *worker_state;
        uint32_t restarts, in_flight;
        uint64_t fills, fetched, fill_errors, archives, releases, resident, released, archived;
        uint64_t files[5];
        double wait_bounds[MAX_BUCKETS];
        uint64_t wait_counts[MAX_BUCKETS];
        size_t n_buckets;
        double wait_seconds;
};

static const char *const file_states[] = { "resident", "archived", "partial", "released", "dirty" };

static int read_property(sd_bus_message *m, struct tenant_metrics *t) {
        const char *name, *contents;
        char type;
        int r = sd_bus_message_read(m, "s", &name);

        if (r < 0 || (r = sd_bus_message_peek_type(m, &type, &contents)) < 0)
                return r;
        if ((r = sd_bus_message_enter_container(m, 'v', contents)) < 0)
                return r;
        if (strcmp(contents, "s") == 0 && (!strcmp(name, "Name") || !strcmp(name, "WorkerState"))) {
                const char *v;
                if ((r = sd_bus_message_read(m, "s", &v)) < 0)
                        return r;
                char **dst = strcmp(name, "Name") == 0 ? &t->name : &t->worker_state;
                free(*dst);
                if (!(*dst = strdup(v)))
                        return -ENOMEM;
        } else if (strcmp(contents, "u") == 0 && (!strcmp(name, "WorkerRestarts") || !strcmp(name, "InFlightRequests"))) {
                r = sd_bus_message_read(m, "u", strcmp(name, "WorkerRestarts") == 0 ? &t->restarts : &t->in_flight);
        } else if (strcmp(contents, "t") == 0) {
                static const struct { const char *n; size_t off; } map[] = {
                        { "Fills", offsetof(struct tenant_metrics, fills) },
                        { "BytesFetched", offsetof(struct tenant_metrics, fetched) },
                        { "FillErrors", offsetof(struct tenant_metrics, fill_errors) },
                        { "Archives", offsetof(struct tenant_metrics, archives) },
                        { "Releases", offsetof(struct tenant_metrics, releases) },
                        { "ResidentBytes", offsetof(struct tenant_metrics, resident) },
                        { "ReleasedBytes", offsetof(struct tenant_metrics, released) },
                        { "ArchivedBytes", offsetof(struct tenant_metrics, archived) },
                };
                uint64_t v;
                if ((r = sd_bus_message_read(m, "t", &v)) < 0)
                        return r;
                for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                        if (strcmp(name, map[i].n) == 0)
                                memcpy((char *)t + map[i].off, &v, sizeof(v));
        } else if (strcmp(name, "FilesByState") == 0 && strcmp(contents, "a{st}") == 0) {
                const char *state;
                uint64_t n;
                if ((r = sd_bus_message_enter_container(m, 'a', "{st}")) < 0)
                        return r;
                while ((r = sd_bus_message_read(m, "{st}", &state, &n)) > 0)
                        for (size_t i = 0; i < ARRAY_SIZE(file_states); i++)
                                if (strcmp(state, file_states[i]) == 0)
                                        t->files[i] = n;
                if (r < 0 || (r = sd_bus_message_exit_container(m)) < 0)
                        return r;
        } else if (strcmp(name, "ReaderWaitBuckets") == 0 && strcmp(contents, "a(dt)") == 0) {
                double b;
                uint64_t n;
                if ((r = sd_bus_message_enter_container(m, 'a', "(dt)")) < 0)
                        return r;
                while ((r = sd_bus_message_read(m, "(dt)", &b, &n)) > 0)
                        if (t->n_buckets < MAX_BUCKETS) {
                                t->wait_bounds[t->n_buckets] = b;
                                t->wait_counts[t->n_buckets++] = n;
                        }
                if (r < 0 || (r = sd_bus_message_exit_container(m)) < 0)
                        return r;
        } else if (strcmp(name, "ReaderWaitSeconds") == 0 && strcmp(contents, "d") == 0) {
                r = sd_bus_message_read(m, "d", &t->wait_seconds);
        } else
                r = sd_bus_message_skip(m, contents);
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

/* a{oa{sa{sv}}}: the org.tierd1.Tenant properties of every object. */
static int read_objects(sd_bus_message *m, struct tenant_metrics **ret, size_t *n) {
        int r = sd_bus_message_enter_container(m, 'a', "{oa{sa{sv}}}");
        while (r >= 0 && (r = sd_bus_message_enter_container(m, 'e', "oa{sa{sv}}")) > 0) {
                const char *path, *iface;
                if ((r = sd_bus_message_read(m, "o", &path)) < 0 ||
                    (r = sd_bus_message_enter_container(m, 'a', "{sa{sv}}")) < 0)
                        return r;
                while ((r = sd_bus_message_enter_container(m, 'e', "sa{sv}")) > 0) {
                        if ((r = sd_bus_message_read(m, "s", &iface)) < 0)
                                return r;
                        if (strcmp(iface, BUS_TENANT) != 0) {
                                if ((r = sd_bus_message_skip(m, "a{sv}")) < 0)
                                        return r;
                        } else {
                                struct tenant_metrics *v = realloc(*ret, (*n + 1) * sizeof(*v));
                                if (!v)
                                        return -ENOMEM;
                                *ret = v;
                                struct tenant_metrics *t = &v[(*n)++];
                                *t = (struct tenant_metrics){};
                                if ((r = sd_bus_message_enter_container(m, 'a', "{sv}")) < 0)
                                        return r;
                                while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                                        if ((r = read_property(m, t)) < 0 || (r = sd_bus_message_exit_container(m)) < 0)
                                                return r;
                                }
                                if (r < 0 || (r = sd_bus_message_exit_container(m)) < 0)
                                        return r;
                        }
                        if ((r = sd_bus_message_exit_container(m)) < 0)
                                return r;
                }
                if (r < 0 || (r = sd_bus_message_exit_container(m)) < 0 || (r = sd_bus_message_exit_container(m)) < 0)
                        return r;
        }
        return r;
}

/* Label values: backslash, double quote and newline escaped. */
static void label(const char *s) {
        for (; *s; s++)
                if (*s == '\\' || *s == '"')
                        printf("\\%c", *s);
                else if (*s == '\n')
                        printf("\\n");
                else
                        putchar(*s);
}

static void metric_header(const char *name, const char *type, const char *help) {
        printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

#define EACH_TENANT(var) for (struct tenant_metrics *var = ts; var < ts + n; var++)
#define SAMPLE(metric, tm, fmt, value)          \
        do {                                    \
                printf("%s{tenant=\"", metric);  \
                label((tm)->name ?: "");        \
                printf("\"} " fmt "\n", value); \
        } while (0)

static void print_metrics(struct tenant_metrics *ts, size_t n) {
        static const struct { const char *name, *type, *help; size_t off; } counters[] = {
                { "tierd_fills_total", "counter", "Ranges filled from the store.", offsetof(struct tenant_metrics, fills) },
                { "tierd_fetched_bytes_total", "counter", "Bytes filled from the store.", offsetof(struct tenant_metrics, fetched) },
                { "tierd_fill_errors_total", "counter", "Fills and verifications that failed.", offsetof(struct tenant_metrics, fill_errors) },
                { "tierd_archives_total", "counter", "Files archived.", offsetof(struct tenant_metrics, archives) },
                { "tierd_releases_total", "counter", "Files released.", offsetof(struct tenant_metrics, releases) },
                { "tierd_resident_bytes", "gauge", "Bytes of file data held locally.", offsetof(struct tenant_metrics, resident) },
                { "tierd_released_bytes", "gauge", "Bytes of file data only in the store.", offsetof(struct tenant_metrics, released) },
                { "tierd_archived_bytes", "gauge", "Bytes of file data with a copy in the store.", offsetof(struct tenant_metrics, archived) },
        };
        for (size_t k = 0; k < ARRAY_SIZE(counters); k++) {
                metric_header(counters[k].name, counters[k].type, counters[k].help);
                EACH_TENANT(t) {
                        uint64_t v;
                        memcpy(&v, (char *)t + counters[k].off, sizeof(v));
                        SAMPLE(counters[k].name, t, "%" PRIu64, v);
                }
        }
        metric_header("tierd_worker_up", "gauge", "1 if the tenant's worker is running.");
        EACH_TENANT(t) SAMPLE("tierd_worker_up", t, "%d", t->worker_state && !strcmp(t->worker_state, "running"));
        metric_header("tierd_worker_restarts", "gauge", "Worker deaths in a row with no request completed.");
        EACH_TENANT(t) SAMPLE("tierd_worker_restarts", t, "%u", t->restarts);
        metric_header("tierd_in_flight_requests", "gauge", "Requests given to the worker and not answered yet.");
        EACH_TENANT(t) SAMPLE("tierd_in_flight_requests", t, "%u", t->in_flight);
        metric_header("tierd_files", "gauge", "Files by state.");
        EACH_TENANT(t) for (size_t i = 0; i < ARRAY_SIZE(file_states); i++) {
                printf("tierd_files{tenant=\"");
                label(t->name ?: "");
                printf("\",state=\"%s\"} %" PRIu64 "\n", file_states[i], t->files[i]);
        }
        metric_header("tierd_reader_wait_seconds", "histogram", "How long readers waited for their bytes.");
        EACH_TENANT(t) {
                for (size_t i = 0; i < t->n_buckets; i++) {
                        printf("tierd_reader_wait_seconds_bucket{tenant=\"");
                        label(t->name ?: "");
                        if (isinf(t->wait_bounds[i]))
                                printf("\",le=\"+Inf\"} %" PRIu64 "\n", t->wait_counts[i]);
                        else
                                printf("\",le=\"%g\"} %" PRIu64 "\n", t->wait_bounds[i], t->wait_counts[i]);
                }
                SAMPLE("tierd_reader_wait_seconds_sum", t, "%.6f", t->wait_seconds);
                SAMPLE("tierd_reader_wait_seconds_count", t, "%" PRIu64, t->n_buckets ? t->wait_counts[t->n_buckets - 1] : 0);
        }
}

int verb_metrics(sd_bus *bus, int argc, char **argv) {
        (void)argv;
        if (argc > 0)
                return verb_no_args("metrics", argc);
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        struct tenant_metrics *ts = NULL;
        size_t n = 0;
        int r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", &e,
                                   &reply, "");
        if (r < 0) {
                r = call_failed("GetManagedObjects", &e, r);
                sd_bus_error_free(&e);
                return r;
        }
        r = read_objects(reply, &ts, &n);
        if (r >= 0)
                print_metrics(ts, n);
        for (size_t i = 0; i < n; i++) {
                free(ts[i].name);
                free(ts[i].worker_state);
        }
        free(ts);
        sd_bus_message_unref(reply);
        return r < 0 ? call_failed("bad reply", NULL, r) : EXIT_OK;
}
