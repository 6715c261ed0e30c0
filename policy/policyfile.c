/* SPDX-License-Identifier: MIT */
/* A policy read from its file, or from the directory a ConfigMap mounts. */
#include "policy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

int policy_read_file(const char *path, char **ret, size_t *ret_len, char **error) {
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t n = 0;

        if (error)
                *error = NULL;
        /* A directory, as a mounted ConfigMap is, holds policy.json. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
                int file = openat(fd, POLICY_DIR_FILE, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                close(fd);
                fd = file;
        }
        if (fd < 0 || fstat(fd, &st) < 0) {
                int r = -errno;
                if (error && asprintf(error, "%s: cannot read policy: %s", path, strerror(-r)) < 0)
                        *error = NULL;
                return r;
        }
        if (!S_ISREG(st.st_mode) || st.st_size > POLICY_FILE_MAX) {
                if (error && asprintf(error, "%s: not a regular file of at most %u bytes", path, POLICY_FILE_MAX) < 0)
                        *error = NULL;
                return -EINVAL;
        }
        buf = malloc((size_t)st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t k = read(fd, buf + n, (size_t)st.st_size + 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                n += (size_t)k;
                if (n > (size_t)st.st_size) {
                        if (error && asprintf(error, "%s: policy changed while being read", path) < 0)
                                *error = NULL;
                        return -EAGAIN;
                }
        }
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        *ret_len = n;
        return 0;
}

int policy_load_file(const char *path, struct policy **ret, char **error) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        int r = policy_read_file(path, &buf, &n, error);
        if (r < 0)
                return r;
        return policy_parse(buf, n, path, ret, error);
}
