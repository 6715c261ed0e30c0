/* SPDX-License-Identifier: MIT */
#include "backend.h"

#include <errno.h>
#include <string.h>

#include "log.h"
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
                r = backend_file_ops.open(cfg, store_fd, ret);
                break;
        case BACKEND_S3:
                r = backend_s3_ops.open(cfg, store_fd, ret);
                break;
        case BACKEND_HTTP:
                r = backend_http_ops.open(cfg, store_fd, ret);
                break;
        default:
                return -EOPNOTSUPP;
        }
        if (r == 0)
                pthread_mutex_init(&(*ret)->gc_lock, NULL);
        return r;
}

bool backend_reuse(struct backend *b, const char *key, uint64_t size) {
        uint64_t have = 0;
        bool reuse;

        pthread_mutex_lock(&b->gc_lock);
        reuse = b->ops->exists(b, key, &have, NULL) == 0 && have == size;
        /* A store that cannot refresh cannot collect either (no list). */
        if (reuse && b->ops->touch && b->ops->touch(b, key) < 0) {
                log_warning("%s: cannot refresh the object in the store, uploading it again", key);
                reuse = false;
        }
        pthread_mutex_unlock(&b->gc_lock);
        return reuse;
}

int backend_remove_if_old(struct backend *b, const char *key, uint64_t size, int64_t before) {
        uint64_t have = 0;
        int64_t mtime = 0;
        int r;

        pthread_mutex_lock(&b->gc_lock);
        r = b->ops->exists(b, key, &have, &mtime);
        if (r == -ENOENT)
                r = 0; /* gone already */
        else if (r == 0 && (have != size || mtime >= before))
                r = -EBUSY; /* written or refreshed since it was listed */
        else if (r == 0)
                r = b->ops->remove(b, key);
        pthread_mutex_unlock(&b->gc_lock);
        return r;
}
