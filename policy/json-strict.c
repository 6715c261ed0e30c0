/* SPDX-License-Identifier: MIT */
#include "json-strict.h"

#include <errno.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct scanner {
        const char *p, *end;
        unsigned depth;
};

#define MAX_DEPTH 64

static void skip_ws(struct scanner *s) {
        while (s->p < s->end && strchr(" \t\r\n", *s->p) && *s->p)
                s->p++;
}

/* Reads a string token; returns its raw bytes between the quotes (escapes
 * kept: json-c accepted the text, and two keys spelled with different
 * escapes for the same character are rare enough to compare decoded below). */
static int scan_string(struct scanner *s, char **ret) {
        const char *start;
        size_t n = 0;
        char *out;

        if (s->p >= s->end || *s->p != '"')
                return -EINVAL;
        start = ++s->p;
        while (s->p < s->end && *s->p != '"') {
                if (*s->p == '\\')
                        s->p++;
                s->p++;
        }
        if (s->p >= s->end)
                return -EINVAL;
        if (ret) {
                out = malloc((size_t)(s->p - start) + 1);
                if (!out)
                        return -ENOMEM;
                /* Decode the simple escapes so "a" and "\u0061" compare equal
                 * for ASCII; other \u escapes are compared as written. */
                for (const char *q = start; q < s->p; q++) {
                        if (*q != '\\') {
                                out[n++] = *q;
                                continue;
                        }
                        q++;
                        switch (*q) {
                        case 'n': out[n++] = '\n'; break;
                        case 't': out[n++] = '\t'; break;
                        case 'r': out[n++] = '\r'; break;
                        case 'b': out[n++] = '\b'; break;
                        case 'f': out[n++] = '\f'; break;
                        case 'u': {
                                char hex[5] = {};
                                memcpy(hex, q + 1, 4);
                                long c = strtol(hex, NULL, 16);
                                if (c > 0 && c < 0x80) {
                                        out[n++] = (char)c;
                                        q += 4;
                                } else {
                                        out[n++] = '\\';
                                        out[n++] = 'u';
                                }
                                break;
                        }
                        default: out[n++] = *q; break;
                        }
                }
                out[n] = 0;
                *ret = out;
        }
        s->p++;
        return 0;
}

static int scan_value(struct scanner *s, char **dup);

static bool literal_valid(const char *p, size_t n) {
        size_t i = 0;
        if ((n == 4 && !memcmp(p, "true", 4)) || (n == 5 && !memcmp(p, "false", 5)) || (n == 4 && !memcmp(p, "null", 4)))
                return true;
        /* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
        if (i < n && p[i] == '-')
                i++;
        if (i >= n || p[i] < '0' || p[i] > '9')
                return false;
        if (p[i] == '0')
                i++;
        else
                while (i < n && p[i] >= '0' && p[i] <= '9')
                        i++;
        if (i < n && p[i] == '.') {
                if (++i >= n || p[i] < '0' || p[i] > '9')
                        return false;
                while (i < n && p[i] >= '0' && p[i] <= '9')
                        i++;
        }
        if (i < n && (p[i] == 'e' || p[i] == 'E')) {
                if (++i < n && (p[i] == '+' || p[i] == '-'))
                        i++;
                if (i >= n || p[i] < '0' || p[i] > '9')
                        return false;
                while (i < n && p[i] >= '0' && p[i] <= '9')
                        i++;
        }
        return i == n;
}

static int scan_object(struct scanner *s, char **dup) {
        char **keys = NULL;
        size_t n = 0;
        int r = 0;

        s->p++; /* '{' */
        skip_ws(s);
        if (s->p < s->end && *s->p == '}') {
                s->p++;
                return 0;
        }
        for (;;) {
                char *key = NULL;
                skip_ws(s);
                r = scan_string(s, &key);
                if (r < 0)
                        break;
                for (size_t i = 0; i < n; i++)
                        if (strcmp(keys[i], key) == 0) {
                                *dup = key;
                                r = 1;
                                goto out;
                        }
                char **k = realloc(keys, (n + 1) * sizeof(*keys));
                if (!k) {
                        free(key);
                        r = -ENOMEM;
                        break;
                }
                keys = k;
                keys[n++] = key;
                skip_ws(s);
                if (s->p >= s->end || *s->p != ':') {
                        r = -EINVAL;
                        break;
                }
                s->p++;
                r = scan_value(s, dup);
                if (r != 0)
                        break;
                skip_ws(s);
                if (s->p < s->end && *s->p == ',') {
                        s->p++;
                        continue;
                }
                if (s->p < s->end && *s->p == '}') {
                        s->p++;
                        break;
                }
                r = -EINVAL;
                break;
        }
out:
        for (size_t i = 0; i < n; i++)
                free(keys[i]);
        free(keys);
        return r;
}

static int scan_array(struct scanner *s, char **dup) {
        s->p++; /* '[' */
        skip_ws(s);
        if (s->p < s->end && *s->p == ']') {
                s->p++;
                return 0;
        }
        for (;;) {
                int r = scan_value(s, dup);
                if (r != 0)
                        return r;
                skip_ws(s);
                if (s->p < s->end && *s->p == ',') {
                        s->p++;
                        continue;
                }
                if (s->p < s->end && *s->p == ']') {
                        s->p++;
                        return 0;
                }
                return -EINVAL;
        }
}

static int scan_value(struct scanner *s, char **dup) {
        int r;
        skip_ws(s);
        if (s->p >= s->end)
                return -EINVAL;
        switch (*s->p) {
        case '{':
        case '[':
                if (++s->depth > MAX_DEPTH)
                        return -EINVAL;
                r = *s->p == '{' ? scan_object(s, dup) : scan_array(s, dup);
                s->depth--;
                return r;
        case '"':
                return scan_string(s, NULL);
        default: {
                /* number, true, false, null: up to the next delimiter. json-c
                 * takes NaN and Infinity even in strict mode: JSON does not. */
                const char *start = s->p;
                while (s->p < s->end && !strchr(",]} \t\r\n", *s->p) && *s->p)
                        s->p++;
                return literal_valid(start, (size_t)(s->p - start)) ? 0 : -EDOM;
        }
        }
}

int json_find_duplicate_key(const char *text, size_t len, char **dup) {
        struct scanner s = { .p = text, .end = text + len };
        *dup = NULL;
        return scan_value(&s, dup);
}

static int say(char **why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int say(char **why, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = vasprintf(why, fmt, ap);
        va_end(ap);
        if (r < 0) {
                *why = NULL;
                return -ENOMEM;
        }
        return -EINVAL;
}

int json_parse_strict(const char *text, size_t len, json_object **ret, char **why, char **dup) {
        json_tokener *tok = json_tokener_new();
        json_object *root;
        int r;

        *why = *dup = NULL;
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        root = json_tokener_parse_ex(tok, text, (int)len);
        enum json_tokener_error e = json_tokener_get_error(tok);
        size_t at = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        if (!root || e != json_tokener_success) {
                json_object_put(root);
                return say(why, "not valid JSON (strict: no comments, trailing commas or NaN): %s near byte %zu",
                           e == json_tokener_continue ? "unexpected end of input" : json_tokener_error_desc(e), at);
        }
        /* Trailing content after a complete value: only whitespace is fine. */
        for (size_t i = at; i < len; i++)
                if (!strchr(" \t\r\n", text[i]) || !text[i]) {
                        json_object_put(root);
                        return say(why, "not valid JSON: content after the top-level value at byte %zu", i);
                }
        r = json_find_duplicate_key(text, len, dup);
        if (r != 0)
                json_object_put(root);
        if (r == -EDOM)
                return say(why, "not valid JSON (strict): NaN and Infinity are not JSON numbers");
        if (r < 0)
                return r == -ENOMEM ? r : say(why, "could not scan for duplicate keys");
        if (r > 0)
                return say(why, "appears twice in one object (JSON allows it, tierd does not: which one was meant?)");
        *ret = root;
        return 0;
}
