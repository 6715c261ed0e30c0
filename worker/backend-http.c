/* SPDX-License-Identifier: MIT */
/*
 * http(s)://HOST/PREFIX: a plain HTTP object store (ranged GET, PUT, HEAD,
 * DELETE and WebDAV MOVE), such as nginx with WebDAV, with optional configured headers (a
 * bearer token).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

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

/* The path of a key on the server ("/PREFIX/KEY"): a MOVE's Destination.
 * RFC 4918 allows an absolute path there, and servers that check the host
 * of a full URL (nginx) compare it without the port. */
static const char *object_path(const struct remote *r) {
        const char *p = strstr(r->object_base, "://");
        p = p ? strchr(p + 3, '/') : NULL;
        return p ? p : "/";
}

/* MOVE from to key; unless overwrite, never over an object already there
 * (Overwrite: F): -EEXIST if key exists. -EOPNOTSUPP: the server has no
 * MOVE. */
static int http_move(struct remote *r, const char *from, const char *key, bool overwrite) {
        struct http_req q;
        int ret;

        http_req_init(&q, "MOVE");
        remote_object_url(r, &q, from, NULL);
        ret = http_req_header(&q, "Destination: %s%s", object_path(r), key);
        if (ret == 0)
                ret = http_req_header(&q, "Overwrite: %s", overwrite ? "T" : "F");
        if (ret == 0)
                ret = remote_request(r, &q, from);
        if (ret < 0 && (q.status == 405 || q.status == 501)) {
                log_error("tenant %s: the store at %s does not support WebDAV MOVE, which an upload needs so that it "
                          "never replaces a stored object (nginx: dav_methods PUT DELETE MOVE)",
                          r->tenant, r->object_base);
                ret = -EOPNOTSUPP;
        }
        http_req_done(&q);
        return ret;
}

/* An upload never writes under a key that another file may already depend
 * on: the bytes go to a name of this upload's own, are checked against the
 * key's hash, and only then move to the key, never over one there
 * (Overwrite: F; some WebDAV servers delete the destination before they
 * move, a window where the object is missing). A key there already holds
 * the same bytes and is kept; BACKEND_STORE_REPLACE (it has another size)
 * replaces it; a fenced write (BACKEND_STORE_IF_ABSENT) gets -EEXIST. nginx
 * checks and renames in two steps: two writers racing for one fenced key
 * can both succeed, so a plain HTTP store fences no better than that. A
 * failure leaves nothing: the upload's own name is removed, the key
 * untouched. */
static int http_store(struct backend *b, const char *key, int fd, uint64_t size, const uint8_t sha256[32],
                      unsigned flags) {
        struct remote *r = (struct remote *)b;
        _cleanup_md_ctx_ EVP_MD_CTX *md = EVP_MD_CTX_new();
        char tmp[STUB_KEY_MAX + 64];
        uint64_t have;
        int ret;

        if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
                return -ENOMEM;
        uint64_t nonce = 0;
        if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
                return -errno;
        /* Unique across workers of every container (a pid is not). */
        snprintf(tmp, sizeof(tmp), "%s.tierd-upload.%016llx", key, (unsigned long long)nonce);
        ret = remote_put_checked(r, tmp, NULL, fd, 0, size, NULL, NULL, md, NULL, 0);
        if (ret == 0)
                ret = remote_upload_matches(md, sha256);
        if (ret == 0) {
                ret = http_move(r, tmp, key, flags & BACKEND_STORE_REPLACE);
                /* Our name is gone: a move whose answer was lost, retried.
                 * Content-addressed, the key being there with its size is
                 * what the check below asks; a fenced write cannot tell
                 * whose it is. */
                if (ret == -ENOENT && !(flags & BACKEND_STORE_IF_ABSENT))
                        ret = 0;
        }
        if (ret < 0)
                (void)remote_remove(b, tmp);
        if (ret == -EEXIST && !(flags & BACKEND_STORE_IF_ABSENT))
                ret = 0; /* the same bytes are there: kept, checked below */
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
        .store = http_store,
        REMOTE_BACKEND_OPS,
};
