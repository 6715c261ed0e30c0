/* SPDX-License-Identifier: MIT */
/*
 * Secrets for remote stores: read by tierd (root), handed to the worker
 * over its control socket only. Never logged, never on D-Bus, argv or in
 * the environment.
 */
#include "credentials.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macro.h"

static char *trim(char *s) {
        while (isspace((unsigned char)*s))
                s++;
        size_t n = strlen(s);
        while (n > 0 && isspace((unsigned char)s[n - 1]))
                s[--n] = 0;
        return s;
}

static int set_value(char *dst, size_t size, const char *v, const char **error) {
        if (!*v || strlen(v) >= size) {
                *error = "empty or overlong value";
                return -EINVAL;
        }
        for (const char *p = v; *p; p++)
                if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e) {
                        *error = "a value holds a space or a control character";
                        return -EINVAL;
                }
        strcpy(dst, v);
        return 0;
}

int credentials_parse(const char *text, const char *profile, struct proto_credentials *ret, const char **error) {
        struct proto_credentials c = { .type = PROTO_CREDENTIALS };
        char buf[16384];
        bool in_default = false, seen_default = false;
        int r = 0;

        if (strlen(text) >= sizeof(buf)) {
                *error = "credentials file too long";
                return -EINVAL;
        }
        strcpy(buf, text);
        for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line && r == 0;
             line = strtok_r(NULL, "\n", &save)) {
                char *l = trim(line), *eq;
                if (!*l || *l == '#' || *l == ';')
                        continue;
                if (*l == '[') {
                        size_t n = strlen(profile);
                        in_default = strncmp(l + 1, profile, n) == 0 && l[n + 1] == ']' && !l[n + 2];
                        seen_default |= in_default;
                        continue;
                }
                if (!in_default)
                        continue;
                if (!(eq = strchr(l, '='))) {
                        *error = "a line in the profile without '='";
                        r = -EINVAL;
                        break;
                }
                *eq = 0;
                char *key = trim(l), *val = trim(eq + 1);
                if (strcmp(key, "aws_access_key_id") == 0)
                        r = set_value(c.access_key, sizeof(c.access_key), val, error);
                else if (strcmp(key, "aws_secret_access_key") == 0)
                        r = set_value(c.secret_key, sizeof(c.secret_key), val, error);
                else if (strcmp(key, "aws_session_token") == 0)
                        r = set_value(c.session_token, sizeof(c.session_token), val, error);
                /* other keys (region, output...) belong to other tools */
        }
        explicit_bzero(buf, sizeof(buf));
        if (r == 0 && !seen_default) {
                *error = "no such profile in it";
                r = -ENOKEY;
        } else if (r == 0 && (!c.access_key[0] || !c.secret_key[0])) {
                *error = "the profile needs aws_access_key_id and aws_secret_access_key";
                r = -ENOKEY;
        }
        if (r == 0)
                *ret = c;
        explicit_bzero(&c, sizeof(c));
        return r;
}

/* The file may be a symbolic link as long as every link it goes through
 * stays inside its directory: kubelet lays a Secret volume out as
 * KEY -> ..data/KEY, ..data -> ..TIMESTAMP/, and renames a new ..data over
 * the old one to change every key at once. A link out of the directory (to
 * /etc/shadow, through /proc) is refused: whoever can
 * write that directory must not read other files through tierd.
 * O_NONBLOCK: a FIFO in the file's place fails the S_ISREG check below
 * instead of stalling tierd. */
static int open_beneath(const char *path, int flags) {
        _cleanup_free_ char *dir = strdup(path);
        if (!dir)
                return -ENOMEM;
        char *slash = strrchr(dir, '/');
        const char *name = slash ? slash + 1 : dir;
        if (slash)
                *slash = 0;
        if (!*name)
                return -EISDIR;
        _cleanup_close_ int dfd = open(!slash ? "." : slash == dir ? "/" : dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        /* Not RESOLVE_NO_XDEV: the file may be a bind mount of its own (a
         * subPath Secret, a container's -v FILE:FILE). */
        struct open_how how = { .flags = (uint64_t)flags | O_CLOEXEC, .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
        long fd = syscall(SYS_openat2, dfd, name, &how, sizeof(how));
        return fd < 0 ? -errno : (int)fd;
}

/* group_other: the mode bits others may have (077: none). */
static int read_beneath(const char *path, char *buf, size_t size, mode_t group_other, const char **error) {
        _cleanup_close_ int fd = open_beneath(path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
        struct stat st;
        size_t n = 0;

        if (fd == -EXDEV || fd == -ELOOP) {
                *error = "it is a symbolic link out of its directory (only links that stay inside it, "
                         "as in a Kubernetes Secret volume, are followed)";
                return -EPERM;
        }
        if (fd < 0) {
                *error = "cannot open it";
                return fd;
        }
        if (fstat(fd, &st) < 0) {
                *error = "cannot open it";
                return -errno;
        }
        if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & group_other)) {
                *error = group_other == 077 ? "it must be a regular file owned by root with mode 0600 or stricter"
                                            : "it must be a regular file owned by root that only root may write";
                return -EPERM;
        }
        for (;;) {
                ssize_t k = read(fd, buf + n, size - 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        *error = "cannot read it";
                        return -errno;
                }
                if (k == 0)
                        break;
                n += (size_t)k;
                if (n >= size - 1) {
                        *error = "it is too long";
                        return -EFBIG;
                }
        }
        buf[n] = 0;
        return 0;
}

int secret_file_read(const char *path, char *buf, size_t size, const char **error) {
        return read_beneath(path, buf, size, 077, error);
}

int token_file_read(const char *path, char *buf, size_t size, const char **error) {
        return read_beneath(path, buf, size, 022, error);
}

int secret_file_stat(const char *path, struct stat *st) {
        _cleanup_close_ int fd = open_beneath(path, O_PATH);
        if (fd < 0)
                return fd;
        return fstat(fd, st) < 0 ? -errno : 0;
}
