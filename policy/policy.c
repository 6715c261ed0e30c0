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
#include "policyvalue.h"
#include "size.h"
#include "stub.h"
#include "url.h"



/* Keys allowed in a tenant and in "defaults" (name/subvolume/mount/backend
 * only in tenants). */
#define SETTING_KEYS "backend", "chunk", "readahead", "small_file", "endpoint", "region", "credentials", "addressing", \
        "credential_source", "profile", "role_arn", "web_identity_token_file", "sts_endpoint", \
        "connect_timeout", "stall_timeout", "ca_file", "sse", "kms_key_id", "headers", "multipart_threshold", "part_size", \
        "quota", "high_watermark", "low_watermark", "archive_after", "archive_min_size", "archive_rate", "prefetch_rate", \
        "restore_rate", \
        "pin", "hydrate_pinned", "restore", \
        "trace_window", "verify", "fill_check", "manifest_cache", "catalog", "catalog_key", "catalog_retention", "gc_grace", \
        "trace_keep"
static const char *const tenant_keys[] = { "name", "subvolume", "mount", "namespaces", "containers", "allow_setuid_mounts",
                                           SETTING_KEYS };
static const char *const default_keys[] = { SETTING_KEYS };

struct tenant_settings {
        const char *backend, *endpoint, *region, *credentials, *addressing, *ca_file, *sse, *kms_key_id;
        const char *catalog_key;
        struct aws_settings aws;
        json_object *headers, *pin;
        uint64_t chunk, readahead, small_file, connect_timeout, stall_timeout, multipart_threshold, part_size;
        uint64_t quota, archive_after, archive_min_size, archive_rate, prefetch_rate, restore_rate, manifest_cache;
        uint64_t trace_window, trace_keep;
        uint64_t catalog_retention, gc_grace;
        double high_watermark, low_watermark, fill_check;
        const char *restore;
        bool verify, catalog, hydrate_pinned;
};

/* The settings of the store and its client. */
static int parse_store_settings(struct parse_ctx *c, json_object *o, const char *tenant, struct tenant_settings *s) {
        int r;
        if ((r = policy_get_string(c, o, tenant, "backend", &s->backend)) < 0)
                return r;
        if ((r = policy_get_size(c, o, tenant, "chunk", &s->chunk)) < 0)
                return r;
        if (r > 0 && (s->chunk < 4096 || s->chunk > (1u << 30) || (s->chunk & (s->chunk - 1))))
                return policy_fail(c, tenant, "chunk", "must be a power of two from 4K to 1G");
        if ((r = policy_get_size(c, o, tenant, "readahead", &s->readahead)) < 0)
                return r;
        if (r > 0 && s->readahead > (1ull << 30))
                return policy_fail(c, tenant, "readahead", "must be at most 1G");
        if ((r = policy_get_size(c, o, tenant, "small_file", &s->small_file)) < 0)
                return r;
        if ((r = policy_get_string(c, o, tenant, "endpoint", &s->endpoint)) < 0)
                return r;
        if (r > 0 && (r = policy_check_endpoint(c, tenant, s->endpoint)) < 0)
                return r;
        if ((r = policy_get_string(c, o, tenant, "region", &s->region)) < 0)
                return r;
        if (r > 0 && (!*s->region || strspn(s->region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(s->region)))
                return policy_fail(c, tenant, "region", "'%s' is not a region name", s->region);
        if ((r = policy_get_opt_path(c, o, tenant, "credentials", &s->credentials)) < 0)
                return r;
        if ((r = policy_parse_aws(c, o, tenant, &s->aws)) < 0)
                return r;
        if ((r = policy_get_opt_path(c, o, tenant, "ca_file", &s->ca_file)) < 0)
                return r;
        if ((r = policy_get_string(c, o, tenant, "addressing", &s->addressing)) < 0)
                return r;
        if (r > 0 && strcmp(s->addressing, "path") != 0 && strcmp(s->addressing, "virtual") != 0)
                return policy_fail(c, tenant, "addressing", "must be \"path\" or \"virtual\"");
        if ((r = policy_get_duration(c, o, tenant, "connect_timeout", &s->connect_timeout)) < 0)
                return r;
        if ((r = policy_get_duration(c, o, tenant, "stall_timeout", &s->stall_timeout)) < 0)
                return r;
        if ((r = policy_get_string(c, o, tenant, "sse", &s->sse)) < 0)
                return r;
        if (r > 0 && strcmp(s->sse, "AES256") != 0 && strcmp(s->sse, "aws:kms") != 0)
                return policy_fail(c, tenant, "sse", "must be \"AES256\" or \"aws:kms\"");
        if ((r = policy_get_string(c, o, tenant, "kms_key_id", &s->kms_key_id)) < 0)
                return r;
        if (json_object_object_get_ex(o, "headers", &s->headers) && (r = policy_check_headers(c, tenant, s->headers)) < 0)
                return r;
        if ((r = policy_get_size(c, o, tenant, "multipart_threshold", &s->multipart_threshold)) < 0)
                return r;
        if (r > 0 && s->multipart_threshold < (5u << 20))
                return policy_fail(c, tenant, "multipart_threshold", "must be at least 5M (S3's smallest part)");
        if ((r = policy_get_size(c, o, tenant, "part_size", &s->part_size)) < 0)
                return r;
        if (r > 0 && (s->part_size < (5u << 20) || s->part_size > (5ull << 30)))
                return policy_fail(c, tenant, "part_size", "must be from 5M to 5G (S3's part limits)");
        return 0;
}

/* The settings of what tierd does with the tenant's files: quotas,
 * background archive, pins, restores, checks, the catalog. */
static int parse_file_settings(struct parse_ctx *c, json_object *o, const char *tenant, struct tenant_settings *s) {
        int r;
        if ((r = policy_get_size(c, o, tenant, "quota", &s->quota)) < 0)
                return r;
        if ((r = policy_get_fraction(c, o, tenant, "high_watermark", &s->high_watermark)) < 0)
                return r;
        if ((r = policy_get_fraction(c, o, tenant, "low_watermark", &s->low_watermark)) < 0)
                return r;
        if ((r = policy_get_duration(c, o, tenant, "archive_after", &s->archive_after)) < 0)
                return r;
        if ((r = policy_get_size(c, o, tenant, "archive_min_size", &s->archive_min_size)) < 0)
                return r;
        if ((r = policy_get_size(c, o, tenant, "archive_rate", &s->archive_rate)) < 0)
                return r;
        if ((r = policy_get_size(c, o, tenant, "prefetch_rate", &s->prefetch_rate)) < 0)
                return r;
        if ((r = policy_get_size(c, o, tenant, "restore_rate", &s->restore_rate)) < 0)
                return r;
        if ((r = policy_get_duration_or_zero(c, o, tenant, "trace_window", &s->trace_window)) < 0)
                return r;
        if (s->trace_window > 3600000000ull)
                return policy_fail(c, tenant, "trace_window", "must be at most \"1h\"");
        if (json_object_object_get_ex(o, "pin", &s->pin) &&
            (r = policy_check_string_list(c, tenant, "pin", s->pin, "[\"models/**\", \"*.db\"] (globs)", true)) < 0)
                return r;
        if ((r = policy_get_string(c, o, tenant, "restore", &s->restore)) < 0)
                return r;
        if (r > 0 && strcmp(s->restore, "range") != 0 && strcmp(s->restore, "whole") != 0 &&
            strcmp(s->restore, "open") != 0 && strcmp(s->restore, "progressive") != 0)
                return policy_fail(c, tenant, "restore", "must be \"range\", \"progressive\", \"whole\" or \"open\"");
        if ((r = policy_get_size(c, o, tenant, "manifest_cache", &s->manifest_cache)) < 0)
                return r;
        if (r > 0 && s->manifest_cache > (1ull << 30))
                return policy_fail(c, tenant, "manifest_cache", "must be at most 1G");
        if ((r = policy_get_bool(c, o, tenant, "verify", &s->verify)) < 0)
                return r;
        if ((r = policy_get_fraction_or_zero(c, o, tenant, "fill_check", &s->fill_check)) < 0)
                return r;
        if ((r = policy_get_bool(c, o, tenant, "hydrate_pinned", &s->hydrate_pinned)) < 0)
                return r;
        if ((r = policy_get_duration(c, o, tenant, "catalog_retention", &s->catalog_retention)) < 0)
                return r;
        if ((r = policy_get_duration(c, o, tenant, "gc_grace", &s->gc_grace)) < 0)
                return r;
        /* Ages in a store are whole seconds: less would be no grace at all. */
        if (r > 0 && s->gc_grace < 1000000)
                return policy_fail(c, tenant, "gc_grace", "must be at least 1s (a day is the default)");
        if ((r = policy_get_duration_or_zero(c, o, tenant, "trace_keep", &s->trace_keep)) < 0)
                return r;
        if (r > 0 && s->trace_keep && s->trace_keep < 1000000)
                return policy_fail(c, tenant, "trace_keep", "must be at least 1s, or \"0s\": never (30 days is the default)");
        if ((r = policy_get_opt_path(c, o, tenant, "catalog_key", &s->catalog_key)) < 0)
                return r;
        return policy_get_bool(c, o, tenant, "catalog", &s->catalog);
}

static int parse_settings(struct parse_ctx *c, json_object *o, const char *tenant, struct tenant_settings *s) {
        int r = parse_store_settings(c, o, tenant, s);
        return r < 0 ? r : parse_file_settings(c, o, tenant, s);
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

/* What one setting cannot say alone: the backend's URL and what it needs,
 * and settings that must agree with each other. */
static int check_settings_together(struct parse_ctx *c, const char *name, const struct tenant_settings *s) {
        const char *err = NULL;
        struct backend_url url;
        int r;

        if (!s->backend)
                return policy_fail(c, name, "backend", "missing (set it in the tenant or in \"defaults\")");
        r = backend_url_parse(s->backend, &url, &err);
        enum backend_kind kind = url.kind;
        backend_url_done(&url);
        if (r < 0)
                return policy_fail(c, name, "backend", "'%s': %s", s->backend, err);

        if ((r = policy_check_aws(c, name, kind == BACKEND_S3, s->credentials, &s->aws)) < 0)
                return r;
        if (s->kms_key_id && (!s->sse || strcmp(s->sse, "aws:kms") != 0))
                return policy_fail(c, name, "kms_key_id", "needs \"sse\": \"aws:kms\"");
        if (s->catalog && !s->catalog_key)
                return policy_fail(c, name, "catalog_key", "missing: a catalog is authenticated with a key kept outside the "
                                                    "store (a root-owned 0600 file of at least 32 bytes, e.g. "
                                                    "openssl rand -hex 32 >FILE), the same on every node that "
                                                    "imports it");
        if (s->part_size > s->multipart_threshold)
                return policy_fail(c, name, "part_size", "must not exceed multipart_threshold");
        if (s->low_watermark > s->high_watermark)
                return policy_fail(c, name, "low_watermark", "%g is above high_watermark %g: release would never stop",
                            s->low_watermark, s->high_watermark);
        if (s->quota && s->quota < s->chunk)
                return policy_fail(c, name, "quota", "must be at least one chunk (%llu bytes), or 0 for none",
                            (unsigned long long)s->chunk);
        return 0;
}

static int parse_tenant(struct parse_ctx *c, json_object *o, size_t index, const struct tenant_settings *defaults,
                        struct policy_tenant *t) {
        struct tenant_settings s = *defaults;
        const char *name = NULL, *subvolume = NULL, *mount = NULL;
        char label[32];
        int r;

        snprintf(label, sizeof(label), "#%zu", index);
        if (!json_object_is_type(o, json_type_object))
                return policy_fail(c, label, NULL, "must be an object");
        if ((r = policy_get_string(c, o, label, "name", &name)) < 0)
                return r;
        if (!name)
                return policy_fail(c, label, "name", "missing");
        if (!*name || strlen(name) >= STUB_TENANT_MAX)
                return policy_fail(c, label, "name", "must have 1 to %d characters", STUB_TENANT_MAX - 1);
        for (const char *p = name; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr("-_.", *p))
                        return policy_fail(c, label, "name", "'%s' may use only letters, digits, '-', '_' and '.'", name);
        if ((r = policy_check_keys(c, o, name, tenant_keys, ARRAY_SIZE(tenant_keys))) < 0)
                return r;
        if ((r = policy_get_string(c, o, name, "subvolume", &subvolume)) < 0)
                return r;
        if (!subvolume)
                return policy_fail(c, name, "subvolume", "missing");
        if ((r = policy_check_abs_path(c, name, "subvolume", subvolume)) < 0)
                return r;
        if ((r = policy_get_string(c, o, name, "mount", &mount)) < 0)
                return r;
        if (!mount)
                return policy_fail(c, name, "mount", "missing");
        if ((r = policy_check_abs_path(c, name, "mount", mount)) < 0)
                return r;
        if (policy_path_is_under(mount, subvolume) || policy_path_is_under(subvolume, mount))
                return policy_fail(c, name, "mount", "'%s' must not overlap the subvolume '%s'", mount, subvolume);
        json_object *namespaces = NULL, *containers = NULL;
        if (json_object_object_get_ex(o, "namespaces", &namespaces) && (r = policy_check_namespaces(c, name, namespaces)) < 0)
                return r;
        if (json_object_object_get_ex(o, "containers", &containers) &&
            (r = policy_check_string_list(c, name, "containers", containers, "[\"build-*\"] (container id globs)", false)) < 0)
                return r;
        bool allow_setuid_mounts = false;
        if ((r = policy_get_bool(c, o, name, "allow_setuid_mounts", &allow_setuid_mounts)) < 0)
                return r;
        if ((r = parse_settings(c, o, name, &s)) < 0)
                return r;
        if ((r = check_settings_together(c, name, &s)) < 0)
                return r;

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
                .trace_window_usec = s.trace_window,
                .archive_rate = s.archive_rate, .prefetch_rate = s.prefetch_rate, .restore_rate = s.restore_rate,
                .pin = strings_to_strv(s.pin),
                .restore_whole = s.restore && (strcmp(s.restore, "whole") == 0 || strcmp(s.restore, "open") == 0),
                .restore_progressive = s.restore && strcmp(s.restore, "progressive") == 0,
                .hydrate_pinned = s.hydrate_pinned,
                .restore_open = s.restore && strcmp(s.restore, "open") == 0, .verify = s.verify, .fill_check = s.fill_check,
                .catalog = s.catalog, .catalog_retention_usec = s.catalog_retention, .gc_grace_usec = s.gc_grace,
                .trace_keep_usec = s.trace_keep,
                .manifest_cache = s.manifest_cache, .namespaces = strings_to_strv(namespaces),
                .containers = strings_to_strv(containers), .allow_setuid_mounts = allow_setuid_mounts,
        };
        if (!t->name || !t->subvolume || !t->mount || !t->backend || !t->region || !t->headers || !t->pin ||
            !t->namespaces || !t->containers || policy_aws_copy(&t->aws, &s.aws) < 0)
                return -ENOMEM;
        return 0;
}

static int check_tenants_distinct(struct parse_ctx *c, const struct policy *p) {
        for (size_t i = 0; i < p->n_tenants; i++)
                for (size_t j = 0; j < i; j++) {
                        const struct policy_tenant *a = &p->tenants[i], *b = &p->tenants[j];
                        if (strcmp(a->name, b->name) == 0)
                                return policy_fail(c, a->name, "name", "two tenants have this name");
                        if (policy_path_is_under(a->subvolume, b->subvolume) || policy_path_is_under(b->subvolume, a->subvolume))
                                return policy_fail(c, a->name, "subvolume", "'%s' overlaps tenant '%s' ('%s')", a->subvolume,
                                            b->name, b->subvolume);
                        if (policy_path_is_under(a->mount, b->mount) || policy_path_is_under(b->mount, a->mount))
                                return policy_fail(c, a->name, "mount", "'%s' overlaps tenant '%s' ('%s')", a->mount, b->name,
                                            b->mount);
                        if (policy_path_is_under(a->mount, b->subvolume) || policy_path_is_under(b->subvolume, a->mount))
                                return policy_fail(c, a->name, "mount", "'%s' overlaps the subvolume of tenant '%s'",
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
                return policy_fail(c, label, NULL, "must be an object");
        if ((r = policy_check_keys(c, o, label, keys, ARRAY_SIZE(keys))) < 0 ||
            (r = policy_get_string(c, o, label, "source", &source)) < 0 ||
            (r = policy_get_string(c, o, label, "mountpoint", &mountpoint)) < 0 ||
            (r = policy_get_string(c, o, label, "type", &type)) < 0 || (r = policy_get_string(c, o, label, "options", &options)) < 0)
                return r;
        if (!source || !mountpoint || !type)
                return policy_fail(c, label, !source ? "source" : !mountpoint ? "mountpoint" : "type", "missing");
        bool known = false;
        for (size_t i = 0; i < ARRAY_SIZE(sources); i++)
                known = known || (strncmp(source, sources[i], strlen(sources[i])) == 0 && source[strlen(sources[i])]);
        if (!known || strlen(source) >= 4096 || strpbrk(source, "\n\t "))
                return policy_fail(c, label, "source", "'%s' must be a device (/dev/...), UUID=..., LABEL=... or PARTUUID=...",
                            source);
        if ((r = policy_check_abs_path(c, label, "mountpoint", mountpoint)) < 0)
                return r;
        if (strcmp(type, "btrfs") != 0 && strcmp(type, "xfs") != 0 && strcmp(type, "ext4") != 0)
                return policy_fail(c, label, "type", "must be \"btrfs\", \"xfs\" or \"ext4\"");
        if (options && (strlen(options) > 1024 || strpbrk(options, " \t\n")))
                return policy_fail(c, label, "options", "must be comma-separated mount options, such as \"noatime\"");
        *f = (struct policy_filesystem){ .source = strdup(source), .mountpoint = strdup(mountpoint),
                                         .type = strdup(type), .options = strdup_or_null(options) };
        return f->source && f->mountpoint && f->type && (f->options || !options) ? 0 : -ENOMEM;
}

static int parse_filesystems(struct parse_ctx *c, json_object *a, struct policy *p) {
        char label[48];
        if (!json_object_is_type(a, json_type_array))
                return policy_fail(c, NULL, "filesystems", "must be an array of {source, mountpoint, type}");
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
                        if (policy_path_is_under(p->filesystems[i].mountpoint, p->filesystems[j].mountpoint) ||
                            policy_path_is_under(p->filesystems[j].mountpoint, p->filesystems[i].mountpoint))
                                return policy_fail(c, label, "mountpoint", "'%s' overlaps filesystems #%zu",
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

/* The policy's own keys, into p: version, worker_uids, admin_group,
 * kubernetes, require_landlock, guard_after. */
static int parse_globals(struct parse_ctx *c, json_object *root, struct policy *p) {
        json_object *v;
        int r;

        p->version = 1;
        if (json_object_object_get_ex(root, "version", &v)) {
                if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1)
                        return policy_fail(c, NULL, "version", "must be a positive integer");
                if (json_object_get_int64(v) > POLICY_VERSION)
                        return policy_fail(c, NULL, "version", "policy version %lld is newer than this tierd understands (%d)",
                                    (long long)json_object_get_int64(v), POLICY_VERSION);
                p->version = (unsigned)json_object_get_int64(v);
        }
        uint64_t uid_first = POLICY_WORKER_UIDS_DEFAULT_FIRST, uid_last = uid_first + POLICY_WORKER_UIDS_DEFAULT_COUNT - 1;
        if (json_object_object_get_ex(root, "worker_uids", &v)) {
                const char *range = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
                char *dash = strchr(range, '-');
                if (!dash || size_parse_plain(range, (size_t)(dash - range), &uid_first) < 0 ||
                    size_parse_plain(dash + 1, strlen(dash + 1), &uid_last) < 0 || uid_first == 0 ||
                    uid_last < uid_first || uid_last >= 0xfffffffe)
                        return policy_fail(c, NULL, "worker_uids", "must be a range \"FIRST-LAST\" of non-root uids, such as \"59000-59999\"");
        }
        p->worker_uid_first = (uint32_t)uid_first;
        p->worker_uid_count = (uint32_t)(uid_last - uid_first + 1);
        if (json_object_object_get_ex(root, "admin_group", &v)) {
                const char *admin_group = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
                if (!group_name_valid(admin_group))
                        return policy_fail(c, NULL, "admin_group", "must be a group name (letters, digits, \"-_.\", at most 32)");
                if (!(p->admin_group = strdup(admin_group)))
                        return -ENOMEM;
        }
        if ((r = policy_get_bool(c, root, NULL, "kubernetes", &p->kubernetes)) < 0)
                return r;
        bool require_landlock = true;
        if ((r = policy_get_bool(c, root, NULL, "require_landlock", &require_landlock)) < 0)
                return r;
        p->landlock_optional = !require_landlock;
        p->guard_after_usec = POLICY_GUARD_AFTER_DEFAULT_USEC;
        if ((r = policy_get_duration(c, root, NULL, "guard_after", &p->guard_after_usec)) < 0)
                return r;
        if (r > 0 && (p->guard_after_usec < 1000000 || p->guard_after_usec > 86400 * 1000000ull))
                return policy_fail(c, NULL, "guard_after", "must be between 1s and 1d");
        return 0;
}

/* "tenants", each over the defaults, into p (p->n_tenants counts those
 * parsed, so that policy_free frees them on an error). */
static int parse_tenants(struct parse_ctx *c, json_object *root, const struct tenant_settings *defaults,
                         struct policy *p) {
        json_object *tenants;
        int r;

        if (!json_object_object_get_ex(root, "tenants", &tenants))
                return policy_fail(c, NULL, "tenants", "missing");
        if (!json_object_is_type(tenants, json_type_array))
                return policy_fail(c, NULL, "tenants", "must be an array");
        size_t n = json_object_array_length(tenants);
        p->tenants = calloc(n ? n : 1, sizeof(*p->tenants));
        if (!p->tenants)
                return -ENOMEM;
        p->n_tenants = 0;
        for (size_t i = 0; i < n; i++) {
                r = parse_tenant(c, json_object_array_get_idx(tenants, i), i, defaults, &p->tenants[i]);
                p->n_tenants = i + 1;
                if (r < 0)
                        return r;
        }
        if (p->n_tenants > p->worker_uid_count)
                return policy_fail(c, NULL, "worker_uids", "has fewer uids than there are tenants");
        return check_tenants_distinct(c, p);
}

int policy_parse(const char *text, size_t len, const char *origin, struct policy **ret, char **error) {
        struct parse_ctx c = { .origin = origin ? origin : "policy", .error = error };
        static const char *const top_keys[] = { "version", "defaults", "tenants", "worker_uids", "admin_group",
                                                "filesystems", "guard_after", "kubernetes",
                                                "require_landlock" };
        struct tenant_settings defaults = {
                .chunk = 256u << 10, .readahead = 32u << 20, .small_file = 1u << 20, .region = "us-east-1",
                .connect_timeout = 10000000ull, .stall_timeout = 30000000ull, .trace_window = 60000000ull,
                .multipart_threshold = 64u << 20, .part_size = 8u << 20,
                .high_watermark = 0.90, .low_watermark = 0.80, .verify = true, .fill_check = 0.0625,
                .manifest_cache = 8u << 20,
                .catalog_retention = 7 * 86400 * 1000000ull, .gc_grace = 86400 * 1000000ull,
                .trace_keep = 30 * 86400 * 1000000ull,
        };
        _cleanup_json_ json_object *root = NULL;
        json_object *v;
        _cleanup_free_ char *dup = NULL, *why = NULL;
        struct policy *p;
        int r;

        if (error)
                *error = NULL;
        if (len > POLICY_FILE_MAX)
                return policy_fail(&c, NULL, NULL, "policy larger than %u bytes", POLICY_FILE_MAX);
        r = json_parse_strict(text, len, &root, &why, &dup);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return policy_fail(&c, NULL, dup, "%s", why);
        if (!json_object_is_type(root, json_type_object))
                return policy_fail(&c, NULL, NULL, "the policy must be a JSON object");
        if ((r = policy_check_keys(&c, root, NULL, top_keys, ARRAY_SIZE(top_keys))) < 0)
                return r;
        if (!(p = calloc(1, sizeof(*p))))
                return -ENOMEM;
        r = parse_globals(&c, root, p);
        if (r >= 0 && json_object_object_get_ex(root, "defaults", &v)) {
                if (!json_object_is_type(v, json_type_object))
                        r = policy_fail(&c, NULL, "defaults", "must be an object");
                else if ((r = policy_check_keys(&c, v, "defaults", default_keys, ARRAY_SIZE(default_keys))) >= 0)
                        r = parse_settings(&c, v, "defaults", &defaults);
        }
        if (r >= 0)
                r = parse_tenants(&c, root, &defaults, p);
        if (r >= 0 && json_object_object_get_ex(root, "filesystems", &v))
                r = parse_filesystems(&c, v, p);
        if (r < 0) {
                policy_free(p);
                return r;
        }
        *ret = p;
        return 0;
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
                policy_aws_free(&p->tenants[i].aws);
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
