/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-c/json.h>
#include <stddef.h>

#include "macro.h"

static inline void json_putp(json_object **o) {
        if (*o)
                json_object_put(*o);
}
#define _cleanup_json_ _cleanup_(json_putp)

/* json-c keeps the last of duplicate keys silently, even in strict mode.
 * Given JSON text that json-c already accepted, finds the first object key
 * that appears twice in one object. Returns 1 and the key (malloc'd, in
 * *dup) if there is one, 0 if none, -EDOM for a literal JSON does not have
 * (NaN, Infinity: json-c takes them even in strict mode), -EINVAL/-ENOMEM on
 * error. */
int json_find_duplicate_key(const char *text, size_t len, char **dup);

/* Parses text as one JSON value the strict way: json-c's strict mode
 * (no comments, trailing commas or NaN), UTF-8 checked, nothing but
 * whitespace after it, and no key twice in one object. -EINVAL: *why says
 * what is wrong (malloc'd) and *dup names a duplicate key (malloc'd) or is
 * NULL; -ENOMEM. */
int json_parse_strict(const char *text, size_t len, json_object **ret, char **why, char **dup);
