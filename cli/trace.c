/* SPDX-License-Identifier: MIT */
/*
 * tierctl trace start TENANT NAME, tierctl trace show TENANT NAME [--json]:
 * access traces (supervisor/traces/, dbus/tracebus.c).
 */
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "paths.h"
#include "tierctl.h"

static int show(sd_bus *bus, const char *tenant, const char *name, bool json) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(json_putp) json_object *o = NULL, *files = NULL;
        uint64_t bytes, fbytes, ranges;
        uint32_t runs, seen;
        const char *path;
        int r = call_manager(bus, "trace show", &reply, "GetTrace", "ss", tenant, name);
        if (r != EXIT_OK)
                return r;
        if (sd_bus_message_read(reply, "ut", &runs, &bytes) < 0 ||
            sd_bus_message_enter_container(reply, 'a', "(sttu)") < 0)
                return EXIT_FAILED;
        if (json && (!(o = json_object_new_object()) || !(files = json_object_new_array())))
                return EXIT_FAILED;
        if (!json)
                printf("trace %s of tenant %s: %u runs, %llu bytes\n%12s %6s %5s  %s\n", name, tenant, runs,
                       (unsigned long long)bytes, "BYTES", "RANGES", "RUNS", "PATH");
        while ((r = sd_bus_message_read(reply, "(sttu)", &path, &fbytes, &ranges, &seen)) > 0) {
                if (!json) {
                        printf("%12llu %6llu %5u  %s\n", (unsigned long long)fbytes, (unsigned long long)ranges, seen,
                               path);
                        continue;
                }
                json_object *f = json_array_new_object(files);
                if (!f)
                        return EXIT_FAILED;
                json_object_object_add(f, "path", json_object_new_string(path));
                json_object_object_add(f, "bytes", json_object_new_int64((int64_t)fbytes));
                json_object_object_add(f, "ranges", json_object_new_int64((int64_t)ranges));
                json_object_object_add(f, "runs", json_object_new_int64(seen));
        }
        if (r < 0)
                return EXIT_FAILED;
        if (json) {
                json_object_object_add(o, "name", json_object_new_string(name));
                json_object_object_add(o, "tenant", json_object_new_string(tenant));
                json_object_object_add(o, "runs", json_object_new_int64(runs));
                json_object_object_add(o, "bytes", json_object_new_int64((int64_t)bytes));
                json_object_object_add(o, "files", json_object_get(files));
                json_print(o);
        }
        return EXIT_OK;
}

int verb_trace(sd_bus *bus, int argc, char **argv) {
        bool json = false;
        const struct verb_flag flags[] = { { "json", &json } };
        int r;

        if (argc == 3 && strcmp(argv[0], "start") == 0) {
                r = call_manager(bus, "trace start", NULL, "StartTrace", "ss", argv[1], argv[2]);
                if (r != EXIT_OK)
                        return r;
                printf("trace %s: fetched ahead of tenant %s's host readers, and recording\n", argv[2], argv[1]);
                return EXIT_OK;
        }
        if (argc >= 3 && strcmp(argv[0], "show") == 0) {
                if ((r = verb_flags("trace", "trace show TENANT NAME [--json]", argc - 3, argv + 3, flags,
                                    ARRAY_SIZE(flags), 0)) != EXIT_OK)
                        return r;
                return show(bus, argv[1], argv[2], json);
        }
        fprintf(stderr, "tierctl: usage: tierctl trace start TENANT NAME | trace show TENANT NAME [--json]\n");
        return EXIT_USAGE;
}
