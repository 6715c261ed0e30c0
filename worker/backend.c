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
        backend_url_done(&url);
        switch (url.kind) {
        case BACKEND_FILE:
                return backend_file_ops.open(cfg, store_fd, ret);
        default:
                return -EOPNOTSUPP;
        }
}
