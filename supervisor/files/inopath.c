/* SPDX-License-Identifier: MIT */
#include "inopath.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "macro.h"

#define BTRFS_SUBVOL_ROOT_INO 256 /* BTRFS_FIRST_FREE_OBJECTID: every subvolume's root directory */
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
