/* SPDX-License-Identifier: MIT */
/*
 * http(s)://HOST/PREFIX: a plain HTTP object store (ranged GET, PUT, HEAD,
 * DELETE), such as nginx with WebDAV, with optional configured headers (a
 * bearer token).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "http.h"
#include "log.h"
#include "macro.h"
#include "url.h"

static int http_open(const struct proto_config *cfg, int store_fd, struct backend **ret) {
        struct backend_url url;
        struct remote *r;
        int k;

        (void)store_fd;
        k = backend_url_parse(cfg->backend, &url, NULL);
        if (k < 0)
                return k;
        r = calloc(1, sizeof(*r));
        if (!r || asprintf(&r->object_base, "%s/%s%s", url.base, url.prefix, *url.prefix ? "/" : "") < 0) {
                free(r);
                backend_url_done(&url);
                return -ENOMEM;
        }
        backend_url_done(&url);
        k = remote_init(r, cfg, false);
        if (k < 0) {
                remote_close(&r->base);
                return k;
        }
        *ret = &r->base;
        return 0;
}

static int http_store(struct backend *b, const char *key, int fd, uint64_t size, const uint8_t sha256[32],
                      unsigned flags) {
        struct remote *r = (struct remote *)b;
        _cleanup_md_ctx_ EVP_MD_CTX *md = EVP_MD_CTX_new();
        uint64_t have;
        int ret;

        if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
                return -ENOMEM;
        /* A plain server may ignore If-None-Match: such a store offers no
         * fencing between two writers of one catalog. */
        struct curl_slist *h = flags & BACKEND_STORE_IF_ABSENT ? curl_slist_append(NULL, "If-None-Match: *") : NULL;
        if ((flags & BACKEND_STORE_IF_ABSENT) && !h)
                return -ENOMEM;
        ret = remote_put_checked(r, key, NULL, fd, 0, size, h, NULL, md, NULL, 0);
        curl_slist_free_all(h);
        if (ret < 0)
                return ret;
        ret = remote_upload_matches(r, md, key, sha256);
        if (ret < 0)
                return ret;
        ret = remote_exists(b, key, &have, NULL);
        if (ret == 0 && have != size) {
                log_error("tenant %s: %s: stored %llu bytes, the store says %llu", r->tenant, key,
                          (unsigned long long)size, (unsigned long long)have);
                ret = -EIO;
        }
        return ret;
}

const struct backend_ops backend_http_ops = {
        .scheme = "http",
        .open = http_open,
        .close = remote_close,
        .fetch = remote_fetch,
        .exists = remote_exists,
        .store = http_store,
        .remove = remote_remove,
};
