/* SPDX-License-Identifier: MIT */
#include "objkey.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hex.h"

#define LOWER_HEX "0123456789abcdef"

const char *object_kind_prefix(uint32_t kind) {
        switch (kind) {
        case PROTO_OBJECT_DATA: return "sha256/";
        case PROTO_OBJECT_MANIFEST: return "manifest/";
        case PROTO_OBJECT_JOURNAL: return OBJECT_CATALOG_PREFIX "journal/";
        case PROTO_OBJECT_SNAPSHOT: return OBJECT_CATALOG_PREFIX "snapshot/";
        case PROTO_OBJECT_TRACE: return "trace/";
        default: return NULL;
        }
}

void object_key_format(const struct proto_object *o, char key[STUB_KEY_MAX]) {
        const char *prefix = object_kind_prefix(o->kind);
        char hex[65];

        switch (o->kind) {
        case PROTO_OBJECT_DATA:
        case PROTO_OBJECT_MANIFEST:
        case PROTO_OBJECT_TRACE:
                hex_encode(o->hash, 32, hex);
                snprintf(key, STUB_KEY_MAX, "%s%s", prefix, hex);
                break;
        case PROTO_OBJECT_JOURNAL:
                snprintf(key, STUB_KEY_MAX, "%s%016llx", prefix, (unsigned long long)o->seq);
                break;
        case PROTO_OBJECT_SNAPSHOT:
                snprintf(key, STUB_KEY_MAX, "%s%016llx.%08x", prefix, (unsigned long long)o->seq, o->epoch);
                break;
        default:
                key[0] = 0;
        }
}

/* Exactly n lowercase hex digits at s, as a number (n <= 16). */
static bool parse_hex(const char *s, size_t n, uint64_t *ret) {
        uint64_t v = 0;
        if (strspn(s, LOWER_HEX) < n)
                return false;
        for (size_t i = 0; i < n; i++)
                v = v << 4 | (uint64_t)(strchr(LOWER_HEX, s[i]) - LOWER_HEX);
        *ret = v;
        return true;
}

int object_key_parse(const char *key, struct proto_object *o) {
        *o = (struct proto_object){};
        for (uint32_t kind = PROTO_OBJECT_DATA; kind <= PROTO_OBJECT_TRACE; kind++) {
                const char *prefix = object_kind_prefix(kind);
                size_t n = strlen(prefix);
                uint64_t epoch;
                if (strncmp(key, prefix, n) != 0)
                        continue;
                const char *rest = key + n;
                o->kind = kind;
                switch (kind) {
                case PROTO_OBJECT_DATA:
                case PROTO_OBJECT_MANIFEST:
                case PROTO_OBJECT_TRACE:
                        if (strlen(rest) == 64 && strspn(rest, LOWER_HEX) == 64 && hex_decode(rest, o->hash, 32) == 0)
                                return 0;
                        break;
                case PROTO_OBJECT_JOURNAL:
                        if (strlen(rest) == 16 && parse_hex(rest, 16, &o->seq))
                                return 0;
                        break;
                case PROTO_OBJECT_SNAPSHOT:
                        if (strlen(rest) == 25 && rest[16] == '.' && parse_hex(rest, 16, &o->seq) &&
                            parse_hex(rest + 17, 8, &epoch)) {
                                o->epoch = (uint32_t)epoch;
                                return 0;
                        }
                        break;
                }
                break;
        }
        *o = (struct proto_object){};
        return -EINVAL;
}
