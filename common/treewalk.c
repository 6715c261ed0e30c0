/* SPDX-License-Identifier: MIT */
#include "treewalk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "macro.h"

/* Gone, or swapped for another kind of entry, meanwhile: passed over. */
static bool gone(int e) { return e == ENOENT || e == ENOTDIR || e == ELOOP; }

struct walk {
        unsigned max_depth;
        treewalk_visit visit;           /* or: */
        treewalk_path_visit path_visit; /* with paths, on one filesystem */
        treewalk_path_error path_error; /* then: an entry that cannot be read, and the walk goes on */
        void *userdata;
        unsigned long *skipped;
        dev_t dev;
        size_t len;
        char path[PATH_MAX];
};

/* A path walk reports what it cannot read (path_error) and goes on; a walk
 * of tierd's stops at the first error. */
static int failed(struct walk *w, int r) {
        if (!w->path_error || r == -ENOMEM)
                return r;
        w->path_error(w->userdata, w->path, r);
        return 0;
}

static int walk_dir(struct walk *w, int dir_fd, unsigned depth) {
        _cleanup_closedir_ DIR *d = fdopendir(dir_fd);
        struct dirent *de;
        int r = 0;

        if (!d) {
                close(dir_fd);
                return -errno;
        }
        while (r == 0 && (errno = 0, de = readdir(d))) {
                struct stat st;
                size_t len = w->len;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (w->path_visit) {
                        int n = snprintf(w->path + len, sizeof(w->path) - len, "/%s", de->d_name);
                        if (n < 0 || (size_t)n >= sizeof(w->path) - len) {
                                w->path[len] = '\0';
                                r = failed(w, -ENAMETOOLONG);
                                continue;
                        }
                        w->len += (size_t)n;
                }
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = gone(errno) ? 0 : failed(w, -errno);
                        w->len = len;
                        w->path[len] = '\0';
                        continue;
                }
                if (!S_ISDIR(st.st_mode)) {
                        if (w->path_visit)
                                r = w->path_visit(w->userdata, w->path, &st);
                        else if (w->visit)
                                r = w->visit(w->userdata, dirfd(d), de->d_name, &st);
                } else if (depth >= w->max_depth) {
                        if (w->skipped)
                                (*w->skipped)++;
                } else if (!w->path_visit || st.st_dev == w->dev) {
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                        if (sub < 0)
                                r = gone(errno) ? 0 : failed(w, -errno);
                        else
                                r = walk_dir(w, sub, depth + 1);
                }
                w->len = len;
                w->path[len] = '\0';
        }
        if (r == 0 && errno)
                r = failed(w, -errno);
        return r;
}

int treewalk(int dir_fd, unsigned max_depth, treewalk_visit visit, void *userdata, unsigned long *skipped) {
        struct walk *w = calloc(1, sizeof(*w));
        if (!w) {
                close(dir_fd);
                return -ENOMEM;
        }
        *w = (struct walk){ .max_depth = max_depth, .visit = visit, .userdata = userdata, .skipped = skipped };
        int r = walk_dir(w, dir_fd, 0);
        free(w);
        return r;
}

int treewalk_paths(int dir_fd, const char *root, unsigned max_depth, treewalk_path_visit visit,
                   treewalk_path_error error, void *userdata, unsigned long *skipped) {
        struct stat st;
        struct walk *w = calloc(1, sizeof(*w));
        int r;
        if (!w || fstat(dir_fd, &st) < 0) {
                r = w ? -errno : -ENOMEM;
                free(w);
                close(dir_fd);
                return r;
        }
        *w = (struct walk){ .max_depth = max_depth, .path_visit = visit, .path_error = error, .userdata = userdata,
                            .skipped = skipped, .dev = st.st_dev };
        /* "/" joins names: a root of "/" or "dir/" gives no "//". */
        size_t n = strlen(root);
        while (n > 1 && root[n - 1] == '/')
                n--;
        if (n == 1 && root[0] == '/')
                n = 0;
        if (n >= sizeof(w->path)) {
                free(w);
                close(dir_fd);
                return -ENAMETOOLONG;
        }
        snprintf(w->path, sizeof(w->path), "%.*s", (int)n, root);
        w->len = n;
        r = walk_dir(w, dir_fd, 0);
        free(w);
        return r;
}

ssize_t treewalk_xattr(int dir_fd, const char *name, const char *xattr, void *buf, size_t size) {
        char path[PATH_MAX + 64];
        if ((size_t)snprintf(path, sizeof(path), "/proc/thread-self/fd/%d/%s", dir_fd, name) >= sizeof(path))
                return -ENAMETOOLONG;
        ssize_t n = lgetxattr(path, xattr, buf, size);
        return n < 0 ? -errno : n;
}
