/* SPDX-License-Identifier: MIT */
#include "url.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int file_path_valid(const char *p, const char **error) {
        if (p[0] != '/') {
                *error = "file:// backend needs an absolute path (file:///DIR)";
                return -EINVAL;
        }
        for (const char *c = p; *c; c++) {
                if ((unsigned char)*c < 0x20) {
                        *error = "control character in backend path";
                        return -EINVAL;
                }
                if (c[0] == '/' && c[1] == '.' && c[2] == '.' && (c[3] == '/' || c[3] == 0)) {
                        *error = "'..' in backend path";
                        return -EINVAL;
                }
        }
        return 0;
}

/* S3 bucket names: 3-63 of lowercase letters, digits, '-' and '.'. */
static int bucket_valid(const char *b, size_t n, const char **error) {
        if (n < 3 || n > 63) {
                *error = "S3 bucket name must have 3 to 63 characters (s3://BUCKET/PREFIX)";
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++)
                if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '-' || b[i] == '.')) {
                        *error = "S3 bucket name may use only lowercase letters, digits, '-' and '.'";
                        return -EINVAL;
                }
        return 0;
}

static int host_valid(const char *h, size_t n, const char **error) {
        if (n == 0) {
                *error = "HTTP backend URL has no host";
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++)
                if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') || (h[i] >= '0' && h[i] <= '9') ||
                      strchr("-.:[]", h[i]))) {
                        *error = "HTTP backend host may use only letters, digits, '-', '.', ':' and brackets (no user:password@)";
                        return -EINVAL;
                }
        return 0;
}

/* A key prefix: path segments of unreserved characters, so object URLs
 * need no escaping and every server signs them the same way. */
static int prefix_set(struct backend_url *u, const char *p, const char **error) {
        size_t n = strlen(p);
        while (n > 0 && p[n - 1] == '/')
                n--;
        for (size_t i = 0; i < n; i++) {
                char c = p[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~/", c)) ||
                    (c == '/' && (i == 0 || p[i - 1] == '/'))) {
                        *error = "backend prefix may use only letters, digits, '-', '.', '_', '~' and single '/'";
                        return -EINVAL;
                }
        }
        if ((n == 2 && strncmp(p, "..", 2) == 0) || strstr(p, "/../") || strncmp(p, "../", 3) == 0) {
                *error = "'..' in backend prefix";
                return -EINVAL;
        }
        u->prefix = strndup(p, n);
        return u->prefix ? 0 : -ENOMEM;
}

int backend_url_parse(const char *url, struct backend_url *ret, const char **error) {
        const char *dummy;
        int r;

        if (!error)
                error = &dummy;
        *ret = (struct backend_url){};
        if (!url || !*url) {
                *error = "empty backend URL";
                return -EINVAL;
        }
        if (strncmp(url, "file://", 7) == 0) {
                const char *p = url + 7;
                r = file_path_valid(p, error);
                if (r < 0)
                        return r;
                ret->kind = BACKEND_FILE;
                ret->path = strdup(p);
                if (!ret->path)
                        return -ENOMEM;
                /* Trailing slashes carry no meaning: "file:///a/" is "/a". */
                for (size_t n = strlen(ret->path); n > 1 && ret->path[n - 1] == '/'; n--)
                        ret->path[n - 1] = 0;
                return 0;
        }
        if (strncmp(url, "s3://", 5) == 0) {
                const char *b = url + 5, *slash = strchr(b, '/');
                size_t n = slash ? (size_t)(slash - b) : strlen(b);
                r = bucket_valid(b, n, error);
                if (r < 0)
                        return r;
                ret->kind = BACKEND_S3;
                ret->bucket = strndup(b, n);
                r = prefix_set(ret, slash ? slash + 1 : "", error);
                if (r < 0 || !ret->bucket) {
                        backend_url_done(ret);
                        return r < 0 ? r : -ENOMEM;
                }
                return 0;
        }
        if (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0) {
                const char *h = strstr(url, "://") + 3, *slash = strchr(h, '/');
                size_t n = slash ? (size_t)(slash - h) : strlen(h);
                r = host_valid(h, n, error);
                if (r < 0)
                        return r;
                ret->kind = BACKEND_HTTP;
                ret->base = strndup(url, (size_t)(h - url) + n);
                r = prefix_set(ret, slash ? slash + 1 : "", error);
                if (r < 0 || !ret->base) {
                        backend_url_done(ret);
                        return r < 0 ? r : -ENOMEM;
                }
                return 0;
        }
        *error = "unknown backend URL scheme (expected file://, http://, https:// or s3://)";
        return -EINVAL;
}

void backend_url_done(struct backend_url *u) {
        free(u->path);
        free(u->bucket);
        free(u->base);
        free(u->prefix);
        *u = (struct backend_url){};
}
