/* SPDX-License-Identifier: MIT */
/*
 * Edits of the policy text on behalf of SetTenantPolicy: pure, so the file
 * stays the one source of truth and every edit is validated like the file.
 */
#include "policy.h"

#include <errno.h>
#include <stdarg.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-strict.h"
#include "macro.h"


static int say(char **error, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char **error, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(error, fmt, ap) < 0)
                *error = NULL;
        va_end(ap);
        return r;
}

static json_object *find_tenant(json_object *root, const char *name) {
        json_object *tenants, *n;
        if (!json_object_object_get_ex(root, "tenants", &tenants) || !json_object_is_type(tenants, json_type_array))
                return NULL;
        for (size_t i = 0; i < json_object_array_length(tenants); i++) {
                json_object *tn = json_object_array_get_idx(tenants, i);
                if (json_object_is_type(tn, json_type_object) && json_object_object_get_ex(tn, "name", &n) &&
                    json_object_is_type(n, json_type_string) && strcmp(json_object_get_string(n), name) == 0)
                        return tn;
        }
        return NULL;
}

int policy_edit_tenant(const char *text, size_t len, const char *origin, const char *tenant, const char *patch,
                       char **ret_text, char **error) {
        _cleanup_json_ json_object *root = NULL, *changes = NULL;
        _cleanup_free_ char *why = NULL, *dup = NULL;
        struct policy *check = NULL;
        json_object *tn;
        int r;

        *error = NULL;
        r = json_parse_strict(patch, strlen(patch), &changes, &why, &dup);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return say(error, -EINVAL, "the new settings%s%s%s: %s", dup ? " (key '" : "", dup ?: "", dup ? "')" : "", why);
        if (!json_object_is_type(changes, json_type_object))
                return say(error, -EINVAL, "the new settings must be a JSON object of keys and values");
        if (json_object_object_get_ex(changes, "name", NULL))
                return say(error, -EINVAL, "a tenant cannot be renamed here: edit the policy file and restart tierd");

        /* The file as it is must be valid: an edit never hides a broken one. */
        r = policy_parse(text, len, origin, &check, error);
        policy_free(TAKE_PTR(check));
        if (r < 0)
                return r;
        free(TAKE_PTR(why));
        free(TAKE_PTR(dup));
        r = json_parse_strict(text, len, &root, &why, &dup);
        if (r < 0)
                return r == -ENOMEM ? r : -EINVAL;
        if (!(tn = find_tenant(root, tenant)))
                return say(error, -ENOENT, "no tenant named \"%.64s\" in %s", tenant, origin);

        /* null removes a key: the default applies again. */
        json_object_object_foreach(changes, key, value) {
                if (json_object_is_type(value, json_type_null))
                        json_object_object_del(tn, key);
                else if (json_object_object_add(tn, key, json_object_get(value)) < 0)
                        return -ENOMEM;
        }
        const char *out = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                                   JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!out)
                return -ENOMEM;
        size_t n = strlen(out);
        r = policy_parse(out, n, origin, &check, error);
        policy_free(check);
        if (r < 0)
                return r;
        if (asprintf(ret_text, "%s\n", out) < 0)
                return -ENOMEM;
        return 0;
}

/* Where a tenant's data goes (the store and how it is reached), which
 * secret or key it uses, who else may see it (containers), and what keeps
 * its bytes safe (checks, the catalog, how long unreferenced objects are
 * kept: on a store shared by nodes a short grace collects another node's
 * new uploads; setuid mounts): only root changes these at run time, not
 * the admin group. */
static const char *const root_only_keys[] = {
        "backend",    "endpoint",   "region",  "addressing", "credentials", "ca_file",           "sse",
        "kms_key_id", "headers",    "namespaces", "containers", "subvolume", "mount",           "verify",
        "catalog",    "gc_grace",   "catalog_retention", "allow_setuid_mounts", "catalog_key", "trace_keep",
};

/* The patch as a JSON object; NULL if it is not one (then it is refused as
 * invalid anyway, whoever sends it). */
static json_object *patch_object(const char *patch) {
        _cleanup_free_ char *why = NULL, *dup = NULL;
        json_object *changes = NULL;
        if (json_parse_strict(patch, strlen(patch), &changes, &why, &dup) < 0)
                return NULL;
        if (!json_object_is_type(changes, json_type_object)) {
                json_object_put(changes);
                return NULL;
        }
        return changes;
}

const char *policy_patch_root_only_key(const char *patch) {
        _cleanup_json_ json_object *changes = patch_object(patch);
        if (!changes)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(root_only_keys); i++)
                if (json_object_object_get_ex(changes, root_only_keys[i], NULL))
                        return root_only_keys[i];
        return NULL;
}

char *policy_patch_keys(const char *patch) {
        _cleanup_json_ json_object *changes = patch_object(patch);
        char *out = NULL;
        size_t size = 0;
        if (!changes)
                return strdup("");
        FILE *f = open_memstream(&out, &size);
        if (!f)
                return NULL;
        const char *sep = "";
        json_object_object_foreach(changes, k, v) {
                fprintf(f, "%s%s%s", sep, k, v ? "" : " removed");
                sep = ", ";
        }
        if (fclose(f) != 0) {
                free(out);
                return NULL;
        }
        return out;
}
