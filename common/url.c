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
        if (strncmp(url, "s3://", 5) == 0 || strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0) {
                *error = "this tierd build serves only file:// backends (S3 and HTTP are not implemented yet)";
                return -EOPNOTSUPP;
        }
        *error = "unknown backend URL scheme (expected file://, http://, https:// or s3://)";
        return -EINVAL;
}

void backend_url_done(struct backend_url *u) {
        free(u->path);
        u->path = NULL;
}
