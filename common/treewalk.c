/* SPDX-License-Identifier: MIT */
#include "treewalk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "macro.h"

/* Gone, or swapped for another kind of entry, meanwhile: passed over. */
static bool gone(int e) { return e == ENOENT || e == ENOTDIR || e == ELOOP; }

static int walk_dir(int dir_fd, unsigned depth, unsigned max_depth, treewalk_visit visit, void *userdata,
                    unsigned long *skipped) {
        _cleanup_closedir_ DIR *d = fdopendir(dir_fd);
        struct dirent *de;
        int r = 0;

        if (!d) {
                close(dir_fd);
                return -errno;
        }
        while (r == 0 && (errno = 0, de = readdir(d))) {
                struct stat st;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = gone(errno) ? 0 : -errno;
                        continue;
                }
                if (!S_ISDIR(st.st_mode)) {
                        r = visit(userdata, dirfd(d), de->d_name, &st);
                        continue;
                }
                if (depth >= max_depth) {
                        if (skipped)
                                (*skipped)++;
                        continue;
                }
                int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                if (sub < 0)
                        r = gone(errno) ? 0 : -errno;
                else
                        r = walk_dir(sub, depth + 1, max_depth, visit, userdata, skipped);
        }
        if (r == 0 && errno)
                r = -errno;
        return r;
}

int treewalk(int dir_fd, unsigned max_depth, treewalk_visit visit, void *userdata, unsigned long *skipped) {
        return walk_dir(dir_fd, 0, max_depth, visit, userdata, skipped);
}

ssize_t treewalk_xattr(int dir_fd, const char *name, const char *xattr, void *buf, size_t size) {
        char path[PATH_MAX + 64];
        if ((size_t)snprintf(path, sizeof(path), "/proc/thread-self/fd/%d/%s", dir_fd, name) >= sizeof(path))
                return -ENAMETOOLONG;
        ssize_t n = lgetxattr(path, xattr, buf, size);
        return n < 0 ? -errno : n;
}
