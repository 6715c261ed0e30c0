/* SPDX-License-Identifier: MIT */
/*
 * The policy's value readers and checks: each value is checked where it
 * is read, and a wrong one names its file, tenant and key.
 */
#include "policyvalue.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "policy.h"
#include "size.h"
#include "url.h"

void policy_say(struct parse_ctx *c, const char *tenant, const char *key, const char *fmt, ...) {
        char what[512], where[256] = "";
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        if (tenant)
                snprintf(where, sizeof(where), " tenant '%s':", tenant);
        if (key)
                snprintf(where + strlen(where), sizeof(where) - strlen(where), " key '%s':", key);
        if (c->error && asprintf(c->error, "%s:%s %s", c->origin, where, what) < 0)
                *c->error = NULL;
}

static bool key_known(const char *key, const char *const *keys, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(key, keys[i]) == 0)
                        return true;
        return false;
}

int policy_check_keys(struct parse_ctx *c, json_object *o, const char *tenant, const char *const *keys, size_t n) {
        json_object_object_foreach(o, key, val) {
                (void)val;
                if (!key_known(key, keys, n))
                        return policy_fail(c, tenant, key, "unknown key");
        }
        return 0;
}

int policy_get_string(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, const char **ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return policy_fail(c, tenant, key, "must be a string");
        *ret = json_object_get_string(v);
        return 1;
}

/* Sizes are strings with units ("1M") or plain non-negative integers. */
int policy_get_size(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, uint64_t *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (json_object_is_type(v, json_type_int)) {
                int64_t i = json_object_get_int64(v);
                if (i < 0 || (i == INT64_MAX && errno == ERANGE))
                        return policy_fail(c, tenant, key, "must be a non-negative size");
                *ret = (uint64_t)i;
                return 1;
        }
        if (!json_object_is_type(v, json_type_string))
                return policy_fail(c, tenant, key, "must be a size such as \"1M\" or an integer");
        if (size_parse(json_object_get_string(v), ret) < 0)
                return policy_fail(c, tenant, key, "'%s' is not a size (use e.g. 4096, \"512K\", \"1M\", \"10G\")",
                            json_object_get_string(v));
        return 1;
}

int policy_check_abs_path(struct parse_ctx *c, const char *tenant, const char *key, const char *p) {
        if (p[0] != '/')
                return policy_fail(c, tenant, key, "'%s' must be an absolute path", p);
        if (strlen(p) >= 4096)
                return policy_fail(c, tenant, key, "path too long");
        if (strcmp(p, "/") == 0)
                return policy_fail(c, tenant, key, "must not be /");
        for (const char *s = p; *s; s++) {
                if ((unsigned char)*s < 0x20)
                        return policy_fail(c, tenant, key, "control character in path");
                if (s[0] == '/' && (s[1] == '/' || s[1] == 0))
                        return policy_fail(c, tenant, key, "'%s' must be normalized (no '//' or trailing '/')", p);
                if (s[0] == '/' && s[1] == '.' && (s[2] == '/' || s[2] == 0 || (s[2] == '.' && (s[3] == '/' || s[3] == 0))))
                        return policy_fail(c, tenant, key, "'%s' must be normalized (no '.' or '..')", p);
        }
        return 0;
}

bool policy_path_is_under(const char *a, const char *b) {
        if (!a || !b)
                return false;
        size_t n = strlen(b);
        return strncmp(a, b, n) == 0 && (a[n] == '/' || a[n] == 0);
}


int policy_get_bool(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, bool *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_boolean))
                return policy_fail(c, tenant, key, "must be true or false");
        *ret = json_object_get_boolean(v);
        return 0;
}

int policy_get_fraction(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, double *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
                return policy_fail(c, tenant, key, "must be a number between 0 and 1, such as 0.9");
        *ret = json_object_get_double(v);
        if (!(*ret > 0 && *ret <= 1))
                return policy_fail(c, tenant, key, "%g is not a fraction in (0, 1]", *ret);
        return 1;
}

int policy_get_fraction_or_zero(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, double *ret) {
        json_object *v;
        if (json_object_object_get_ex(o, key, &v) &&
            (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)) &&
            json_object_get_double(v) == 0) {
                *ret = 0;
                return 1;
        }
        return policy_get_fraction(c, o, tenant, key, ret);
}

/* An array of non-empty strings without control characters; absolute
 * (leading '/') entries are refused when relative_only. */
int policy_check_string_list(struct parse_ctx *c, const char *tenant, const char *key, json_object *a, const char *example,
                             bool relative_only) {
        if (!json_object_is_type(a, json_type_array))
                return policy_fail(c, tenant, key, "must be an array of strings such as %s", example);
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *g = json_object_array_get_idx(a, i);
                const char *s = json_object_get_string(g);
                if (!json_object_is_type(g, json_type_string) || !*s)
                        return policy_fail(c, tenant, key, "entry #%zu must be a non-empty string", i);
                if (relative_only && s[0] == '/')
                        return policy_fail(c, tenant, key, "'%s' must be relative to the subvolume (no leading '/')", s);
                if (strlen(s) >= 4096)
                        return policy_fail(c, tenant, key, "entry #%zu is too long", i);
                for (const char *p = s; *p; p++)
                        if ((unsigned char)*p < 0x20)
                                return policy_fail(c, tenant, key, "entry #%zu has a control character", i);
        }
        return 0;
}

/* Kubernetes namespaces are DNS labels: what else is named cannot match. */
int policy_check_namespaces(struct parse_ctx *c, const char *tenant, json_object *a) {
        int r = policy_check_string_list(c, tenant, "namespaces", a, "[\"team-a\"]", true);
        for (size_t i = 0; r == 0 && i < json_object_array_length(a); i++) {
                const char *s = json_object_get_string(json_object_array_get_idx(a, i));
                if (!policy_namespace_valid(s))
                        return policy_fail(c, tenant, "namespaces", "'%s' is not a Kubernetes namespace name", s);
        }
        return r;
}

static int get_duration(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, bool zero,
                        uint64_t *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_string) || duration_parse(json_object_get_string(v), ret) < 0 ||
            (*ret == 0 && !zero))
                return policy_fail(c, tenant, key,
                                   zero ? "must be a duration such as \"0s\", \"500ms\", \"30s\", \"5m\""
                                        : "must be a positive duration such as \"500ms\", \"30s\", \"5m\"");
        return 1;
}

int policy_get_duration(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, uint64_t *ret) {
        return get_duration(c, o, tenant, key, false, ret);
}

int policy_get_duration_or_zero(struct parse_ctx *c, json_object *o, const char *tenant, const char *key,
                                uint64_t *ret) {
        return get_duration(c, o, tenant, key, true, ret);
}

int policy_get_opt_path(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, const char **ret) {
        int r = policy_get_string(c, o, tenant, key, ret);
        if (r > 0)
                r = policy_check_abs_path(c, tenant, key, *ret);
        return r < 0 ? r : 0;
}

/* "http(s)://host[:port]" and nothing more: keys are appended to it. */
int policy_check_endpoint(struct parse_ctx *c, const char *tenant, const char *e) {
        struct http_url u;
        const char *why = NULL;
        int r = http_url_parse(e, &u, &why);
        /* As written is as the worker will use it: nothing curl would drop
         * or rewrite (a path, a '#', a host it spells otherwise). */
        if (r == 0 && strcasecmp(u.base, e) != 0)
                why = "only a scheme, a host and a port";
        http_url_done(&u);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || why)
                return policy_fail(c, tenant, "endpoint", "'%s' must be http://HOST[:PORT] or https://HOST[:PORT], no path (%s)",
                            e, why);
        return 0;
}

int policy_check_headers(struct parse_ctx *c, const char *tenant, json_object *h) {
        if (!json_object_is_type(h, json_type_object))
                return policy_fail(c, tenant, "headers", "must be an object of header names to values (\"@FILE\" reads a file)");
        json_object_object_foreach(h, name, val) {
                if (!*name || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-") != strlen(name))
                        return policy_fail(c, tenant, "headers", "'%s' is not a header name", name);
                if (!json_object_is_type(val, json_type_string))
                        return policy_fail(c, tenant, "headers", "value of '%s' must be a string", name);
                for (const char *p = json_object_get_string(val); *p; p++)
                        if ((unsigned char)*p < 0x20 || *p == 0x7f)
                                return policy_fail(c, tenant, "headers", "value of '%s' has a control character", name);
                if (json_object_get_string(val)[0] == '@' &&
                    policy_check_abs_path(c, tenant, "headers", json_object_get_string(val) + 1) < 0)
                        return -EINVAL;
        }
        return 0;
}
