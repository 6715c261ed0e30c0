/* SPDX-License-Identifier: MIT */
/*
 * tierctl jobs [--json]: what tierd's jobs are doing (ListJobs), one line
 * each, or one JSON array.
 * tierctl cancel JOB: cancels one (CancelJob), by number or object path.
 */
#include <errno.h>
#include <json-c/json.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "paths.h"
#include "tierctl.h"

int verb_jobs(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(json_putp) json_object *list = NULL;
        const char *path, *operation;
        uint32_t id, total, done, failed;
        bool json = false;
        const struct verb_flag flags[] = { { "json", &json } };
        int r;

        if ((r = verb_flags("jobs", "jobs [--json]", argc, argv, flags, ARRAY_SIZE(flags), 0)) != EXIT_OK)
                return r;
        r = call_manager(bus, "jobs", &reply, "ListJobs", "");
        if (r != EXIT_OK)
                return r;
        if ((r = sd_bus_message_enter_container(reply, 'a', "(uosuuu)")) < 0)
                return call_failed("bad reply", NULL, r);
        if (json && !(list = json_object_new_array()))
                return EXIT_FAILED;
        if (!json)
                printf("%-6s %-14s %10s %10s %8s  %s\n", "JOB", "OPERATION", "DONE", "TOTAL", "FAILED", "OBJECT");
        while ((r = sd_bus_message_read(reply, "(uosuuu)", &id, &path, &operation, &total, &done, &failed)) > 0) {
                if (!json) {
                        printf("%-6" PRIu32 " %-14s %10" PRIu32 " %10" PRIu32 " %8" PRIu32 "  %s\n", id, operation, done,
                               total, failed, path);
                        continue;
                }
                json_object *o = json_array_new_object(list);
                if (!o)
                        return EXIT_FAILED;
                json_object_object_add(o, "job", json_object_new_int64(id));
                json_object_object_add(o, "operation", json_object_new_string(operation));
                json_object_object_add(o, "done", json_object_new_int64(done));
                json_object_object_add(o, "total", json_object_new_int64(total));
                json_object_object_add(o, "failed", json_object_new_int64(failed));
                json_object_object_add(o, "object", json_object_new_string(path));
        }
        if (r < 0)
                return call_failed("bad reply", NULL, r);
        if (json)
                json_print(list);
        return EXIT_OK;
}

int verb_cancel(sd_bus *bus, int argc, char **argv) {
        char path[64];
        char *end;
        int r;

        if (argc != 1) {
                fprintf(stderr, "tierctl: usage: tierctl cancel JOB (its number, or its object path)\n");
                return EXIT_USAGE;
        }
        errno = 0;
        unsigned long id = strtoul(argv[0], &end, 10);
        if (argv[0][0] == '/')
                snprintf(path, sizeof(path), "%.63s", argv[0]);
        else if (!errno && end != argv[0] && !*end && id > 0 && id <= UINT32_MAX)
                snprintf(path, sizeof(path), "%s/%lu", BUS_PATH "/job", id);
        else {
                fprintf(stderr, "tierctl: cancel: '%s' is not a job number or object path\n", argv[0]);
                return EXIT_USAGE;
        }
        r = call_manager(bus, "cancel", NULL, "CancelJob", "o", path);
        if (r != EXIT_OK)
                return r;
        printf("job %s canceled (what runs finishes; the rest does not start)\n", path);
        return EXIT_OK;
}
