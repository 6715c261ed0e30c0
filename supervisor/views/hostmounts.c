/* SPDX-License-Identifier: MIT */
#include "hostmounts.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"

/* Is path a or below b (both normalized, absolute)? */
static bool under(const char *a, const char *b) {
        size_t n = strlen(b);
        if (n == 1) /* "/" */
                return true;
        return strncmp(a, b, n) == 0 && (a[n] == '/' || a[n] == 0);
}

static bool has_option(struct libmnt_fs *fs, const char *name) {
        const char *opts = mnt_fs_get_vfs_options(fs);
        return opts && mnt_optstr_get_option(opts, name, NULL, NULL) == 0;
}

static bool skipped(const char *target, char *const *skip) {
        for (; skip && *skip; skip++)
                if (strcmp(target, *skip) == 0)
                        return true;
        return false;
}

/* The subvolume's path inside its filesystem: the root of the mount it is
 * seen through, and the rest of the path below that mount's target. */
static int path_in_fs(struct libmnt_table *tb, const char *subvolume, dev_t *dev, char *buf, size_t len) {
        struct statx stx;
        if (statx(AT_FDCWD, subvolume, AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) < 0)
                return -errno;
        if (!(stx.stx_mask & STATX_MNT_ID))
                return -EOPNOTSUPP;
        struct libmnt_fs *fs = NULL;
        struct libmnt_iter *it = mnt_new_iter(MNT_ITER_BACKWARD);
        if (!it)
                return -ENOMEM;
        while (mnt_table_next_fs(tb, it, &fs) == 0 && (uint64_t)mnt_fs_get_id(fs) != stx.stx_mnt_id)
                fs = NULL;
        mnt_free_iter(it);
        if (!fs)
                return -ENOENT;
        const char *target = mnt_fs_get_target(fs), *root = mnt_fs_get_root(fs);
        if (!target || !root || !under(subvolume, target))
                return -ENOENT;
        const char *rest = subvolume + (strcmp(target, "/") == 0 ? 0 : strlen(target));
        int n = snprintf(buf, len, "%s%s", strcmp(root, "/") == 0 && *rest ? "" : root, rest);
        if (n < 0 || (size_t)n >= len)
                return -ENAMETOOLONG;
        *dev = mnt_fs_get_devno(fs);
        return 0;
}

/* Does the colon-separated list of directories (an overlay's lowerdir)
 * hold one at or below or above the subvolume? */
static bool list_reaches(const char *list, size_t len, const char *subvolume) {
        char dir[4096];
        while (len > 0) {
                const char *colon = memchr(list, ':', len);
                size_t n = colon ? (size_t)(colon - list) : len;
                if (n > 0 && n < sizeof(dir)) {
                        memcpy(dir, list, n);
                        dir[n] = 0;
                        if (dir[0] == '/' && (under(dir, subvolume) || under(subvolume, dir)))
                                return true;
                }
                list += n + !!colon;
                len -= n + !!colon;
        }
        return false;
}

/* A filesystem stacked on the subvolume shows its files through a mount
 * of another device: an overlay with a layer in it, a FUSE mirror
 * (bindfs) of a directory in it. */
static bool stacked_on(struct libmnt_fs *fs, const char *subvolume) {
        const char *type = mnt_fs_get_fstype(fs), *opts = mnt_fs_get_fs_options(fs), *src = mnt_fs_get_source(fs);
        if (type && strcmp(type, "overlay") == 0 && opts) {
                static const char *const layers[] = { "lowerdir", "upperdir", "datadir" };
                for (size_t i = 0; i < ARRAY_SIZE(layers); i++) {
                        char *v = NULL;
                        size_t n = 0;
                        if (mnt_optstr_get_option(opts, layers[i], &v, &n) == 0 && v && list_reaches(v, n, subvolume))
                                return true;
                }
        }
        return type && strncmp(type, "fuse", 4) == 0 && src && src[0] == '/' &&
               (under(src, subvolume) || under(subvolume, src));
}

int hostmounts_find_setuid(const char *subvolume, char *const *skip, char **ret_target) {
        char rel[4096];
        dev_t dev = 0;
        *ret_target = NULL;
        struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
        if (!tb)
                return -errno ?: -ENOMEM;
        int r = path_in_fs(tb, subvolume, &dev, rel, sizeof(rel));
        struct libmnt_iter *it = r < 0 ? NULL : mnt_new_iter(MNT_ITER_FORWARD);
        struct libmnt_fs *fs;
        if (r >= 0 && !it)
                r = -ENOMEM;
        while (r == 0 && mnt_table_next_fs(tb, it, &fs) == 0) { /* the first one found ends it */
                const char *root = mnt_fs_get_root(fs), *target = mnt_fs_get_target(fs);
                if (!root || !target || skipped(target, skip))
                        continue;
                /* A mount of the subvolume, of a directory above it, or of
                 * one inside it: each reaches files of the tenant. So does
                 * a filesystem stacked on it. */
                bool same = mnt_fs_get_devno(fs) == dev && (under(rel, root) || under(root, rel));
                if (!same && !stacked_on(fs, subvolume))
                        continue;
                if (has_option(fs, "nosuid") && has_option(fs, "nodev"))
                        continue;
                *ret_target = strdup(target);
                r = *ret_target ? 1 : -ENOMEM;
        }
        mnt_free_iter(it);
        mnt_unref_table(tb);
        return r;
}

int hostmounts_check(const struct policy *p, const struct policy_tenant *cfg, char **error) {
        _cleanup_free_ char **skip = calloc(p->n_tenants + 1, sizeof(char *));
        _cleanup_free_ char *target = NULL;
        *error = NULL;
        if (cfg->allow_setuid_mounts)
                return 0;
        if (!skip)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_tenants; i++)
                skip[i] = p->tenants[i].mount;
        int r = hostmounts_find_setuid(cfg->subvolume, skip, &target);
        if (r < 0) {
                if (asprintf(error, "tenant %s: cannot read the mount table for %s: %s", cfg->name, cfg->subvolume,
                             strerror(-r)) < 0)
                        *error = NULL;
                return r;
        }
        if (r == 0)
                return 0;
        if (asprintf(error,
                     "tenant %s: its subvolume %s is reachable through %s, mounted without nosuid,nodev: a "
                     "container's root writes in its view as uid 0, and a setuid file or device node it makes "
                     "there would be one on the host. Mount it nosuid,nodev (mount -o remount,nosuid,nodev %s), "
                     "or set \"allow_setuid_mounts\": true for the tenant",
                     cfg->name, cfg->subvolume, target, target) < 0)
                *error = NULL;
        return -EPERM;
}
