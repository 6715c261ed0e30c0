/* SPDX-License-Identifier: MIT */
#include "backend.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "objkey.h"
#include "progress.h"
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

void backend_fetch_many(struct backend *b, struct fetch_part *parts, size_t n) {
        if (b->ops->fetch_many) {
                b->ops->fetch_many(b, parts, n);
                return;
        }
        for (size_t i = 0; i < n; i++)
                parts[i].result = b->ops->fetch(b, parts[i].key, parts[i].offset, parts[i].length, parts[i].sink,
                                                parts[i].ctx);
}

/* The lock, waited for while saying "still moving": another thread may
 * hold it for a long upload, and tierd must not take the wait for a hang. */
static void gc_lock(struct backend *b) {
        for (;;) {
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec++;
                if (pthread_mutex_timedlock(&b->gc_lock, &until) == 0)
                        return;
                progress_report();
        }
}

int backend_store_once(struct backend *b, const char *key, int fd, uint64_t size, const uint8_t sha256[32],
                       bool *reused) {
        uint64_t have = 0;
        int r;

        if (reused)
                *reused = false;
        gc_lock(b);
        r = b->ops->exists(b, key, &have, NULL);
        if (r == 0 && have == size && (!b->ops->touch || (r = b->ops->touch(b, key)) == 0)) {
                pthread_mutex_unlock(&b->gc_lock);
                if (reused)
                        *reused = true;
                return 0;
        }
        if (r == -ENOENT) {
                /* Not there: uploaded without the lock (many at once). A
                 * collection's delete cannot touch it before it is whole,
                 * and finds it young after. */
                pthread_mutex_unlock(&b->gc_lock);
                return b->ops->store(b, key, fd, size, sha256, 0);
        }
        /* There, but another size, or it cannot be refreshed: uploaded
         * again, the lock held, so that a delete that found it old a
         * moment ago does not remove the new upload. */
        if (r < 0)
                log_warning("%s: cannot refresh the object in the store (%s), uploading it again", key, strerror(-r));
        r = b->ops->store(b, key, fd, size, sha256, BACKEND_STORE_REPLACE);
        pthread_mutex_unlock(&b->gc_lock);
        return r;
}

int backend_put(struct backend *b, const char *key, int fd, uint64_t size, const uint8_t sha256[32], unsigned how) {
        struct proto_object o;
        /* A key a collection may delete by its age (an access trace saved
         * anew): under the lock of its check and delete, so that a write
         * between the two is never what goes. */
        bool collected = object_key_parse(key, &o) == 0;
        if (collected)
                gc_lock(b);
        int r = b->ops->store(b, key, fd, size, sha256, how);
        if (collected)
                pthread_mutex_unlock(&b->gc_lock);
        return r;
}

int backend_remove_if_old(struct backend *b, const char *key, uint64_t size, int64_t before) {
        uint64_t have = 0;
        int64_t mtime = 0;
        int r;

        gc_lock(b);
        /* INT64_MAX: no age asked, the size alone (a store that does not
         * say ages can still delete). */
        r = b->ops->exists(b, key, &have, before == INT64_MAX ? NULL : &mtime);
        if (r == -ENOENT)
                r = 0; /* gone already */
        else if (r == 0 && (have != size || mtime >= before))
                r = -EBUSY; /* written or refreshed since it was listed */
        else if (r == 0)
                r = b->ops->remove(b, key);
        pthread_mutex_unlock(&b->gc_lock);
        return r;
}
