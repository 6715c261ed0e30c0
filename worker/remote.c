/* SPDX-License-Identifier: MIT */
/*
 * The rest of a remote store's face: what tierd hands a running worker
 * (headers, addresses), uploads, and the one-request verbs (exists,
 * remove) shared by S3 and plain HTTP. The requests themselves: http.c.
 */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* *slot becomes the lines of text: a new list, swapped in whole under the
 * lock, so a transfer takes either the old or the new. */
static int set_list(struct remote *r, struct curl_slist **slot, const char *text) {
        struct curl_slist *list = NULL, *old;
        char lines[PROTO_HEADERS_MAX];
        int ret = 0;

        snprintf(lines, sizeof(lines), "%s", text);
        for (char *save = NULL, *l = strtok_r(lines, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                struct curl_slist *n = curl_slist_append(list, l);
                if (!n) {
                        ret = -ENOMEM;
                        break;
                }
                list = n;
        }
        explicit_bzero(lines, sizeof(lines));
        if (ret < 0) {
                curl_slist_free_all(list);
                return ret;
        }
        pthread_mutex_lock(&r->lock);
        old = *slot;
        *slot = list;
        pthread_mutex_unlock(&r->lock);
        for (struct curl_slist *l = old; l; l = l->next)
                explicit_bzero(l->data, strlen(l->data)); /* an old token stays nowhere */
        curl_slist_free_all(old);
        return 0;
}

/* Configured headers, one per line (tierd already read "@FILE"s). */
int remote_set_headers(struct backend *b, const char *text) {
        struct remote *r = (struct remote *)b;
        return set_list(r, &r->extra_headers, text);
}

/* "HOST:PORT:ADDR,ADDR...": tierd resolved the host (the worker asks no DNS
 * server); curl tries the addresses in turn. Replacing an entry replaces
 * curl's cached one at the next transfer. */
int remote_set_resolve(struct backend *b, const char *text) {
        struct remote *r = (struct remote *)b;
        return set_list(r, &r->resolve, text);
}

void remote_close(struct backend *b) {
        struct remote *r = (struct remote *)b;
        if (!r)
                return;
        curl_slist_free_all(r->extra_headers);
        curl_slist_free_all(r->resolve);
        free(r->object_base);
        free(r->bucket_base);
        free(r->prefix);
        free(r->copy_source);
        explicit_bzero(&r->cred, sizeof(r->cred));
        free(r);
}

/* PUTs fd's [off, off+len) to key?query, hashing what it reads into md; the
 * answer's ETag into etag if given. */
int remote_put_checked(struct remote *r, const char *key, const char *query, int fd, uint64_t off, uint64_t len,
                       struct curl_slist *headers, const char *payload_sha256, EVP_MD_CTX *md, char *etag,
                       size_t etag_size) {
        struct http_req q;
        int ret;

        http_req_init(&q, "PUT");
        remote_object_url(r, &q, key, query);
        for (struct curl_slist *h = headers; h; h = h->next)
                if (http_req_header(&q, "%s", h->data) < 0) {
                        http_req_done(&q);
                        return -ENOMEM;
                }
        snprintf(q.payload_sha256, sizeof(q.payload_sha256), "%s", payload_sha256 ? payload_sha256 : "");
        q.body_fd = fd;
        q.body_off = off;
        q.body_len = len;
        q.body_md = md;
        ret = remote_request(r, &q, key);
        if (ret == 0 && q.body_pos != len)
                ret = -EBADMSG;
        if (ret == 0 && etag)
                snprintf(etag, etag_size, "%s", q.meta.etag);
        http_req_done(&q);
        return ret;
}

int remote_upload_matches(EVP_MD_CTX *md, const uint8_t sha256[32]) {
        uint8_t got[32];
        if (!EVP_DigestFinal_ex(md, got, NULL))
                return -EIO;
        /* Nothing is removed here: the key may hold another file's copy of
         * these bytes (the store rejected or never published a changed one). */
        return memcmp(got, sha256, 32) == 0 ? 0 : -EBADMSG;
}

/* A bodiless request on the object key (HEAD, DELETE): a missing one is
 * -ENOENT, not logged. The caller ends q with http_req_done. */
static int object_request(struct remote *r, struct http_req *q, const char *method, const char *key) {
        http_req_init(q, method);
        remote_object_url(r, q, key, NULL);
        q->quiet_missing = true;
        return remote_request(r, q, key);
}

int remote_exists(struct backend *b, const char *key, uint64_t *size, int64_t *mtime) {
        struct remote *r = (struct remote *)b;
        struct http_req q;
        int ret = object_request(r, &q, "HEAD", key);

        if (ret == 0 && !q.meta.have_length)
                ret = -EIO;
        if (ret == 0 && size)
                *size = q.meta.content_length;
        if (ret == 0 && mtime && !(*mtime = q.meta.last_modified))
                ret = -EIO; /* an age is asked for, and the store does not say it */
        http_req_done(&q);
        return ret;
}

int remote_remove(struct backend *b, const char *key) {
        struct http_req q;
        int ret = object_request((struct remote *)b, &q, "DELETE", key);

        http_req_done(&q);
        return ret == -ENOENT ? 0 : ret;
}
