/* SPDX-License-Identifier: MIT */
/*
 * tierctl metrics: the Prometheus text format (0.0.4), without timestamps
 * (node_exporter's textfile collector refuses them), on stdout or, with
 * --listen, over HTTP (cli/metricsd.c). One GetManagedObjects call gives
 * every tenant and container; reader waits are histograms, which can be
 * aggregated across nodes (a percentile cannot).
 */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "tierctl.h"

#define BUS_CONTAINER "org.tierd1.Container"
#define MAX_BUCKETS 32

/* A tenant or a container: what its object's properties say. */
struct object_metrics {
        bool container;
        char *name, *tenant, *worker_state; /* name: the tenant's, or the container's Id */
        uint32_t restarts, in_flight;
        uint64_t fills, fetched, fill_errors, archives, releases, auto_archives, quota_releases, quota_denials;
        uint64_t reads_denied, restarts_total, resident, released, archived, quota, used;
        uint64_t prefetched, prefetch_hits, prefetch_wasted, hydrated;
        uint64_t files[5];
        double wait_bounds[MAX_BUCKETS];
        uint64_t wait_counts[MAX_BUCKETS];
        size_t n_buckets;
        bool bad_buckets;
        double wait_seconds;
};

static const char *const file_states[] = { "resident", "archived", "partial", "released", "dirty" };

#define FIELD(prop, type, field) { prop, type, offsetof(struct object_metrics, field) }
/* Properties read as they are; FilesByState and ReaderWaitBuckets have
 * readers of their own. */
static const struct { const char *name, *type; size_t off; } scalars[] = {
        FIELD("Name", "s", name), FIELD("Id", "s", name), FIELD("Tenant", "s", tenant),
        FIELD("WorkerState", "s", worker_state), FIELD("WorkerRestarts", "u", restarts),
        FIELD("InFlightRequests", "u", in_flight), FIELD("Fills", "t", fills), FIELD("BytesFetched", "t", fetched),
        FIELD("FillErrors", "t", fill_errors), FIELD("Archives", "t", archives), FIELD("Releases", "t", releases),
        FIELD("AutoArchives", "t", auto_archives), FIELD("QuotaReleases", "t", quota_releases),
        FIELD("QuotaDenials", "t", quota_denials), FIELD("ReadsDenied", "t", reads_denied),
        FIELD("WorkerRestartsTotal", "t", restarts_total), FIELD("ResidentBytes", "t", resident),
        FIELD("ReleasedBytes", "t", released), FIELD("ArchivedBytes", "t", archived), FIELD("Quota", "t", quota),
        FIELD("UsedBytes", "t", used), FIELD("ReaderWaitSeconds", "d", wait_seconds),
        FIELD("PrefetchedBytes", "t", prefetched), FIELD("PrefetchHits", "t", prefetch_hits),
        FIELD("PrefetchWastedBytes", "t", prefetch_wasted), FIELD("HydratedFiles", "t", hydrated),
};

/* 0 once read. */
static int read_scalar(sd_bus_message *m, const char *type, void *dst) {
        const char *s;
        int r;
        if (strcmp(type, "s") != 0)
                return (r = sd_bus_message_read_basic(m, type[0], dst)) < 0 ? r : 0;
        if ((r = sd_bus_message_read(m, "s", &s)) < 0)
                return r;
        free(*(char **)dst);
        return (*(char **)dst = strdup(s)) ? 0 : -ENOMEM;
}

static int read_files_by_state(sd_bus_message *m, struct object_metrics *o) {
        const char *state;
        uint64_t n;
        int r = sd_bus_message_enter_container(m, 'a', "{st}");
        while (r >= 0 && (r = sd_bus_message_read(m, "{st}", &state, &n)) > 0)
                for (size_t i = 0; i < ARRAY_SIZE(file_states); i++)
                        if (strcmp(state, file_states[i]) == 0)
                                o->files[i] = n;
        return r < 0 ? r : sd_bus_message_exit_container(m);
}

static int read_wait_buckets(sd_bus_message *m, struct object_metrics *o) {
        double b;
        uint64_t n;
        int r = sd_bus_message_enter_container(m, 'a', "(dt)");
        /* Increasing bounds, the last +Inf: anything else is no histogram
         * Prometheus takes, and none is printed. */
        while (r >= 0 && (r = sd_bus_message_read(m, "(dt)", &b, &n)) > 0) {
                if (o->n_buckets >= MAX_BUCKETS || isnan(b) || (o->n_buckets && b <= o->wait_bounds[o->n_buckets - 1]))
                        o->bad_buckets = true;
                else {
                        o->wait_bounds[o->n_buckets] = b;
                        o->wait_counts[o->n_buckets++] = n;
                }
        }
        if (o->n_buckets && !(isinf(o->wait_bounds[o->n_buckets - 1]) && o->wait_bounds[o->n_buckets - 1] > 0))
                o->bad_buckets = true;
        return r < 0 ? r : sd_bus_message_exit_container(m);
}

/* One {sv}; a property of a type we do not expect is skipped. */
static int read_property(sd_bus_message *m, struct object_metrics *o) {
        const char *name, *contents;
        char type;
        int r = sd_bus_message_read(m, "s", &name);

        if (r < 0 || (r = sd_bus_message_peek_type(m, &type, &contents)) < 0 ||
            (r = sd_bus_message_enter_container(m, 'v', contents)) < 0)
                return r;
        r = 1;
        for (size_t i = 0; r > 0 && i < ARRAY_SIZE(scalars); i++)
                if (strcmp(name, scalars[i].name) == 0 && strcmp(contents, scalars[i].type) == 0)
                        r = read_scalar(m, contents, (char *)o + scalars[i].off);
        if (r > 0 && strcmp(name, "FilesByState") == 0 && strcmp(contents, "a{st}") == 0)
                r = read_files_by_state(m, o);
        else if (r > 0 && strcmp(name, "ReaderWaitBuckets") == 0 && strcmp(contents, "a(dt)") == 0)
                r = read_wait_buckets(m, o);
        else if (r > 0)
                r = sd_bus_message_skip(m, contents);
        return r < 0 ? r : sd_bus_message_exit_container(m);
}

static int read_interface(sd_bus_message *m, struct metrics *ms) {
        const char *iface;
        int r = sd_bus_message_read(m, "s", &iface);
        if (r < 0)
                return r;
        bool container = strcmp(iface, BUS_CONTAINER) == 0;
        if (!container && strcmp(iface, BUS_TENANT) != 0)
                return sd_bus_message_skip(m, "a{sv}");
        struct object_metrics *v = realloc(ms->objects, (ms->n + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        ms->objects = v;
        struct object_metrics *o = &v[ms->n++];
        *o = (struct object_metrics){ .container = container };
        if ((r = sd_bus_message_enter_container(m, 'a', "{sv}")) < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0)
                if ((r = read_property(m, o)) < 0 || (r = sd_bus_message_exit_container(m)) < 0)
                        return r;
        return r < 0 ? r : sd_bus_message_exit_container(m);
}

/* a{oa{sa{sv}}}: the tenants' and containers' properties. */
static int read_objects(sd_bus_message *m, struct metrics *ms) {
        int r = sd_bus_message_enter_container(m, 'a', "{oa{sa{sv}}}");
        while (r >= 0 && (r = sd_bus_message_enter_container(m, 'e', "oa{sa{sv}}")) > 0) {
                const char *path;
                if ((r = sd_bus_message_read(m, "o", &path)) < 0 ||
                    (r = sd_bus_message_enter_container(m, 'a', "{sa{sv}}")) < 0)
                        return r;
                while ((r = sd_bus_message_enter_container(m, 'e', "sa{sv}")) > 0)
                        if ((r = read_interface(m, ms)) < 0 || (r = sd_bus_message_exit_container(m)) < 0)
                                return r;
                if (r < 0 || (r = sd_bus_message_exit_container(m)) < 0 || (r = sd_bus_message_exit_container(m)) < 0)
                        return r;
        }
        return r;
}

void metrics_free(struct metrics *ms) {
        for (size_t i = 0; i < ms->n; i++) {
                free(ms->objects[i].name);
                free(ms->objects[i].tenant);
                free(ms->objects[i].worker_state);
        }
        free(ms->objects);
        free(ms->version);
        *ms = (struct metrics){};
}

int metrics_read(sd_bus *bus, struct metrics *ms, sd_bus_error *e) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error ve = SD_BUS_ERROR_NULL;
        *ms = (struct metrics){};
        int r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects",
                                   e, &reply, "");
        if (r >= 0)
                r = read_objects(reply, ms);
        /* tierd answered: an older one without Version is up all the same. */
        if (r >= 0 && sd_bus_get_property_string(bus, BUS_NAME, BUS_PATH, BUS_MANAGER, "Version", &ve, &ms->version) < 0)
                ms->version = strdup("unknown");
        sd_bus_error_free(&ve);
        if (r >= 0 && !ms->version)
                r = -ENOMEM;
        if (r < 0)
                metrics_free(ms);
        return r;
}

/* Label values: backslash, double quote and newline escaped. */
static void label(FILE *f, const char *name, const char *s) {
        fprintf(f, "%s=\"", name);
        for (s = s ?: ""; *s; s++)
                if (*s == '\\' || *s == '"')
                        fprintf(f, "\\%c", *s);
                else if (*s == '\n')
                        fputs("\\n", f);
                else
                        fputc(*s, f);
        fputc('"', f);
}

/* name{tenant="..."[,container="..."][,extra] */
static void sample_start(FILE *f, const char *metric, const struct object_metrics *o) {
        fprintf(f, "%s{", metric);
        label(f, "tenant", o->container ? o->tenant : o->name);
        if (o->container) {
                fputc(',', f);
                label(f, "container", o->name);
        }
}

static void header(FILE *f, const char *name, const char *type, const char *help) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

#define EACH(o, ms, want_container) \
        for (const struct object_metrics *o = (ms)->objects; o < (ms)->objects + (ms)->n; o++) \
                if (o->container == (want_container))

static const struct counter {
        const char *name, *type, *help;
        size_t off;
        bool container; /* also a tierd_container_* twin */
} counters[] = {
        { "fills_total", "counter", "Ranges filled from the store.", offsetof(struct object_metrics, fills), true },
        { "fetched_bytes_total", "counter", "Bytes filled from the store.", offsetof(struct object_metrics, fetched),
          true },
        { "fill_errors_total", "counter", "Fills and verifications that failed.",
          offsetof(struct object_metrics, fill_errors), true },
        { "worker_restarts_total", "counter", "Worker deaths not of tierd's doing.",
          offsetof(struct object_metrics, restarts_total), true },
        { "archives_total", "counter", "Files archived.", offsetof(struct object_metrics, archives), false },
        { "releases_total", "counter", "Files released.", offsetof(struct object_metrics, releases), false },
        { "auto_archives_total", "counter", "Files archived in the background (archive_after).",
          offsetof(struct object_metrics, auto_archives), false },
        { "quota_releases_total", "counter", "Files released by the policy engine (quota, high watermark).",
          offsetof(struct object_metrics, quota_releases), false },
        { "quota_denials_total", "counter", "Fills denied with EDQUOT.", offsetof(struct object_metrics, quota_denials),
          false },
        { "reads_denied_total", "counter", "Readers answered with an error instead of their bytes.",
          offsetof(struct object_metrics, reads_denied), false },
        { "prefetched_bytes_total", "counter", "Bytes fetched ahead of readers by access traces.",
          offsetof(struct object_metrics, prefetched), true },
        { "prefetch_hits_total", "counter", "Reads a recording trace heard that found their bytes here.",
          offsetof(struct object_metrics, prefetch_hits), true },
        { "prefetch_wasted_bytes_total", "counter", "Bytes fetched ahead in files the run then did not read.",
          offsetof(struct object_metrics, prefetch_wasted), true },
        { "hydrated_files_total", "counter", "Files read in part, then fetched whole (\"restore\": \"progressive\").",
          offsetof(struct object_metrics, hydrated), false },
        { "resident_bytes", "gauge", "Bytes of file data held locally.", offsetof(struct object_metrics, resident),
          false },
        { "released_bytes", "gauge", "Bytes of file data only in the store.", offsetof(struct object_metrics, released),
          false },
        { "archived_bytes", "gauge", "Bytes of file data with a copy in the store.",
          offsetof(struct object_metrics, archived), false },
        { "quota_bytes", "gauge", "The tenant's quota (0: none).", offsetof(struct object_metrics, quota), false },
        { "used_bytes", "gauge", "Bytes held locally by tierd's accounting (with quota or archive_after).",
          offsetof(struct object_metrics, used), false },
};

static void print_counters(FILE *f, const struct metrics *ms, bool containers) {
        char name[96];
        for (size_t k = 0; k < ARRAY_SIZE(counters); k++) {
                if (containers && !counters[k].container)
                        continue;
                snprintf(name, sizeof(name), "tierd_%s%s", containers ? "container_" : "", counters[k].name);
                header(f, name, counters[k].type, counters[k].help);
                EACH(o, ms, containers) {
                        uint64_t v;
                        memcpy(&v, (const char *)o + counters[k].off, sizeof(v));
                        sample_start(f, name, o);
                        fprintf(f, "} %" PRIu64 "\n", v);
                }
        }
}

static void print_worker(FILE *f, const struct metrics *ms, bool containers) {
        const char *up = containers ? "tierd_container_worker_up" : "tierd_worker_up";
        const char *in_flight = containers ? "tierd_container_in_flight_requests" : "tierd_in_flight_requests";
        header(f, up, "gauge", "1 if the worker is running.");
        EACH(o, ms, containers) {
                sample_start(f, up, o);
                fprintf(f, "} %d\n", o->worker_state && strcmp(o->worker_state, "running") == 0);
        }
        header(f, in_flight, "gauge", "Requests given to the worker and not answered yet.");
        EACH(o, ms, containers) {
                sample_start(f, in_flight, o);
                fprintf(f, "} %" PRIu32 "\n", o->in_flight);
        }
}

static void print_waits(FILE *f, const struct metrics *ms, bool containers) {
        const char *name = containers ? "tierd_container_reader_wait_seconds" : "tierd_reader_wait_seconds";
        char metric[96];
        header(f, name, "histogram", "How long readers waited for their bytes.");
        EACH(o, ms, containers) {
                if (o->bad_buckets || !o->n_buckets)
                        continue;
                snprintf(metric, sizeof(metric), "%s_bucket", name);
                for (size_t i = 0; i < o->n_buckets; i++) {
                        sample_start(f, metric, o);
                        if (isinf(o->wait_bounds[i]))
                                fprintf(f, ",le=\"+Inf\"} %" PRIu64 "\n", o->wait_counts[i]);
                        else
                                fprintf(f, ",le=\"%g\"} %" PRIu64 "\n", o->wait_bounds[i], o->wait_counts[i]);
                }
                snprintf(metric, sizeof(metric), "%s_sum", name);
                sample_start(f, metric, o);
                fprintf(f, "} %.6f\n", o->wait_seconds);
                snprintf(metric, sizeof(metric), "%s_count", name);
                sample_start(f, metric, o);
                fprintf(f, "} %" PRIu64 "\n", o->wait_counts[o->n_buckets - 1]);
        }
}

void metrics_print(FILE *f, const struct metrics *ms) {
        header(f, "tierd_up", "gauge", "1 if tierd answered on the bus.");
        fprintf(f, "tierd_up %d\n", ms->version != NULL);
        if (!ms->version)
                return;
        header(f, "tierd_build_info", "gauge", "tierd's version, as a label.");
        fputs("tierd_build_info{", f);
        label(f, "version", ms->version);
        fputs("} 1\n", f);
        print_counters(f, ms, false);
        print_worker(f, ms, false);
        header(f, "tierd_worker_restarts", "gauge", "Worker deaths in a row with no request completed.");
        EACH(o, ms, false) {
                sample_start(f, "tierd_worker_restarts", o);
                fprintf(f, "} %" PRIu32 "\n", o->restarts);
        }
        header(f, "tierd_files", "gauge", "Files by state.");
        EACH(o, ms, false)
        for (size_t i = 0; i < ARRAY_SIZE(file_states); i++) {
                sample_start(f, "tierd_files", o);
                fprintf(f, ",state=\"%s\"} %" PRIu64 "\n", file_states[i], o->files[i]);
        }
        print_waits(f, ms, false);
        print_counters(f, ms, true);
        print_worker(f, ms, true);
        print_waits(f, ms, true);
}

int verb_metrics(sd_bus *unused, int argc, char **argv) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        (void)unused;
        if (argc >= 1 && strcmp(argv[0], "--listen") == 0) {
                if (argc != 2) {
                        fprintf(stderr, "tierctl metrics: --listen takes one ADDRESS (HOST:PORT, [V6]:PORT or :PORT)\n");
                        return EXIT_USAGE;
                }
                return metrics_serve(argv[1]);
        }
        if (argc > 0)
                return verb_no_args("metrics", argc);
        sd_bus_error e = SD_BUS_ERROR_NULL;
        struct metrics ms;
        int r = sd_bus_open_system(&bus);
        if (r < 0)
                return call_failed("cannot connect to the system bus", NULL, r);
        r = metrics_read(bus, &ms, &e);
        if (r < 0) {
                r = call_failed("GetManagedObjects", &e, r);
                sd_bus_error_free(&e);
                return r;
        }
        metrics_print(stdout, &ms);
        metrics_free(&ms);
        return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAILED;
}
