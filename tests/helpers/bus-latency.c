/* SPDX-License-Identifier: MIT */
/*
 * Calls a D-Bus method on the system bus COUNT times, one call after the
 * other on one connection (after one untimed call, which must succeed), and
 * prints the p50 and p99 of the round trips in microseconds. Each ARG is
 * passed as a string ("s"); any error ends it with status 1. For benchmarks
 * (busctl would spawn a process per call).
 *   bus-latency COUNT DESTINATION PATH INTERFACE METHOD [ARG...]
 * e.g. bus-latency 2000 org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus GetId
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

/* The nearest-rank percentile of sorted values. */
static double percentile(const double *v, long n, int p) {
        long rank = (n * p + 99) / 100;
        return v[rank > 0 ? rank - 1 : 0];
}

static int call(sd_bus *bus, char **argv, int nargs) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *m = NULL, *reply = NULL;
        int r = sd_bus_message_new_method_call(bus, &m, argv[0], argv[1], argv[2], argv[3]);

        for (int i = 0; r >= 0 && i < nargs; i++)
                r = sd_bus_message_append(m, "s", argv[4 + i]);
        if (r >= 0)
                r = sd_bus_call(bus, m, 0, &error, &reply);
        if (r < 0)
                fprintf(stderr, "bus-latency: %s.%s: %s\n", argv[2], argv[3],
                        error.message ? error.message : strerror(-r));
        sd_bus_error_free(&error);
        sd_bus_message_unref(reply);
        sd_bus_message_unref(m);
        return r;
}

int main(int argc, char **argv) {
        struct timespec a, b;
        sd_bus *bus = NULL;
        long count;
        double *v;

        if (argc < 6 || (count = atol(argv[1])) <= 0) {
                fprintf(stderr, "usage: bus-latency COUNT DESTINATION PATH INTERFACE METHOD [ARG...]\n");
                return 2;
        }
        if (!(v = malloc(sizeof(double) * (size_t)count)))
                return 1;
        int r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "bus-latency: system bus: %s\n", strerror(-r));
                return 1;
        }
        if (call(bus, argv + 2, argc - 6) < 0)
                return 1;
        for (long i = 0; i < count; i++) {
                clock_gettime(CLOCK_MONOTONIC, &a);
                if (call(bus, argv + 2, argc - 6) < 0)
                        return 1;
                clock_gettime(CLOCK_MONOTONIC, &b);
                v[i] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
        }
        qsort(v, (size_t)count, sizeof(double), cmp_double);
        printf("%.1f %.1f\n", percentile(v, count, 50), percentile(v, count, 99));
        sd_bus_flush_close_unref(bus);
        free(v);
        return 0;
}
