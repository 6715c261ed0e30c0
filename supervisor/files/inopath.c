/* SPDX-License-Identifier: MIT */
#include "inopath.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "macro.h"

#define NAMES_MAX 4096             /* bytes of names asked for: the most the kernel copies */
/* The kernel builds every link's path, each from the file up to the
 * subvolume's root, whatever fits the buffer: a file with many links
 * would cost as many walks, on the event loop. */
#define LINKS_MAX 8

/* The names of inode ino, each relative to the root of subvol_fd's
 * subvolume, into buf: a btrfs_data_container whose val[i] are offsets of
 * NUL-terminated names from val. The count of names, or a negative errno
 * (-ENOTTY: not btrfs). */
static int names_of(int subvol_fd, uint64_t ino, struct btrfs_data_container *buf, size_t size) {
        struct btrfs_ioctl_ino_path_args args = { .inum = ino, .size = size, .fspath = (uintptr_t)buf };
        if (ioctl(subvol_fd, BTRFS_IOC_INO_PATHS, &args) < 0)
                return -errno;
        /* No more offsets than the buffer holds, whatever the count says. */
        size_t room = (size - offsetof(struct btrfs_data_container, val)) / sizeof(buf->val[0]);
        return (int)MIN((size_t)buf->elem_cnt, room);
}

static const char *name_at(const struct btrfs_data_container *buf, size_t size, int i) {
        size_t off = (size_t)buf->val[i], base = offsetof(struct btrfs_data_container, val);
        const char *name = (const char *)buf->val + off;
        /* The kernel's own offsets; checked all the same, as any reply. */
        if (off >= size - base || !memchr(name, 0, size - base - off))
                return NULL;
        return name;
}

/* The tenant's directory beneath its subvolume's root: "" when it is that
 * root (a subvolume of its own, as tierd recommends), else its one name. */
static char *dir_prefix(int subvol_fd, const struct stat *dir) {
        if (dir->st_ino == BTRFS_SUBVOL_ROOT_INO)
                return strdup("");
        _cleanup_free_ struct btrfs_data_container *buf = malloc(NAMES_MAX);
        if (!buf || names_of(subvol_fd, dir->st_ino, buf, NAMES_MAX) < 1)
                return NULL;
        const char *name = name_at(buf, NAMES_MAX, 0);
        return name ? strdup(name) : NULL;
}

char *inode_rel_beneath(int subvol_fd, int fd) {
        struct stat st, dir;
        /* Another subvolume (its own st_dev), or not a file: not the tenant's. */
        if (fstat(fd, &st) < 0 || fstat(subvol_fd, &dir) < 0 || st.st_dev != dir.st_dev || !S_ISREG(st.st_mode) ||
            st.st_nlink > LINKS_MAX)
                return NULL;
        _cleanup_free_ char *prefix = dir_prefix(subvol_fd, &dir);
        _cleanup_free_ struct btrfs_data_container *buf = malloc(NAMES_MAX);
        if (!prefix || !buf)
                return NULL;
        int n = names_of(subvol_fd, st.st_ino, buf, NAMES_MAX);
        size_t k = strlen(prefix);
        for (int i = 0; i < n; i++) {
                const char *name = name_at(buf, NAMES_MAX, i);
                if (!name || (k && (strncmp(name, prefix, k) != 0 || name[k] != '/')))
                        continue; /* a link outside the tenant's directory */
                const char *rel = k ? name + k + 1 : name;
                if (*rel && path_beneath_is(subvol_fd, rel, &st))
                        return strdup(rel);
        }
        return NULL;
}

int subvol_rel_of_path(const char *subvol_rel, const char *where, char **ret) {
        static const char deleted[] = " (deleted)";
        size_t n = strlen(where);

        if (where[0] != '/')
                return -ENOENT; /* not a path: a pipe, a socket, an anonymous inode */
        /* Unlinked: no name (a name could only match by chance). */
        if (n >= sizeof(deleted) - 1 && strcmp(where + n - (sizeof(deleted) - 1), deleted) == 0)
                return -ENOENT;
        const char *rel = where + 1;
        if (strcmp(subvol_rel, ".") != 0) {
                size_t k = strlen(subvol_rel);
                if (strncmp(where + 1, subvol_rel, k) != 0 || (where[1 + k] != '/' && where[1 + k] != 0))
                        return -ENOENT;
                rel = where[1 + k] ? where + 2 + k : ""; /* "": the subvolume itself */
        }
        *ret = strdup(rel);
        return *ret ? 0 : -ENOMEM;
}

/* The path of fd's /proc link beneath subvol_rel (malloc'd): 0; -ENOENT:
 * not beneath it, deleted; -EAGAIN: the link reads "/" (a file reached by
 * handle whose dentry was dropped: it has a name, not one the dcache has). */
int subvol_rel_of_link(const char *subvol_rel, int fd, char **ret) {
        char link[40], where[PATH_MAX];

        /* thread-self: also right on a thread with an fd table of its own (offthread.h). */
        snprintf(link, sizeof(link), "/proc/thread-self/fd/%d", fd);
        ssize_t n = readlink(link, where, sizeof(where) - 1);
        if (n == 1 && where[0] == '/')
                return -EAGAIN;
        if (n <= 1)
                return -ENOENT;
        where[n] = 0;
        return subvol_rel_of_path(subvol_rel, where, ret);
}

char *subvol_rel_of_fd(const char *subvol_rel, int subvol_fd, int fd) {
        char *rel = NULL;
        int r = subvol_rel_of_link(subvol_rel, fd, &rel);
        if (r == -EAGAIN && subvol_fd >= 0)
                return inode_rel_beneath(subvol_fd, fd);
        return r < 0 ? NULL : rel;
}
