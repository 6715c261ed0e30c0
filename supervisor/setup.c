/* SPDX-License-Identifier: MIT */
/*
 * What tierd sets up from its policy before it attaches to any event:
 * the filesystems mounted and marked, each tenant with its store,
 * subvolume, tallies and worker, the containers a predecessor attached,
 * and the file tables quotas need.
 */
#include "setup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootmount.h"
#include "containerstate.h"
#include "fsgroup.h"
#include "hostmounts.h"
#include "log.h"
#include "macro.h"
#include "autoarchive.h"
#include "tally.h"
#include "usage.h"
#include "usegroup.h"
#include "resolver.h"
#include "secrets.h"
#include "url.h"
#include "workers.h"

static struct tiered_fs *fs_for(struct tierd *t, const char *mountpoint, const char *fstype) {
        for (size_t i = 0; i < t->n_fss; i++)
                if (t->fss[i].mountpoint && strcmp(t->fss[i].mountpoint, mountpoint) == 0)
                        return &t->fss[i];
        struct tiered_fs *fs = &t->fss[t->n_fss++];
        *fs = (struct tiered_fs){ .t = t, .mnt_fd = -1, .tree_fd = -1, .root_fd = -1,
                                   .fill_tree_fd = -1, .fill_root_fd = -1, .watch_fd = -1, .pre_fd = -1, .notif_fd = -1, .use_fd = -1,
                                   .catalog_fd = -1,
                                  .mountpoint = strdup(mountpoint), .fstype = strdup(fstype) };
        return fs;
}

/* Gives a store directory and what is in it to uid (and the gid of the same
 * number), without following links. Cheap when it is already theirs. */
static int chown_tree(int dir_fd, uid_t uid) {
        struct stat st;
        if (fstatat(dir_fd, "", &st, AT_EMPTY_PATH) < 0)
                return -errno;
        if (st.st_uid == uid && st.st_gid == uid)
                return 0;
        if (fchownat(dir_fd, "", uid, uid, AT_EMPTY_PATH) < 0)
                return -errno;
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        for (struct dirent *de; (de = readdir(d));) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (de->d_type == DT_DIR) {
                        _cleanup_close_ int sub = openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        int r = sub >= 0 ? chown_tree(sub, uid) : -errno;
                        if (r < 0)
                                return r;
                } else if (fchownat(dirfd(d), de->d_name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
        }
        return 0;
}

static int open_store(struct tenant *tn) {
        struct backend_url url;
        const char *err;
        int r = backend_url_parse(tn->cfg->backend, &url, &err);
        if (r < 0)
                return log_error_errno(r, "tenant %s: backend %s: %s", tn->cfg->name, tn->cfg->backend, err);
        if (url.kind == BACKEND_FILE) {
                /* Made by tierd, handed to the worker as its only directory. */
                if (mkdir(url.path, 0700) < 0 && errno != EEXIST)
                        r = log_error_errno(errno, "tenant %s: cannot create store %s: %m", tn->cfg->name, url.path);
                else if ((tn->store_fd = open(url.path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
                        r = log_error_errno(errno, "tenant %s: cannot open store %s: %m", tn->cfg->name, url.path);
                /* The worker runs as its own uid: the store is its. */
                else if ((r = chown_tree(tn->store_fd, tn->worker_uid)) < 0)
                        log_error_errno(r, "tenant %s: cannot give store %s to uid %u: %m", tn->cfg->name, url.path,
                                        (unsigned)tn->worker_uid);
        }
        backend_url_done(&url);
        return r;
}

/* Locate each tenant's filesystem and subvolume; open its store. */
static int setup_tenants(struct tierd *t) {
        struct policy *p = t->policy;
        int r;

        t->tenants = calloc(p->n_tenants ?: 1, sizeof(*t->tenants));
        if (!t->tenants)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_tenants; i++) {
                struct tenant *tn = &t->tenants[t->n_tenants++];
                _cleanup_free_ char *mp = NULL, *type = NULL, *real = NULL;
                *tn = (struct tenant){ .t = t, .cfg = &p->tenants[i], .subvol_fd = -1, .store_fd = -1,
                                       .worker = { .sock = -1, .state = WORKER_STOPPED } };
                tn->worker.tenant = tn;
                tn->worker_uid = p->worker_uid_first + (uid_t)i;
                real = realpath(tn->cfg->subvolume, NULL);
                if (!real)
                        return log_error_errno(errno, "tenant %s: subvolume %s: %m", tn->cfg->name, tn->cfg->subvolume);
                if (strcmp(real, tn->cfg->subvolume) != 0)
                        return log_error_errno(EINVAL, "tenant %s: subvolume %s resolves to %s: give the real path",
                                               tn->cfg->name, tn->cfg->subvolume, real);
                _cleanup_free_ char *why = NULL;
                r = hostmounts_check(p, tn->cfg, &why);
                if (r < 0)
                        return log_error_errno(r, "%s", why ?: "out of memory");
                r = fsgroup_locate(real, &mp, &type, &tn->subvol_rel);
                if (r < 0)
                        return log_error_errno(r, "tenant %s: cannot find the filesystem of %s: %m", tn->cfg->name, real);
                tn->fs = fs_for(t, mp, type);
                if (!tn->fs->mountpoint || !tn->fs->fstype)
                        return -ENOMEM;
                r = open_store(tn);
                if (r < 0)
                        return r;
                r = tenant_secrets_load(tn);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The policy's "filesystems" not mounted yet: mounted detached, marked,
 * and only then moved into place. */
static int mount_filesystems(struct tierd *t) {
        for (size_t i = 0; i < t->policy->n_filesystems; i++) {
                const struct policy_filesystem *pf = &t->policy->filesystems[i];
                const char *why = NULL;
                int mnt, r = bootmount_open(pf, &mnt, &why);
                if (r < 0)
                        return log_error_errno(r, "filesystem %s at %s: %s: %m", pf->source, pf->mountpoint, why);
                if (r > 0)
                        continue; /* mounted already: located with the tenants */
                struct tiered_fs *fs = fs_for(t, pf->mountpoint, pf->type);
                if (!fs->mountpoint || !fs->fstype) {
                        close(mnt);
                        return -ENOMEM;
                }
                fs->mnt_fd = mnt;
                fs->boot_owned = true;
                if ((r = fsgroup_open(fs)) < 0 || (r = bootmount_attach(fs->mnt_fd, fs->mountpoint)) < 0)
                        return r;
                fs->mnt_fd = safe_close(fs->mnt_fd);
        }
        return 0;
}

static bool policy_mounts(const struct policy *p, const char *mountpoint) {
        for (size_t i = 0; i < p->n_filesystems; i++)
                if (strcmp(p->filesystems[i].mountpoint, mountpoint) == 0)
                        return true;
        return false;
}

/* Each tenant's subvolume through the private mount, its tallies and its
 * worker. */
static int start_tenants(struct tierd *t) {
        for (size_t i = 0; i < t->n_tenants; i++) {
                struct tenant *tn = &t->tenants[i];
                if (!tn->fs)
                        return -EINVAL; /* setup_tenants gave every tenant its filesystem */
                tn->subvol_fd = openat(tn->fs->tree_fd, tn->subvol_rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (tn->subvol_fd < 0)
                        return log_error_errno(errno, "tenant %s: cannot open %s on the private mount: %m",
                                               tn->cfg->name, tn->subvol_rel);
                tally_start(tn);
                int r = worker_start(&tn->worker);
                if (r < 0)
                        return r;
        }
        return 0;
}

int tierd_setup(struct tierd *t) {
        int r;

        t->fss = calloc(t->policy->n_tenants + t->policy->n_filesystems + 1, sizeof(*t->fss));
        if (!t->fss)
                return -ENOMEM;
        r = mount_filesystems(t);
        if (r >= 0)
                r = setup_tenants(t);
        if (r < 0)
                return r;
        /* Mounted already and taken over: a predecessor mounted it. One the
         * admin mounted stays the admin's. */
        for (size_t i = 0; i < t->n_fss; i++)
                if (t->store.n_inherited > 0 && policy_mounts(t->policy, t->fss[i].mountpoint))
                        t->fss[i].boot_owned = true;
        /* Mark every filesystem before any view exists: nothing can reach a
         * stub through a view before tierd serves it. */
        for (size_t i = 0; i < t->n_fss; i++) {
                if (t->fss[i].pre_fd >= 0)
                        continue; /* mounted by tierd: marked already */
                r = fsgroup_open(&t->fss[i]);
                if (r < 0)
                        return r;
        }
        /* Stores' addresses are looked up on threads: the workers' requests
         * wait for the first answers, the loop does not. */
        if ((r = resolver_start(t)) < 0)
                return r;
        if ((r = start_tenants(t)) < 0)
                return r;
        /* Containers a predecessor attached get their own workers back. */
        containers_adopt(t);
        /* Quotas and background archive need the file tables: the use
         * group first, so no write between the scan and it goes unheard. */
        for (size_t i = 0; i < t->n_tenants; i++) {
                struct tenant *tn = &t->tenants[i];
                if (!tn->cfg->quota && !tn->cfg->archive_after_usec)
                        continue;
                if ((r = usegroup_open(tn->fs)) < 0 || (r = usage_scan(tn)) < 0)
                        return r;
                autoarchive_update(tn);
        }
        return 0;
}
