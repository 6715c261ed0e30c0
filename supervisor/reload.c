/* SPDX-License-Identifier: MIT */
#include "reload.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "resolver.h"
#include "containers.h"
#include "dispatch.h"
#include "fdstore.h"
#include "fdio.h"
#include "log.h"
#include "macro.h"
#include "autoarchive.h"
#include "secrets.h"
#include "catalog.h"
#include "catalogwatch.h"
#include "audit.h"
#include "gc.h"
#include "hostmounts.h"
#include "trace.h"
#include "usage.h"
#include "usegroup.h"
#include "workers.h"

static int fail(char **error, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char **error, int r, const char *fmt, ...) {
        va_list ap;
        free(*error);
        va_start(ap, fmt);
        if (vasprintf(error, fmt, ap) < 0)
                *error = NULL;
        va_end(ap);
        return r;
}

static bool strv_equal(char **a, char **b) {
        for (; a && b && *a && *b; a++, b++)
                if (strcmp(*a, *b) != 0)
                        return false;
        return (!a || !*a) && (!b || !*b);
}

/* Takes np if it fits the running tierd (-EXDEV if not: np is freed). */
/* One tenant's new policy np, and its catalog key read already. */
static void apply_tenant(struct tenant *tn, const struct policy_tenant *np, const struct catalog_key *key) {
        bool restart = !policy_tenant_worker_equal(tn->cfg, np);
        bool track = np->quota || np->archive_after_usec;
        bool repace = tn->cfg->restore_rate != np->restore_rate;
        /* The table knows pins by the globs it was built with. */
        bool rescan = track && (!usage_tracked(tn) || !strv_equal(tn->cfg->pin, np->pin));
        int r;

        tn->cfg = np;
        /* Objects under the old key stop verifying: a snapshot under
         * the new one before anything is released again. */
        bool new_key = tn->catalog_key.len != key->len || memcmp(tn->catalog_key.bytes, key->bytes, key->len) != 0;
        tn->catalog_key = *key;
        if (new_key && tn->catalog) {
                log_info("tenant %s: catalog key changed: a snapshot under the new key, releases wait for it",
                         tn->cfg->name);
                catalog_note_lost(tn);
        }
        if (!track)
                usage_free(tn);
        if (rescan && ((r = usegroup_open(tn->fs)) < 0 || (r = usage_scan(tn)) < 0))
                log_error_errno(r, "tenant %s: cannot build its file table: %m", tn->cfg->name);
        autoarchive_update(tn);
        if (repace)
                restore_rate_changed(tn);
        trace_policy_changed(tn);
        if (!tn->cfg->catalog) {
                gc_stop(tn);
                audit_stop(tn);
                catalog_stop(tn);
        } else if ((r = catalogwatch_open(tn->fs)) < 0 || (r = catalog_start(tn)) < 0)
                log_error_errno(r, "tenant %s: cannot start its catalog: %m", tn->cfg->name);
        /* Credentials and header files may be named anew. */
        if (restart && (r = tenant_secrets_load(tn)) < 0)
                log_error_errno(r, "tenant %s: keeping the credentials it had: %m", tn->cfg->name);
        if (restart) {
                resolver_tenant_changed(tn);
                worker_restart_planned(&tn->worker);
                containers_restart_workers(tn);
        }
}

static int apply_policy(struct tierd *t, struct policy *np, char **error) {
        struct policy *old = t->policy;
        const char *why = NULL;
        int r;

        if (!policy_same_places(old, np, &why)) {
                policy_free(np);
                return fail(error, -EXDEV, "%s: %s: restart tierd to apply it (SIGTERM hands over without a gap)",
                            t->policy_path, why);
        }
        /* Catalog keys read first: a bad one refuses the whole reload. */
        _cleanup_free_ struct catalog_key *keys = calloc(t->n_tenants ?: 1, sizeof(*keys));
        if (!keys) {
                policy_free(np);
                return -ENOMEM;
        }
        for (size_t i = 0; i < t->n_tenants; i++) {
                const char *err = "";
                if (!np->tenants[i].catalog_key ||
                    (r = catalog_key_read(np->tenants[i].catalog_key, np->tenants[i].name, &keys[i], &err)) >= 0)
                        continue;
                r = fail(error, r, "%s: tenant %s: catalog_key %s: %s", t->policy_path, np->tenants[i].name,
                         np->tenants[i].catalog_key, err);
                explicit_bzero(keys, t->n_tenants * sizeof(*keys));
                policy_free(np);
                return r;
        }
        for (size_t i = 0; i < t->n_tenants; i++) {
                _cleanup_free_ char *why = NULL;
                /* Allowed before, not now: the mounts are looked at again. */
                if (!t->tenants[i].cfg->allow_setuid_mounts || (r = hostmounts_check(np, &np->tenants[i], &why)) >= 0)
                        continue;
                explicit_bzero(keys, t->n_tenants * sizeof(*keys));
                policy_free(np);
                return fail(error, r, "%s: %s", t->policy_path, why ?: "out of memory");
        }
        t->policy = np;
        if (np->guard_after_usec != old->guard_after_usec)
                fdstore_guard_after(&t->store, np->guard_after_usec);
        for (size_t i = 0; i < t->n_tenants; i++)
                apply_tenant(&t->tenants[i], &np->tenants[i], &keys[i]);
        explicit_bzero(keys, t->n_tenants * sizeof(*keys));
        policy_free(old);
        return 0;
}

/* FNV-1a: tells whether the file's bytes changed, nothing more. */
static uint64_t text_hash(const char *text, size_t len) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < len; i++)
                h = (h ^ (unsigned char)text[i]) * 0x100000001b3ull;
        return h;
}

/* The policy file's bytes; -EINVAL with *error if they cannot be read. */
static int read_policy(struct tierd *t, char **text, size_t *len, char **error) {
        *error = NULL;
        int r = policy_read_file(t->policy_path, text, len, error);
        if (r < 0)
                return *error ? -EINVAL : fail(error, -EINVAL, "%s: %s", t->policy_path, strerror(-r));
        return 0;
}

static int reload(struct tierd *t, bool only_if_changed, char **error) {
        _cleanup_free_ char *text = NULL;
        struct policy *np = NULL;
        size_t len;
        int r = read_policy(t, &text, &len, error);

        if (r < 0)
                return r;
        uint64_t h = text_hash(text, len);
        if (only_if_changed && h == t->policy_hash)
                return 0;
        r = policy_parse(text, len, t->policy_path, &np, error);
        if (r < 0)
                return *error ? -EINVAL : fail(error, -EINVAL, "%s: %s", t->policy_path, strerror(-r));
        r = apply_policy(t, np, error);
        if (r < 0)
                return r;
        t->policy_hash = h;
        log_info("policy %s reloaded", t->policy_path);
        return 1;
}

int tierd_reload_policy(struct tierd *t, char **error) {
        int r = reload(t, false, error);
        return r < 0 ? r : 0;
}

int tierd_reload_policy_if_changed(struct tierd *t, char **error) {
        return reload(t, true, error);
}

void tierd_policy_remember(struct tierd *t) {
        _cleanup_free_ char *text = NULL, *error = NULL;
        size_t len;
        if (policy_read_file(t->policy_path, &text, &len, &error) == 0)
                t->policy_hash = text_hash(text, len);
}

/* Replaces the file at path with text, atomically (a new file renamed over
 * it, same mode). A read-only place, as a mounted ConfigMap is: -EROFS. */
static int write_policy(const char *path, const char *text, char **error) {
        _cleanup_free_ char *file = NULL, *real = NULL, *dir = NULL, *tmp = NULL;
        _cleanup_close_ int fd = -1;
        struct stat st;
        size_t len = strlen(text), off = 0;

        /* A policy directory: its policy.json, through any symlinks. */
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && asprintf(&file, "%s/%s", path, POLICY_DIR_FILE) < 0)
                return -ENOMEM;
        real = realpath(file ?: path, NULL);
        if (!real || stat(real, &st) < 0)
                return fail(error, -errno, "%s: %m", path);
        if (!(dir = strdup(real)) || asprintf(&tmp, "%s/.tierd-policy.XXXXXX", dirname(dir)) < 0)
                return -ENOMEM;
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0 && (errno == EROFS || errno == EACCES || errno == EPERM))
                return fail(error, -EROFS,
                            "%s is read-only (a Kubernetes ConfigMap?): change it at its source; tierd reloads it", path);
        if (fd < 0)
                return fail(error, -errno, "cannot write next to %s: %m", real);
        while (off < len) {
                ssize_t k = write(fd, text + off, len - off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                off += (size_t)k;
        }
        if (off < len || fchmod(fd, st.st_mode & 07777) < 0 || fsync(fd) < 0 || rename(tmp, real) < 0) {
                int r = -errno ?: -EIO;
                unlink(tmp);
                return fail(error, r, "cannot replace %s: %s", real, strerror(-r));
        }
        /* Renamed: the change is made, and durable once its directory is. */
        int r = fsync_dir_of(real);
        if (r < 0)
                return fail(error, r, "%s replaced, but not synced to disk: %s", real, strerror(-r));
        return 0;
}

int tierd_set_tenant_policy(struct tierd *t, const char *tenant, const char *patch, char **error) {
        _cleanup_free_ char *text = NULL, *edited = NULL;
        struct policy *np = NULL;
        const char *why = NULL;
        size_t len;
        int r = read_policy(t, &text, &len, error);

        if (r < 0)
                return r;
        r = policy_edit_tenant(text, len, t->policy_path, tenant, patch, &edited, error);
        if (r < 0)
                return r;
        r = policy_parse(edited, strlen(edited), t->policy_path, &np, error);
        if (r < 0)
                return r;
        /* Checked before writing: a change that needs a restart is not made. */
        if (!policy_same_places(t->policy, np, &why)) {
                policy_free(np);
                return fail(error, -EXDEV, "tenant %s: %s: edit the policy file and restart tierd", tenant, why);
        }
        r = write_policy(t->policy_path, edited, error);
        if (r < 0) {
                policy_free(np);
                return r;
        }
        t->policy_hash = text_hash(edited, strlen(edited));
        r = apply_policy(t, np, error);
        if (r == 0) {
                /* The keys only: a value may be a secret (a header). */
                _cleanup_free_ char *keys = policy_patch_keys(patch);
                log_info("tenant %s: policy set (%s), written to %s", tenant, keys ?: "?", t->policy_path);
        }
        return r;
}
