/* SPDX-License-Identifier: MIT */
/* tierctl tenant set NAME KEY=VALUE...: SetTenantPolicy. */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

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

int verb_tenant(sd_bus *bus, int argc, char **argv) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        json_object *patch;
        int r;

        if (argc < 3 || strcmp(argv[0], "set") != 0) {
                fprintf(stderr, "tierctl: usage: tierctl tenant set NAME KEY=VALUE...\n");
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
        r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_MANAGER, "SetTenantPolicy", &e, NULL, "ss", argv[1],
                               json_object_to_json_string_ext(patch, JSON_C_TO_STRING_PLAIN));
        json_object_put(patch);
        if (r < 0) {
                r = call_failed("tenant set", &e, r);
                sd_bus_error_free(&e);
                return r;
        }
        printf("tenant %s: policy written and applied\n", argv[1]);
        return EXIT_OK;
}
