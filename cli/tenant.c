/* SPDX-License-Identifier: MIT */
/* tierctl tenant set NAME KEY=VALUE...: SetTenantPolicy.
 * tierctl tenant import NAME --from BACKEND [--at TIME] [--keep-setuid]: StartImport.
 * tierctl gc NAME [--dry-run]: StartCollectGarbage.
 * tierctl audit NAME [--repair]: StartAudit.
 * The last three wait for their job's TaskFinished (task.c). */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "paths.h"
#include "tierctl.h"

/* VALUE as JSON when it is JSON (numbers, true, null, [..], {..}, "..."),
 * else as a string: readahead=8M, chunk=1048576, headers='{"A": "b"}'. */
static json_object *parse_value(const char *text) {
        json_tokener *tok = json_tokener_new();
        json_object *v = NULL;

        if (tok) {
                json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
                /* With its NUL: a number is only complete once something ends it. */
                v = json_tokener_parse_ex(tok, text, (int)strlen(text) + 1);
                if (json_tokener_get_error(tok) != json_tokener_success ||
                    (size_t)json_tokener_get_parse_end(tok) < strlen(text)) {
                        json_object_put(v);
                        v = NULL;
                }
                json_tokener_free(tok);
        }
        /* json-c says null as a NULL object: keep it apart from "not JSON". */
        if (!v && strcmp(text, "null") != 0)
                v = json_object_new_string(text);
        return v;
}

/* TIME: @SECONDS (since the epoch) or YYYY-MM-DDTHH:MM:SS[Z] (UTC). */
static int parse_time(const char *text, uint64_t *usec) {
        struct tm tm = {};
        char *end;

        if (text[0] == '@') {
                errno = 0;
                unsigned long long s = strtoull(text + 1, &end, 10);
                if (errno || end == text + 1 || *end || s > UINT64_MAX / 1000000)
                        return -EINVAL;
                *usec = s * 1000000ull;
                return 0;
        }
        end = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!end || (*end && strcmp(end, "Z") != 0))
                return -EINVAL;
        time_t t = timegm(&tm);
        if (t < 0)
                return -EINVAL;
        *usec = (uint64_t)t * 1000000ull;
        return 0;
}

/* A task's end: 0 if it was done, else says how it ended. */
static int task_result(const char *verb, const char *result, const char *summary) {
        if (strcmp(result, "done") == 0)
                return EXIT_OK;
        fprintf(stderr, "tierctl: %s %s: %s\n", verb, result, summary);
        return EXIT_FAILED;
}

/* The call to METHOD with its arguments (signature SIG), for task_run. */
#define TASK_CALL(bus, m, method, sig, ...)                                                                      \
        ({                                                                                                       \
                int _r = sd_bus_message_new_method_call(bus, &(m), BUS_NAME, BUS_PATH, BUS_MANAGER, method);     \
                _r >= 0 ? sd_bus_message_append(m, sig, __VA_ARGS__) : _r;                                        \
        })

/* argv: "import" NAME and the options, in any order. */
static int tenant_import(sd_bus *bus, int argc, char **argv) {
        static const struct option options[] = {
                { "from", required_argument, NULL, 'f' },
                { "at", required_argument, NULL, 'a' },
                { "keep-setuid", no_argument, NULL, 'k' },
                {},
        };
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = NULL, *finished = NULL;
        const char *from = NULL, *summary, *result;
        uint64_t at = 0, flags = 0;
        int c, r;

        /* getopt_long wants argv[0]: "import" stands for it. */
        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":", options, NULL)) != -1) {
                if (c == 'f')
                        from = optarg;
                else if (c == 'k')
                        flags |= 1; /* CATALOG_IMPORT_KEEP_SETUID */
                else if (c == 'a') {
                        if (parse_time(optarg, &at) < 0 || at == 0) {
                                fprintf(stderr, "tierctl: --at %s: give @SECONDS or YYYY-MM-DDTHH:MM:SSZ (UTC)\n",
                                        optarg);
                                return EXIT_USAGE;
                        }
                } else
                        return option_error("tenant", argv, c);
        }
        if (argc - optind != 1 || !from) {
                fprintf(stderr, "tierctl: usage: tierctl tenant import NAME --from BACKEND [--at TIME] [--keep-setuid]\n");
                return EXIT_USAGE;
        }
        const char *name = argv[optind];
        /* A tree of 100,000 files takes seconds; a slow store, longer. */
        if ((r = TASK_CALL(bus, call, "StartImport", "sstt", name, from, at, flags)) < 0)
                return call_failed("import", NULL, r);
        if ((r = task_run(bus, "import", call, &finished, &result, &summary)) != EXIT_OK)
                return r;
        if ((r = task_result("import", result, summary)) != EXIT_OK)
                return r;
        printf("tenant %s imported: %s\n", name, summary);
        return EXIT_OK;
}

int verb_gc(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = NULL, *finished = NULL;
        const char *summary, *name, *result;
        bool dry_run = false;
        const struct verb_flag flags[] = { { "dry-run", &dry_run } };
        int r;

        if ((r = verb_flags("gc", "gc TENANT [--dry-run]", argc, argv, flags, ARRAY_SIZE(flags), 1)) != EXIT_OK)
                return r;
        name = argv[0];
        /* It lists the whole store and walks the filesystem. */
        if ((r = TASK_CALL(bus, call, "StartCollectGarbage", "sb", name, (int)dry_run)) < 0)
                return call_failed("gc", NULL, r);
        if ((r = task_run(bus, "gc", call, &finished, &result, &summary)) != EXIT_OK)
                return r;
        if ((r = task_result("gc", result, summary)) != EXIT_OK)
                return r;
        printf("tenant %s%s: %s\n", name, dry_run ? " (dry run)" : "", summary);
        return EXIT_OK;
}

int verb_audit(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = NULL, *reply = NULL;
        const char *summary, *name, *kind, *what, *detail, *result;
        bool repair = false;
        const struct verb_flag flags[] = { { "repair", &repair } };
        int r;

        if ((r = verb_flags("audit", "audit TENANT [--repair]", argc, argv, flags, ARRAY_SIZE(flags), 1)) != EXIT_OK)
                return r;
        name = argv[0];
        if ((r = TASK_CALL(bus, call, "StartAudit", "sb", name, (int)repair)) < 0)
                return call_failed("audit", NULL, r);
        if ((r = task_run(bus, "audit", call, &reply, &result, &summary)) != EXIT_OK)
                return r;
        if ((r = task_result("audit", result, summary)) != EXIT_OK)
                return r;
        if (sd_bus_message_enter_container(reply, 'a', "(sss)") < 0)
                return EXIT_FAILED;
        unsigned problems = 0;
        while ((r = sd_bus_message_read(reply, "(sss)", &kind, &what, &detail)) > 0) {
                printf("%s\t%s\t%s\n", kind, what, detail);
                problems += strcmp(kind, "unreferenced") != 0; /* those are gc's */
        }
        if (r < 0)
                return EXIT_FAILED;
        printf("tenant %s: %s\n", name, summary);
        /* Problems found (repaired or not: audit again to see what is left). */
        return problems ? EXIT_FAILED : EXIT_OK;
}

int verb_tenant(sd_bus *bus, int argc, char **argv) {
        json_object *patch;
        int r;

        if (argc >= 2 && strcmp(argv[0], "import") == 0)
                return tenant_import(bus, argc, argv);
        if (argc < 3 || strcmp(argv[0], "set") != 0) {
                fprintf(stderr, "tierctl: usage: tierctl tenant set NAME KEY=VALUE...\n"
                                "       tierctl tenant import NAME --from BACKEND [--at TIME] [--keep-setuid]\n");
                return EXIT_USAGE;
        }
        if (!(patch = json_object_new_object()))
                return EXIT_FAILED;
        for (int i = 2; i < argc; i++) {
                char *eq = strchr(argv[i], '=');
                if (!eq || eq == argv[i]) {
                        fprintf(stderr, "tierctl: '%s': expected KEY=VALUE\n", argv[i]);
                        json_object_put(patch);
                        return EXIT_USAGE;
                }
                *eq = 0;
                json_object_object_add(patch, argv[i], parse_value(eq + 1));
        }
        r = call_manager(bus, "tenant set", NULL, "SetTenantPolicy", "ss", argv[1],
                         json_object_to_json_string_ext(patch, JSON_C_TO_STRING_PLAIN));
        json_object_put(patch);
        if (r != EXIT_OK)
                return r;
        printf("tenant %s: policy written and applied\n", argv[1]);
        return EXIT_OK;
}
