/* SPDX-License-Identifier: MIT */
#include "backend.h"

#include <errno.h>
#include <string.h>

#include "url.h"

int backend_open(const struct proto_config *cfg, int store_fd, struct backend **ret) {
        struct backend_url url;
        int r = backend_url_parse(cfg->backend, &url, NULL);
        if (r < 0)
                return r;
        enum backend_kind kind = url.kind;
        backend_url_done(&url);
        switch (kind) {
        case BACKEND_FILE:
                return backend_file_ops.open(cfg, store_fd, ret);
        case BACKEND_S3:
                return backend_s3_ops.open(cfg, store_fd, ret);
        case BACKEND_HTTP:
                return backend_http_ops.open(cfg, store_fd, ret);
        }
        return -EOPNOTSUPP;
}
