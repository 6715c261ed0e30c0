/* SPDX-License-Identifier: MIT */
/*
 * The file a caller named, by path or by fd, found inside one tenant's
 * subvolume through tierd's private mount, and opened again there by name
 * (never through the caller's path or mount).
 */
#include "fileops-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "handle.h"
#include "macro.h"
#include "utf8.h"

int file_job_say(char *message, size_t size, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(message, size, fmt, ap);
        va_end(ap);
        return r;
}

static const char *path_under(const char *path, const char *prefix) {
        size_t n = strlen(prefix);
        if (strncmp(path, prefix, n) != 0 || (path[n] != '/' && path[n] != 0))
                return NULL;
        return path[n] == '/' ? path + n + 1 : path + n;
}

void file_ref_done(struct file_ref *f) {
        free(f->rel);
        free(f->name);
        *f = (struct file_ref){};
}

static int file_ref_set(struct file_ref *ret, struct tenant *tn, const char *rel, const char *name) {
        _cleanup_free_ char *view = NULL;
        if (!name && asprintf(&view, "%s/%s", tn->cfg->mount, rel) < 0)
                return -ENOMEM;
        *ret = (struct file_ref){ .tn = tn, .rel = strdup(rel), .name = utf8_escape(name ?: view) };
        if (!ret->rel || !ret->name) {
                file_ref_done(ret);
                return -ENOMEM;
        }
        return 0;
}

int file_open_beneath(int subvol_fd, const char *rel, int flags, bool cached) {
        struct open_how how = {
                /* openat2 refuses O_PATH with flags it would ignore. */
                .flags = (uint64_t)flags | O_CLOEXEC | O_NOFOLLOW | (flags & O_PATH ? 0 : O_NONBLOCK | O_NOCTTY),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV | (cached ? RESOLVE_CACHED : 0),
        };
        return (int)syscall(SYS_openat2, subvol_fd, rel, &how, sizeof(how));
}

/* On the loop: from the lookup cache only. */
static int open_beneath(const struct file_ref *f, int flags) {
        return file_open_beneath(f->tn->subvol_fd, f->rel, flags, true);
}

int file_ref_cached(const struct file_ref *f) {
        int fd = open_beneath(f, O_PATH);
        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

int file_ref_open_error(const struct file_ref *f, int error, char *message, size_t size) {
        if (error == -EAGAIN)
                return file_job_say(message, size, -EAGAIN,
                                    "%s: its directories are not in the kernel's lookup cache now (tierd's event loop "
                                    "makes no lookup): try again", f->name);
        return file_job_say(message, size, error == -ELOOP ? -EINVAL : error, "%s: %s", f->name,
                            error == -ELOOP   ? "is a symlink"
                            : error == -EXDEV ? "leads outside the tenant"
                                              : strerror(-error));
}

/* Only regular files are served. */
int file_ref_open(const struct file_ref *f, int flags, int *ret_fd, char *message, size_t size) {
        struct stat st;
        long fd = open_beneath(f, flags);

        if (fd < 0)
                return file_ref_open_error(f, -errno, message, size);
        if (fstat((int)fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close((int)fd);
                return file_job_say(message, size, -EINVAL, "%s: not a regular file", f->name);
        }
        /* Jobs wait their turn: the name may lead elsewhere by now. */
        if (f->ino && (st.st_ino != f->ino || st.st_dev != f->dev)) {
                close((int)fd);
                return file_job_say(message, size, -ENOENT, "%s: renamed or replaced since it was named, not touched", f->name);
        }
        *ret_fd = (int)fd;
        return 0;
}

int file_ref_name(struct tierd *t, const char *path, struct file_ref *ret, char *message, size_t size) {
        const char *rel = NULL;
        struct tenant *tn = NULL;

        if (path[0] != '/')
                return file_job_say(message, size, -EINVAL, "%s: not an absolute path", path);
        for (size_t i = 0; i < t->n_tenants && !rel; i++) {
                tn = &t->tenants[i];
                rel = path_under(path, tn->cfg->mount) ?: path_under(path, tn->cfg->subvolume);
        }
        if (!rel)
                return file_job_say(message, size, -EXDEV, "%s: not in any tenant's subvolume or view", path);
        if (!*rel)
                return file_job_say(message, size, -EINVAL, "%s: is the tenant's root directory, not a file", path);
        return file_ref_set(ret, tn, rel, path);
}

int file_ref_from_path(struct tierd *t, const char *path, struct file_ref *ret, char *message, size_t size) {
        struct stat st;
        int fd = -1;
        int r = file_ref_name(t, path, ret, message, size);
        if (r < 0)
                return r;
        /* Named wrong: said now, to the caller, rather than in the job's
         * result; but a path not in the lookup cache is not walked here,
         * and the job finds out (file_job_when_cached): -EAGAIN, ret set. */
        r = file_ref_open(ret, O_PATH, &fd, message, size);
        if (r == -EAGAIN)
                return r;
        if (r < 0) {
                file_ref_done(ret);
                return r;
        }
        if (fstat(fd, &st) == 0)
                ret->dev = st.st_dev, ret->ino = st.st_ino;
        close(fd);
        return 0;
}

/* The file behind a caller's fd, found again through tierd's private mount
 * by its handle; its name there must lead to the same inode from beneath
 * the subvolume, or the file is not the tenant's. */
int file_ref_from_fd(struct tierd *t, int fd, struct file_ref *ret, char *message, size_t size) {
        union file_handle_buf h = { .fh.handle_bytes = MAX_HANDLE_SZ };
        struct stat st = {}, sst;
        struct statx stx;
        bool named = false;
        int mount_id;

        /* The caller's fd may be on NFS or FUSE: a plain fstat could flush
         * its dirty pages or wait on a server, on the loop. DONT_SYNC and
         * only the type, device and inode: cached, never a round trip. And
         * nothing more is asked of it unless it is on a tenant's device. */
        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &stx) < 0)
                return file_job_say(message, size, -errno, "%m");
        st.st_mode = stx.stx_mode;
        st.st_ino = stx.stx_ino;
        st.st_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
        for (size_t i = 0; i < t->n_tenants; i++) {
                struct tenant *tn = &t->tenants[i];
                char link[32], where[PATH_MAX];
                const char *rel;
                ssize_t n;

                if (fstat(tn->subvol_fd, &sst) < 0 || sst.st_dev != st.st_dev)
                        continue;
                if (!S_ISREG(st.st_mode))
                        return file_job_say(message, size, -EINVAL, "not a regular file");
                if (!named && name_to_handle_at(fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0)
                        return file_job_say(message, size, -EXDEV, "not on a tiered filesystem (%m)");
                named = true;
                _cleanup_close_ int found = open_by_handle_at(tn->fs->root_fd, &h.fh, O_PATH | O_CLOEXEC);
                if (found < 0)
                        continue;
                snprintf(link, sizeof(link), "/proc/self/fd/%d", found);
                n = readlink(link, where, sizeof(where) - 1);
                if (n <= 1 || where[0] != '/')
                        continue;
                where[n] = 0;
                rel = strcmp(tn->subvol_rel, ".") == 0 ? where + 1 : path_under(where + 1, tn->subvol_rel);
                if (!rel || !*rel)
                        continue;
                /* The caller's open file holds its dentry and every parent's:
                 * the walk is cached (a level that is not is never looked
                 * up on the loop). */
                _cleanup_close_ int again = file_open_beneath(tn->subvol_fd, rel, O_PATH, true);
                bool cached = !(again < 0 && errno == EAGAIN);
                if (cached && (again < 0 || fstat(again, &sst) < 0 || sst.st_ino != st.st_ino || sst.st_dev != st.st_dev))
                        continue;
                /* Not cached (a directory's ACL not read yet, say): the
                 * job's walk on a thread checks the name leads to this inode. */
                int r = file_ref_set(ret, tn, rel, NULL);
                if (r < 0)
                        return r;
                ret->dev = st.st_dev, ret->ino = st.st_ino;
                if (!cached)
                        return file_ref_open_error(ret, -EAGAIN, message, size);
                return 0;
        }
        return file_job_say(message, size, -EXDEV, "not in any tenant's subvolume");
}
