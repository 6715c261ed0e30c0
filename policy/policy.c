/* SPDX-License-Identifier: MIT */
#include "policy.h"

#include <ctype.h>
#include <fnmatch.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "json-strict.h"
#include "macro.h"
#include "size.h"
#include "stub.h"
#include "url.h"

#define POLICY_FILE_MAX (4u << 20)


struct parse_ctx {
        const char *origin;
        char **error;
};

static int fail(struct parse_ctx *c, const char *tenant, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static int fail(struct parse_ctx *c, const char *tenant, const char *key, const char *fmt, ...) {
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
        return -EINVAL;
}

/* Keys allowed in a tenant and in "defaults" (name/subvolume/mount/backend
 * only in tenants). */
#define SETTING_KEYS "backend", "chunk", "readahead", "small_file", "endpoint", "region", "credentials", "addressing", \
        "connect_timeout", "stall_timeout", "ca_file", "sse", "kms_key_id", "headers", "multipart_threshold", "part_size", \
        "quota", "high_watermark", "low_watermark", "archive_after", "archive_min_size", "archive_rate", "pin", "restore", \
        "verify", "manifest_cache", "catalog", "catalog_key", "catalog_retention", "gc_grace"
static const char *const tenant_keys[] = { "name", "subvolume", "mount", "namespaces", "containers", "allow_setuid_mounts",
                                           SETTING_KEYS };
static const char *const default_keys[] = { SETTING_KEYS };

static bool key_known(const char *key, const char *const *keys, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(key, keys[i]) == 0)
                        return true;
        return false;
}

static int check_keys(struct parse_ctx *c, json_object *o, const char *tenant, const char *const *keys, size_t n) {
        json_object_object_foreach(o, key, val) {
                (void)val;
                if (!key_known(key, keys, n))
                        return fail(c, tenant, key, "unknown key");
        }
        return 0;
}

static int get_string(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, const char **ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return fail(c, tenant, key, "must be a string");
        *ret = json_object_get_string(v);
        return 1;
}

/* Sizes are strings with units ("1M") or plain non-negative integers. */
static int get_size(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, uint64_t *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (json_object_is_type(v, json_type_int)) {
                int64_t i = json_object_get_int64(v);
                if (i < 0 || (i == INT64_MAX && errno == ERANGE))
                        return fail(c, tenant, key, "must be a non-negative size");
                *ret = (uint64_t)i;
                return 1;
        }
        if (!json_object_is_type(v, json_type_string))
                return fail(c, tenant, key, "must be a size such as \"1M\" or an integer");
        if (size_parse(json_object_get_string(v), ret) < 0)
                return fail(c, tenant, key, "'%s' is not a size (use e.g. 4096, \"512K\", \"1M\", \"10G\")",
                            json_object_get_string(v));
        return 1;
}

static int check_abs_path(struct parse_ctx *c, const char *tenant, const char *key, const char *p) {
        if (p[0] != '/')
                return fail(c, tenant, key, "'%s' must be an absolute path", p);
        if (strlen(p) >= 4096)
                return fail(c, tenant, key, "path too long");
        if (strcmp(p, "/") == 0)
                return fail(c, tenant, key, "must not be /");
        for (const char *s = p; *s; s++) {
                if ((unsigned char)*s < 0x20)
                        return fail(c, tenant, key, "control character in path");
                if (s[0] == '/' && (s[1] == '/' || s[1] == 0))
                        return fail(c, tenant, key, "'%s' must be normalized (no '//' or trailing '/')", p);
                if (s[0] == '/' && s[1] == '.' && (s[2] == '/' || s[2] == 0 || (s[2] == '.' && (s[3] == '/' || s[3] == 0))))
                        return fail(c, tenant, key, "'%s' must be normalized (no '.' or '..')", p);
        }
        return 0;
}

static bool path_is_under(const char *a, const char *b) {
        if (!a || !b)
                return false;
        size_t n = strlen(b);
        return strncmp(a, b, n) == 0 && (a[n] == '/' || a[n] == 0);
}

struct tenant_settings {
        const char *backend, *endpoint, *region, *credentials, *addressing, *ca_file, *sse, *kms_key_id;
        const char *catalog_key;
        json_object *headers, *pin;
        uint64_t chunk, readahead, small_file, connect_timeout, stall_timeout, multipart_threshold, part_size;
        uint64_t quota, archive_after, archive_min_size, archive_rate, manifest_cache;
        uint64_t catalog_retention, gc_grace;
        double high_watermark, low_watermark;
        const char *restore;
        bool verify, catalog;
};

static int get_bool(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, bool *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_boolean))
                return fail(c, tenant, key, "must be true or false");
        *ret = json_object_get_boolean(v);
        return 0;
}

static int get_fraction(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, double *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
                return fail(c, tenant, key, "must be a number between 0 and 1, such as 0.9");
        *ret = json_object_get_double(v);
        if (!(*ret > 0 && *ret <= 1))
                return fail(c, tenant, key, "%g is not a fraction in (0, 1]", *ret);
        return 1;
}

/* An array of non-empty strings without control characters; absolute
 * (leading '/') entries are refused when relative_only. */
static int check_string_list(struct parse_ctx *c, const char *tenant, const char *key, json_object *a, const char *example,
                             bool relative_only) {
        if (!json_object_is_type(a, json_type_array))
                return fail(c, tenant, key, "must be an array of strings such as %s", example);
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *g = json_object_array_get_idx(a, i);
                const char *s = json_object_get_string(g);
                if (!json_object_is_type(g, json_type_string) || !*s)
                        return fail(c, tenant, key, "entry #%zu must be a non-empty string", i);
                if (relative_only && s[0] == '/')
                        return fail(c, tenant, key, "'%s' must be relative to the subvolume (no leading '/')", s);
                if (strlen(s) >= 4096)
                        return fail(c, tenant, key, "entry #%zu is too long", i);
                for (const char *p = s; *p; p++)
                        if ((unsigned char)*p < 0x20)
                                return fail(c, tenant, key, "entry #%zu has a control character", i);
        }
        return 0;
}

/* Kubernetes namespaces are DNS labels: what else is named cannot match. */
static int check_namespaces(struct parse_ctx *c, const char *tenant, json_object *a) {
        int r = check_string_list(c, tenant, "namespaces", a, "[\"team-a\"]", true);
        for (size_t i = 0; r == 0 && i < json_object_array_length(a); i++) {
                const char *s = json_object_get_string(json_object_array_get_idx(a, i));
                if (strlen(s) > 63 || strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(s) || s[0] == '-')
                        return fail(c, tenant, "namespaces", "'%s' is not a Kubernetes namespace name", s);
        }
        return r;
}

static int get_duration(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, uint64_t *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_string) || duration_parse(json_object_get_string(v), ret) < 0 || *ret == 0)
                return fail(c, tenant, key, "must be a positive duration such as \"500ms\", \"30s\", \"5m\"");
        return 1;
}

static int get_opt_path(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, const char **ret) {
        int r = get_string(c, o, tenant, key, ret);
        if (r > 0)
                r = check_abs_path(c, tenant, key, *ret);
        return r < 0 ? r : 0;
}

/* "http(s)://host[:port]" and nothing more: keys are appended to it. */
static int check_endpoint(struct parse_ctx *c, const char *tenant, const char *e) {
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
                return fail(c, tenant, "endpoint", "'%s' must be http://HOST[:PORT] or https://HOST[:PORT], no path (%s)",
                            e, why);
        return 0;
}

static int check_headers(struct parse_ctx *c, const char *tenant, json_object *h) {
        if (!json_object_is_type(h, json_type_object))
                return fail(c, tenant, "headers", "must be an object of header names to values (\"@FILE\" reads a file)");
        json_object_object_foreach(h, name, val) {
                if (!*name || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-") != strlen(name))
                        return fail(c, tenant, "headers", "'%s' is not a header name", name);
                if (!json_object_is_type(val, json_type_string))
                        return fail(c, tenant, "headers", "value of '%s' must be a string", name);
                for (const char *p = json_object_get_string(val); *p; p++)
                        if ((unsigned char)*p < 0x20 || *p == 0x7f)
                                return fail(c, tenant, "headers", "value of '%s' has a control character", name);
                if (json_object_get_string(val)[0] == '@' &&
                    check_abs_path(c, tenant, "headers", json_object_get_string(val) + 1) < 0)
                        return -EINVAL;
        }
        return 0;
}

static int parse_settings(struct parse_ctx *c, json_object *o, const char *tenant, struct tenant_settings *s) {
        int r;
        if ((r = get_string(c, o, tenant, "backend", &s->backend)) < 0)
                return r;
        if ((r = get_size(c, o, tenant, "chunk", &s->chunk)) < 0)
                return r;
        if (r > 0 && (s->chunk < 4096 || s->chunk > (1u << 30) || (s->chunk & (s->chunk - 1))))
                return fail(c, tenant, "chunk", "must be a power of two from 4K to 1G");
        if ((r = get_size(c, o, tenant, "readahead", &s->readahead)) < 0)
                return r;
        if (r > 0 && s->readahead > (1ull << 30))
                return fail(c, tenant, "readahead", "must be at most 1G");
        if ((r = get_size(c, o, tenant, "small_file", &s->small_file)) < 0)
                return r;
        if ((r = get_string(c, o, tenant, "endpoint", &s->endpoint)) < 0)
                return r;
        if (r > 0 && (r = check_endpoint(c, tenant, s->endpoint)) < 0)
                return r;
        if ((r = get_string(c, o, tenant, "region", &s->region)) < 0)
                return r;
        if (r > 0 && (!*s->region || strspn(s->region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(s->region)))
                return fail(c, tenant, "region", "'%s' is not a region name", s->region);
        if ((r = get_opt_path(c, o, tenant, "credentials", &s->credentials)) < 0)
                return r;
        if ((r = get_opt_path(c, o, tenant, "ca_file", &s->ca_file)) < 0)
                return r;
        if ((r = get_string(c, o, tenant, "addressing", &s->addressing)) < 0)
                return r;
        if (r > 0 && strcmp(s->addressing, "path") != 0 && strcmp(s->addressing, "virtual") != 0)
                return fail(c, tenant, "addressing", "must be \"path\" or \"virtual\"");
        if ((r = get_duration(c, o, tenant, "connect_timeout", &s->connect_timeout)) < 0)
                return r;
        if ((r = get_duration(c, o, tenant, "stall_timeout", &s->stall_timeout)) < 0)
                return r;
        if ((r = get_string(c, o, tenant, "sse", &s->sse)) < 0)
                return r;
        if (r > 0 && strcmp(s->sse, "AES256") != 0 && strcmp(s->sse, "aws:kms") != 0)
                return fail(c, tenant, "sse", "must be \"AES256\" or \"aws:kms\"");
        if ((r = get_string(c, o, tenant, "kms_key_id", &s->kms_key_id)) < 0)
                return r;
        if (json_object_object_get_ex(o, "headers", &s->headers) && (r = check_headers(c, tenant, s->headers)) < 0)
                return r;
        if ((r = get_size(c, o, tenant, "multipart_threshold", &s->multipart_threshold)) < 0)
                return r;
        if (r > 0 && s->multipart_threshold < (5u << 20))
                return fail(c, tenant, "multipart_threshold", "must be at least 5M (S3's smallest part)");
        if ((r = get_size(c, o, tenant, "part_size", &s->part_size)) < 0)
                return r;
        if (r > 0 && (s->part_size < (5u << 20) || s->part_size > (5ull << 30)))
                return fail(c, tenant, "part_size", "must be from 5M to 5G (S3's part limits)");
        if ((r = get_size(c, o, tenant, "quota", &s->quota)) < 0)
                return r;
        if ((r = get_fraction(c, o, tenant, "high_watermark", &s->high_watermark)) < 0)
                return r;
        if ((r = get_fraction(c, o, tenant, "low_watermark", &s->low_watermark)) < 0)
                return r;
        if ((r = get_duration(c, o, tenant, "archive_after", &s->archive_after)) < 0)
                return r;
        if ((r = get_size(c, o, tenant, "archive_min_size", &s->archive_min_size)) < 0)
                return r;
        if ((r = get_size(c, o, tenant, "archive_rate", &s->archive_rate)) < 0)
                return r;
        if (json_object_object_get_ex(o, "pin", &s->pin) &&
            (r = check_string_list(c, tenant, "pin", s->pin, "[\"models/**\", \"*.db\"] (globs)", true)) < 0)
                return r;
        if ((r = get_string(c, o, tenant, "restore", &s->restore)) < 0)
                return r;
        if (r > 0 && strcmp(s->restore, "range") != 0 && strcmp(s->restore, "whole") != 0 &&
            strcmp(s->restore, "open") != 0)
                return fail(c, tenant, "restore", "must be \"range\", \"whole\" or \"open\"");
        if ((r = get_size(c, o, tenant, "manifest_cache", &s->manifest_cache)) < 0)
                return r;
        if (r > 0 && s->manifest_cache > (1ull << 30))
                return fail(c, tenant, "manifest_cache", "must be at most 1G");
        if ((r = get_bool(c, o, tenant, "verify", &s->verify)) < 0)
                return r;
        if ((r = get_duration(c, o, tenant, "catalog_retention", &s->catalog_retention)) < 0)
                return r;
        if ((r = get_duration(c, o, tenant, "gc_grace", &s->gc_grace)) < 0)
                return r;
        /* Ages in a store are whole seconds: less would be no grace at all. */
        if (r > 0 && s->gc_grace < 1000000)
                return fail(c, tenant, "gc_grace", "must be at least 1s (a day is the default)");
        if ((r = get_opt_path(c, o, tenant, "catalog_key", &s->catalog_key)) < 0)
                return r;
        return get_bool(c, o, tenant, "catalog", &s->catalog);
}

static char **strings_to_strv(json_object *a) {
        size_t n = a ? json_object_array_length(a) : 0;
        char **v = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; v && i < n; i++)
                if (!(v[i] = strdup(json_object_get_string(json_object_array_get_idx(a, i))))) {
                        for (size_t j = 0; j < i; j++)
                                free(v[j]);
                        free(v);
                        return NULL;
                }
        return v;
}

/* Plain decimal of exactly n characters. */
static int size_parse_plain(const char *s, size_t n, uint64_t *ret) {
        char buf[32];
        if (n == 0 || n >= sizeof(buf) || strspn(s, "0123456789") < n)
                return -EINVAL;
        memcpy(buf, s, n);
        buf[n] = 0;
        return size_parse(buf, ret);
}

static char *strdup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static char **headers_to_strv(json_object *h) {
        size_t n = h ? (size_t)json_object_object_length(h) : 0, i = 0;
        char **v = calloc(n + 1, sizeof(char *));
        if (!v || !h)
                return v;
        json_object_object_foreach(h, name, val) {
                if (asprintf(&v[i], "%s: %s", name, json_object_get_string(val)) < 0) {
                        v[i] = NULL;
                        break;
                }
                i++;
        }
        return v;
}

static int parse_tenant(struct parse_ctx *c, json_object *o, size_t index, const struct tenant_settings *defaults,
                        struct policy_tenant *t) {
        struct tenant_settings s = *defaults;
        const char *name = NULL, *subvolume = NULL, *mount = NULL, *err = NULL;
        char label[32];
        struct backend_url url;
        int r;

        snprintf(label, sizeof(label), "#%zu", index);
        if (!json_object_is_type(o, json_type_object))
                return fail(c, label, NULL, "must be an object");
        if ((r = get_string(c, o, label, "name", &name)) < 0)
                return r;
        if (!name)
                return fail(c, label, "name", "missing");
        if (!*name || strlen(name) >= STUB_TENANT_MAX)
                return fail(c, label, "name", "must have 1 to %d characters", STUB_TENANT_MAX - 1);
        for (const char *p = name; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr("-_.", *p))
                        return fail(c, label, "name", "'%s' may use only letters, digits, '-', '_' and '.'", name);
        if ((r = check_keys(c, o, name, tenant_keys, ARRAY_SIZE(tenant_keys))) < 0)
                return r;
        if ((r = get_string(c, o, name, "subvolume", &subvolume)) < 0)
                return r;
        if (!subvolume)
                return fail(c, name, "subvolume", "missing");
        if ((r = check_abs_path(c, name, "subvolume", subvolume)) < 0)
                return r;
        if ((r = get_string(c, o, name, "mount", &mount)) < 0)
                return r;
        if (!mount)
                return fail(c, name, "mount", "missing");
        if ((r = check_abs_path(c, name, "mount", mount)) < 0)
                return r;
        if (path_is_under(mount, subvolume) || path_is_under(subvolume, mount))
                return fail(c, name, "mount", "'%s' must not overlap the subvolume '%s'", mount, subvolume);
        json_object *namespaces = NULL, *containers = NULL;
        if (json_object_object_get_ex(o, "namespaces", &namespaces) && (r = check_namespaces(c, name, namespaces)) < 0)
                return r;
        if (json_object_object_get_ex(o, "containers", &containers) &&
            (r = check_string_list(c, name, "containers", containers, "[\"build-*\"] (container id globs)", false)) < 0)
                return r;
        bool allow_setuid_mounts = false;
        if ((r = get_bool(c, o, name, "allow_setuid_mounts", &allow_setuid_mounts)) < 0)
                return r;
        if ((r = parse_settings(c, o, name, &s)) < 0)
                return r;
        if (!s.backend)
                return fail(c, name, "backend", "missing (set it in the tenant or in \"defaults\")");
        r = backend_url_parse(s.backend, &url, &err);
        enum backend_kind kind = url.kind;
        backend_url_done(&url);
        if (r < 0)
                return fail(c, name, "backend", "'%s': %s", s.backend, err);

        if (kind == BACKEND_S3 && !s.credentials)
                return fail(c, name, "credentials", "missing: an s3:// backend needs an AWS shared-credentials file");
        if (s.kms_key_id && (!s.sse || strcmp(s.sse, "aws:kms") != 0))
                return fail(c, name, "kms_key_id", "needs \"sse\": \"aws:kms\"");
        if (s.catalog && !s.catalog_key)
                return fail(c, name, "catalog_key", "missing: a catalog is authenticated with a key kept outside the "
                                                    "store (a root-owned 0600 file of at least 32 bytes, e.g. "
                                                    "openssl rand -hex 32 >FILE), the same on every node that "
                                                    "imports it");
        if (s.part_size > s.multipart_threshold)
                return fail(c, name, "part_size", "must not exceed multipart_threshold");
        if (s.low_watermark > s.high_watermark)
                return fail(c, name, "low_watermark", "%g is above high_watermark %g: release would never stop",
                            s.low_watermark, s.high_watermark);
        if (s.quota && s.quota < s.chunk)
                return fail(c, name, "quota", "must be at least one chunk (%llu bytes), or 0 for none",
                            (unsigned long long)s.chunk);

        *t = (struct policy_tenant){
                .name = strdup(name), .subvolume = strdup(subvolume), .mount = strdup(mount),
                .backend = strdup(s.backend), .chunk = s.chunk, .readahead = s.readahead, .small_file = s.small_file,
                .endpoint = strdup_or_null(s.endpoint), .region = strdup(s.region),
                .credentials = strdup_or_null(s.credentials), .catalog_key = strdup_or_null(s.catalog_key),
                /* Path-style for a custom endpoint (RGW, MinIO), virtual-hosted for AWS. */
                .virtual_hosted = s.addressing ? strcmp(s.addressing, "virtual") == 0 : !s.endpoint,
                .connect_timeout_usec = s.connect_timeout, .stall_timeout_usec = s.stall_timeout,
                .ca_file = strdup_or_null(s.ca_file), .sse = strdup_or_null(s.sse),
                .kms_key_id = strdup_or_null(s.kms_key_id), .headers = headers_to_strv(s.headers),
                .multipart_threshold = s.multipart_threshold, .part_size = s.part_size,
                .quota = s.quota, .high_watermark = s.high_watermark, .low_watermark = s.low_watermark,
                .archive_after_usec = s.archive_after, .archive_min_size = s.archive_min_size,
                .archive_rate = s.archive_rate, .pin = strings_to_strv(s.pin),
                .restore_whole = s.restore && strcmp(s.restore, "range") != 0,
                .restore_open = s.restore && strcmp(s.restore, "open") == 0, .verify = s.verify,
                .catalog = s.catalog, .catalog_retention_usec = s.catalog_retention, .gc_grace_usec = s.gc_grace,
                .manifest_cache = s.manifest_cache, .namespaces = strings_to_strv(namespaces),
                .containers = strings_to_strv(containers), .allow_setuid_mounts = allow_setuid_mounts,
        };
        if (!t->name || !t->subvolume || !t->mount || !t->backend || !t->region || !t->headers || !t->pin ||
            !t->namespaces || !t->containers)
                return -ENOMEM;
        return 0;
}

static int check_tenants_distinct(struct parse_ctx *c, const struct policy *p) {
        for (size_t i = 0; i < p->n_tenants; i++)
                for (size_t j = 0; j < i; j++) {
                        const struct policy_tenant *a = &p->tenants[i], *b = &p->tenants[j];
                        if (strcmp(a->name, b->name) == 0)
                                return fail(c, a->name, "name", "two tenants have this name");
                        if (path_is_under(a->subvolume, b->subvolume) || path_is_under(b->subvolume, a->subvolume))
                                return fail(c, a->name, "subvolume", "'%s' overlaps tenant '%s' ('%s')", a->subvolume,
                                            b->name, b->subvolume);
                        if (path_is_under(a->mount, b->mount) || path_is_under(b->mount, a->mount))
                                return fail(c, a->name, "mount", "'%s' overlaps tenant '%s' ('%s')", a->mount, b->name,
                                            b->mount);
                        if (path_is_under(a->mount, b->subvolume) || path_is_under(b->subvolume, a->mount))
                                return fail(c, a->name, "mount", "'%s' overlaps the subvolume of tenant '%s'",
                                            a->mount, b->name);
                }
        return 0;
}

static int parse_filesystem(struct parse_ctx *c, json_object *o, const char *label, struct policy_filesystem *f) {
        static const char *const keys[] = { "source", "mountpoint", "type", "options" };
        static const char *const sources[] = { "/dev/", "UUID=", "LABEL=", "PARTUUID=" };
        const char *source = NULL, *mountpoint = NULL, *type = NULL, *options = NULL;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return fail(c, label, NULL, "must be an object");
        if ((r = check_keys(c, o, label, keys, ARRAY_SIZE(keys))) < 0 ||
            (r = get_string(c, o, label, "source", &source)) < 0 ||
            (r = get_string(c, o, label, "mountpoint", &mountpoint)) < 0 ||
            (r = get_string(c, o, label, "type", &type)) < 0 || (r = get_string(c, o, label, "options", &options)) < 0)
                return r;
        if (!source || !mountpoint || !type)
                return fail(c, label, !source ? "source" : !mountpoint ? "mountpoint" : "type", "missing");
        bool known = false;
        for (size_t i = 0; i < ARRAY_SIZE(sources); i++)
                known = known || (strncmp(source, sources[i], strlen(sources[i])) == 0 && source[strlen(sources[i])]);
        if (!known || strlen(source) >= 4096 || strpbrk(source, "\n\t "))
                return fail(c, label, "source", "'%s' must be a device (/dev/...), UUID=..., LABEL=... or PARTUUID=...",
                            source);
        if ((r = check_abs_path(c, label, "mountpoint", mountpoint)) < 0)
                return r;
        if (strcmp(type, "btrfs") != 0 && strcmp(type, "xfs") != 0 && strcmp(type, "ext4") != 0)
                return fail(c, label, "type", "must be \"btrfs\", \"xfs\" or \"ext4\"");
        if (options && (strlen(options) > 1024 || strpbrk(options, " \t\n")))
                return fail(c, label, "options", "must be comma-separated mount options, such as \"noatime\"");
        *f = (struct policy_filesystem){ .source = strdup(source), .mountpoint = strdup(mountpoint),
                                         .type = strdup(type), .options = strdup_or_null(options) };
        return f->source && f->mountpoint && f->type && (f->options || !options) ? 0 : -ENOMEM;
}

static int parse_filesystems(struct parse_ctx *c, json_object *a, struct policy *p) {
        char label[48];
        if (!json_object_is_type(a, json_type_array))
                return fail(c, NULL, "filesystems", "must be an array of {source, mountpoint, type}");
        size_t n = json_object_array_length(a);
        if (!(p->filesystems = calloc(n ?: 1, sizeof(*p->filesystems))))
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                snprintf(label, sizeof(label), "filesystems #%zu", i);
                int r = parse_filesystem(c, json_object_array_get_idx(a, i), label, &p->filesystems[i]);
                p->n_filesystems = i + 1;
                if (r < 0)
                        return r;
                for (size_t j = 0; j < i; j++)
                        if (path_is_under(p->filesystems[i].mountpoint, p->filesystems[j].mountpoint) ||
                            path_is_under(p->filesystems[j].mountpoint, p->filesystems[i].mountpoint))
                                return fail(c, label, "mountpoint", "'%s' overlaps filesystems #%zu",
                                            p->filesystems[i].mountpoint, j);
        }
        return 0;
}

static bool group_name_valid(const char *name) {
        size_t n = strlen(name);
        if (n == 0 || n > 32 || name[0] == '-')
                return false;
        for (const char *q = name; *q; q++)
                if (!isalnum((unsigned char)*q) && !strchr("-_.", *q))
                        return false;
        return true;
}

int policy_parse(const char *text, size_t len, const char *origin, struct policy **ret, char **error) {
        struct parse_ctx c = { .origin = origin ? origin : "policy", .error = error };
        static const char *const top_keys[] = { "version", "defaults", "tenants", "worker_uids", "admin_group",
                                                "filesystems", "guard_after", "kubernetes",
                                                "require_landlock" };
        struct tenant_settings defaults = {
                .chunk = 1u << 20, .readahead = 32u << 20, .small_file = 1u << 20, .region = "us-east-1",
                .connect_timeout = 10000000ull, .stall_timeout = 30000000ull,
                .multipart_threshold = 64u << 20, .part_size = 8u << 20,
                .high_watermark = 0.90, .low_watermark = 0.80, .verify = true, .manifest_cache = 8u << 20,
                .catalog_retention = 7 * 86400 * 1000000ull, .gc_grace = 86400 * 1000000ull,
        };
        _cleanup_json_ json_object *root = NULL;
        json_object *v, *tenants;
        _cleanup_free_ char *dup = NULL, *why = NULL;
        struct policy *p;
        int r;

        if (error)
                *error = NULL;
        if (len > POLICY_FILE_MAX)
                return fail(&c, NULL, NULL, "policy larger than %u bytes", POLICY_FILE_MAX);
        r = json_parse_strict(text, len, &root, &why, &dup);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fail(&c, NULL, dup, "%s", why);
        if (!json_object_is_type(root, json_type_object))
                return fail(&c, NULL, NULL, "the policy must be a JSON object");
        if ((r = check_keys(&c, root, NULL, top_keys, ARRAY_SIZE(top_keys))) < 0)
                return r;

        unsigned version = 1;
        if (json_object_object_get_ex(root, "version", &v)) {
                if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1)
                        return fail(&c, NULL, "version", "must be a positive integer");
                if (json_object_get_int64(v) > POLICY_VERSION)
                        return fail(&c, NULL, "version", "policy version %lld is newer than this tierd understands (%d)",
                                    (long long)json_object_get_int64(v), POLICY_VERSION);
                version = (unsigned)json_object_get_int64(v);
        }
        uint64_t uid_first = POLICY_WORKER_UIDS_DEFAULT_FIRST, uid_last = uid_first + POLICY_WORKER_UIDS_DEFAULT_COUNT - 1;
        if (json_object_object_get_ex(root, "worker_uids", &v)) {
                const char *range = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
                char *dash = strchr(range, '-');
                if (!dash || size_parse_plain(range, (size_t)(dash - range), &uid_first) < 0 ||
                    size_parse_plain(dash + 1, strlen(dash + 1), &uid_last) < 0 || uid_first == 0 ||
                    uid_last < uid_first || uid_last >= 0xfffffffe)
                        return fail(&c, NULL, "worker_uids", "must be a range \"FIRST-LAST\" of non-root uids, such as \"59000-59999\"");
        }
        const char *admin_group = NULL;
        if (json_object_object_get_ex(root, "admin_group", &v)) {
                admin_group = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
                if (!group_name_valid(admin_group))
                        return fail(&c, NULL, "admin_group", "must be a group name (letters, digits, \"-_.\", at most 32)");
        }
        bool kubernetes = false;
        if ((r = get_bool(&c, root, NULL, "kubernetes", &kubernetes)) < 0)
                return r;
        bool require_landlock = true;
        if ((r = get_bool(&c, root, NULL, "require_landlock", &require_landlock)) < 0)
                return r;
        uint64_t guard_after = POLICY_GUARD_AFTER_DEFAULT_USEC;
        if ((r = get_duration(&c, root, NULL, "guard_after", &guard_after)) < 0)
                return r;
        if (r > 0 && (guard_after < 1000000 || guard_after > 86400 * 1000000ull))
                return fail(&c, NULL, "guard_after", "must be between 1s and 1d");
        if (json_object_object_get_ex(root, "defaults", &v)) {
                if (!json_object_is_type(v, json_type_object))
                        return fail(&c, NULL, "defaults", "must be an object");
                if ((r = check_keys(&c, v, "defaults", default_keys, ARRAY_SIZE(default_keys))) < 0)
                        return r;
                if ((r = parse_settings(&c, v, "defaults", &defaults)) < 0)
                        return r;
        }
        if (!json_object_object_get_ex(root, "tenants", &tenants))
                return fail(&c, NULL, "tenants", "missing");
        if (!json_object_is_type(tenants, json_type_array))
                return fail(&c, NULL, "tenants", "must be an array");

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->version = version;
        p->guard_after_usec = guard_after;
        p->kubernetes = kubernetes;
        p->landlock_optional = !require_landlock;
        if (admin_group && !(p->admin_group = strdup(admin_group))) {
                free(p);
                return -ENOMEM;
        }
        p->worker_uid_first = (uint32_t)uid_first;
        p->worker_uid_count = (uint32_t)(uid_last - uid_first + 1);
        size_t n = json_object_array_length(tenants);
        p->tenants = calloc(n ? n : 1, sizeof(*p->tenants));
        if (!p->tenants) {
                policy_free(p);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                r = parse_tenant(&c, json_object_array_get_idx(tenants, i), i, &defaults, &p->tenants[i]);
                p->n_tenants = i + 1; /* so policy_free frees what was parsed */
                if (r < 0) {
                        policy_free(p);
                        return r;
                }
        }
        if (p->n_tenants > p->worker_uid_count) {
                policy_free(p);
                return fail(&c, NULL, "worker_uids", "has fewer uids than there are tenants");
        }
        r = check_tenants_distinct(&c, p);
        if (r >= 0 && json_object_object_get_ex(root, "filesystems", &v))
                r = parse_filesystems(&c, v, p);
        if (r < 0) {
                policy_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

int policy_read_file(const char *path, char **ret, size_t *ret_len, char **error) {
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t n = 0;

        if (error)
                *error = NULL;
        /* A directory, as a mounted ConfigMap is, holds policy.json. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
                int file = openat(fd, POLICY_DIR_FILE, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                close(fd);
                fd = file;
        }
        if (fd < 0 || fstat(fd, &st) < 0) {
                int r = -errno;
                if (error && asprintf(error, "%s: cannot read policy: %s", path, strerror(-r)) < 0)
                        *error = NULL;
                return r;
        }
        if (!S_ISREG(st.st_mode) || st.st_size > POLICY_FILE_MAX) {
                if (error && asprintf(error, "%s: not a regular file of at most %u bytes", path, POLICY_FILE_MAX) < 0)
                        *error = NULL;
                return -EINVAL;
        }
        buf = malloc((size_t)st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t k = read(fd, buf + n, (size_t)st.st_size + 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                n += (size_t)k;
                if (n > (size_t)st.st_size) {
                        if (error && asprintf(error, "%s: policy changed while being read", path) < 0)
                                *error = NULL;
                        return -EAGAIN;
                }
        }
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        *ret_len = n;
        return 0;
}

int policy_load_file(const char *path, struct policy **ret, char **error) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        int r = policy_read_file(path, &buf, &n, error);
        if (r < 0)
                return r;
        return policy_parse(buf, n, path, ret, error);
}

static void strv_free(char **v) {
        for (size_t k = 0; v && v[k]; k++)
                free(v[k]);
        free(v);
}

void policy_free(struct policy *p) {
        if (!p)
                return;
        free(p->admin_group);
        for (size_t i = 0; i < p->n_filesystems; i++) {
                free(p->filesystems[i].source);
                free(p->filesystems[i].mountpoint);
                free(p->filesystems[i].type);
                free(p->filesystems[i].options);
        }
        free(p->filesystems);
        for (size_t i = 0; i < p->n_tenants; i++) {
                free(p->tenants[i].name);
                free(p->tenants[i].subvolume);
                free(p->tenants[i].mount);
                free(p->tenants[i].backend);
                free(p->tenants[i].endpoint);
                free(p->tenants[i].region);
                free(p->tenants[i].credentials);
                free(p->tenants[i].catalog_key);
                free(p->tenants[i].ca_file);
                free(p->tenants[i].sse);
                free(p->tenants[i].kms_key_id);
                strv_free(p->tenants[i].headers);
                strv_free(p->tenants[i].pin);
                strv_free(p->tenants[i].namespaces);
                strv_free(p->tenants[i].containers);
        }
        free(p->tenants);
        free(p);
}

const struct policy_tenant *policy_find_tenant(const struct policy *p, const char *name) {
        for (size_t i = 0; i < p->n_tenants; i++)
                if (strcmp(p->tenants[i].name, name) == 0)
                        return &p->tenants[i];
        return NULL;
}

static bool str_equal(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

bool policy_same_places(const struct policy *a, const struct policy *b, const char **why) {
        if (a->n_tenants != b->n_tenants) {
                *why = "tenants were added or removed";
                return false;
        }
        if (a->worker_uid_first != b->worker_uid_first || a->worker_uid_count != b->worker_uid_count) {
                *why = "worker_uids changed";
                return false;
        }
        bool same_fs = a->n_filesystems == b->n_filesystems;
        for (size_t i = 0; same_fs && i < a->n_filesystems; i++) {
                const struct policy_filesystem *x = &a->filesystems[i], *y = &b->filesystems[i];
                same_fs = strcmp(x->source, y->source) == 0 && strcmp(x->mountpoint, y->mountpoint) == 0 &&
                          strcmp(x->type, y->type) == 0 && str_equal(x->options, y->options);
        }
        if (!same_fs) {
                *why = "filesystems changed";
                return false;
        }
        for (size_t i = 0; i < a->n_tenants; i++) {
                const struct policy_tenant *x = &a->tenants[i], *y = &b->tenants[i];
                if (strcmp(x->name, y->name) != 0) {
                        *why = "tenants were renamed or reordered";
                        return false;
                }
                if (strcmp(x->subvolume, y->subvolume) != 0 || strcmp(x->mount, y->mount) != 0 ||
                    strcmp(x->backend, y->backend) != 0) {
                        *why = "a tenant's subvolume, mount or backend changed";
                        return false;
                }
        }
        return true;
}

bool policy_tenant_worker_equal(const struct policy_tenant *a, const struct policy_tenant *b) {
        size_t i = 0;
        if (!str_equal(a->endpoint, b->endpoint) || !str_equal(a->region, b->region) ||
            !str_equal(a->credentials, b->credentials) || a->virtual_hosted != b->virtual_hosted ||
            a->connect_timeout_usec != b->connect_timeout_usec || a->stall_timeout_usec != b->stall_timeout_usec ||
            !str_equal(a->ca_file, b->ca_file) || !str_equal(a->sse, b->sse) || !str_equal(a->kms_key_id, b->kms_key_id) ||
            a->multipart_threshold != b->multipart_threshold || a->part_size != b->part_size ||
            a->manifest_cache != b->manifest_cache)
                return false;
        for (; a->headers && b->headers && a->headers[i] && b->headers[i]; i++)
                if (strcmp(a->headers[i], b->headers[i]) != 0)
                        return false;
        return (!a->headers || !a->headers[i]) && (!b->headers || !b->headers[i]);
}

bool policy_container_allowed(const struct policy_tenant *t, bool kubernetes, const char *container_id,
                              const char *k8s_namespace, const char **why) {
        if (kubernetes && k8s_namespace && *k8s_namespace) {
                for (char **n = t->namespaces; n && *n; n++)
                        if (strcmp(*n, k8s_namespace) == 0)
                                return true;
                *why = "the pod's Kubernetes namespace is not in the tenant's \"namespaces\"";
                return false;
        }
        for (char **g = t->containers; g && *g; g++)
                if (fnmatch(*g, container_id, 0) == 0)
                        return true;
        *why = kubernetes || !k8s_namespace || !*k8s_namespace
                       ? "the container has no Kubernetes namespace and its id matches none of the tenant's \"containers\""
                       : "its id matches none of the tenant's \"containers\" (a pod namespace annotation counts only "
                         "where the policy says \"kubernetes\": true: any container can write one elsewhere)";
        return false;
}
