/* SPDX-License-Identifier: MIT */
/*
 * s3://BUCKET/PREFIX: S3 (AWS, Ceph RGW, MinIO), signed with libcurl's SigV4
 * plus the x-amz-content-sha256 header RGW requires. Objects carry their
 * SHA-256 as x-amz-meta-sha256; a HEAD checks size and that metadata before
 * an upload counts (a multipart ETag is no MD5 of the object).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "hex.h"
#include "http.h"
#include "log.h"
#include "macro.h"
#include "url.h"

#define MAX_PARTS 10000

static int s3_open(const struct proto_config *cfg, int store_fd, struct backend **ret) {
        struct backend_url url;
        char endpoint[PROTO_URL_MAX];
        struct remote *r;
        int k;

        (void)store_fd;
        k = backend_url_parse(cfg->backend, &url, NULL);
        if (k < 0)
                return k;
        if (cfg->endpoint[0])
                snprintf(endpoint, sizeof(endpoint), "%s", cfg->endpoint);
        else
                snprintf(endpoint, sizeof(endpoint), "https://s3.%s.amazonaws.com", cfg->region);
        r = calloc(1, sizeof(*r));
        if (r) {
                const char *host = strstr(endpoint, "://") + 3;
                if (cfg->virtual_hosted)
                        k = asprintf(&r->bucket_base, "%.*s%s.%s/", (int)(host - endpoint), endpoint, url.bucket, host);
                else
                        k = asprintf(&r->bucket_base, "%s/%s/", endpoint, url.bucket);
                if (k >= 0)
                        k = asprintf(&r->prefix, "%s%s", url.prefix, *url.prefix ? "/" : "");
                if (k >= 0)
                        k = asprintf(&r->object_base, "%s%s", r->bucket_base, r->prefix);
                r->started = time(NULL);
        }
        backend_url_done(&url);
        if (!r || k < 0) {
                free(r);
                return -ENOMEM;
        }
        k = remote_init(r, cfg, true);
        if (k < 0) {
                remote_close(&r->base);
                return k;
        }
        *ret = &r->base;
        return 0;
}

static void s3_set_credentials(struct backend *b, const struct proto_credentials *c) {
        struct remote *r = (struct remote *)b;
        pthread_mutex_lock(&r->lock);
        r->cred = *c;
        r->cred.access_key[sizeof(r->cred.access_key) - 1] = 0;
        r->cred.secret_key[sizeof(r->cred.secret_key) - 1] = 0;
        r->cred.session_token[sizeof(r->cred.session_token) - 1] = 0;
        pthread_mutex_unlock(&r->lock);
}

static struct curl_slist *object_headers(struct remote *r, const char *sha_hex) {
        struct curl_slist *h = NULL;
        char line[512];
        snprintf(line, sizeof(line), "x-amz-meta-sha256: %s", sha_hex);
        h = curl_slist_append(h, line);
        if (r->sse[0]) {
                snprintf(line, sizeof(line), "x-amz-server-side-encryption: %s", r->sse);
                h = curl_slist_append(h, line);
        }
        if (r->kms_key_id[0]) {
                snprintf(line, sizeof(line), "x-amz-server-side-encryption-aws-kms-key-id: %s", r->kms_key_id);
                h = curl_slist_append(h, line);
        }
        return h;
}

/* A POST with a small body in memory (multipart start and completion). */
static int post(struct remote *r, const char *key, const char *query, const char *body, struct curl_slist *headers,
                struct http_req *q) {
        uint8_t sha[32];
        http_req_init(q, "POST");
        remote_object_url(r, q, key, query);
        for (struct curl_slist *h = headers; h; h = h->next)
                http_req_header(q, "%s", h->data);
        q->body_mem = body;
        q->body_mem_len = strlen(body);
        EVP_Digest(body, q->body_mem_len, sha, NULL, EVP_sha256(), NULL);
        hex_encode(sha, 32, q->payload_sha256);
        return remote_request(r, q, key);
}

static void multipart_abort(struct remote *r, const char *key, const char *query_id) {
        struct http_req q;
        char query[600];
        http_req_init(&q, "DELETE");
        snprintf(query, sizeof(query), "uploadId=%s", query_id);
        remote_object_url(r, &q, key, query);
        remote_request(r, &q, key);
        http_req_done(&q);
}

/* Initiate, upload each part (its own payload hash), complete; abort on any
 * failure so no half upload stays behind. */
static int multipart_store(struct remote *r, const char *key, int fd, uint64_t size, const char *sha_hex,
                           EVP_MD_CTX *whole) {
        struct curl_slist *meta = object_headers(r, sha_hex);
        char upload_id[512] = "", *id_escaped = NULL, query[700], *complete = NULL;
        size_t complete_len = 0, complete_size = 0;
        uint64_t nparts = (size + r->part_size - 1) / r->part_size;
        struct http_req q;
        int ret;

        if (nparts > MAX_PARTS) {
                curl_slist_free_all(meta);
                return -EFBIG;
        }
        /* libcurl before 8.5 signs "?uploads" wrong: "?uploads=" is signed right. */
        ret = post(r, key, "uploads=", "", meta, &q);
        if (ret == 0)
                ret = xml_first_value(q.resp, "UploadId", upload_id, sizeof(upload_id));
        http_req_done(&q);
        curl_slist_free_all(meta);
        if (ret < 0)
                return ret;
        id_escaped = curl_easy_escape(NULL, upload_id, 0);
        if (!id_escaped)
                return -ENOMEM;
        FILE *xml = open_memstream(&complete, &complete_size);
        if (!xml) {
                curl_free(id_escaped);
                return -ENOMEM;
        }
        fputs("<CompleteMultipartUpload>", xml);
        for (uint64_t i = 0; i < nparts && ret == 0; i++) {
                uint64_t off = i * r->part_size, len = MIN(r->part_size, size - off);
                uint8_t part_sha[32];
                char part_hex[65], etag[128] = "";
                /* The part's own hash signs its payload; the whole-object hash
                 * accumulates from the bytes actually sent. */
                ret = sha256_fd_range(fd, off, len, part_sha, NULL, NULL);
                if (ret < 0)
                        break;
                hex_encode(part_sha, 32, part_hex);
                snprintf(query, sizeof(query), "partNumber=%" PRIu64 "&uploadId=%s", i + 1, id_escaped);
                ret = remote_put_checked(r, key, query, fd, off, len, NULL, part_hex, whole, etag, sizeof(etag));
                if (ret == 0 && !etag[0])
                        ret = -EIO;
                if (ret == 0)
                        fprintf(xml, "<Part><PartNumber>%" PRIu64 "</PartNumber><ETag>%s</ETag></Part>", i + 1, etag);
        }
        fputs("</CompleteMultipartUpload>", xml);
        fclose(xml);
        complete_len = strlen(complete);
        (void)complete_len;
        if (ret == 0) {
                snprintf(query, sizeof(query), "uploadId=%s", id_escaped);
                ret = post(r, key, query, complete, NULL, &q);
                /* S3 may answer 200 with an error document. */
                if (ret == 0 && strstr(q.resp, "<Error>"))
                        ret = -EIO;
                http_req_done(&q);
        }
        if (ret < 0)
                multipart_abort(r, key, id_escaped);
        free(complete);
        curl_free(id_escaped);
        return ret;
}

/* Multipart uploads a crashed worker left behind cost storage forever:
 * list those under our prefix begun before we started, and abort them. */
static int s3_cleanup(struct backend *b) {
        struct remote *r = (struct remote *)b;
        char *prefix = curl_easy_escape(NULL, r->prefix, 0), before[32];
        int aborted = 0, ret = 0;

        if (!prefix)
                return -ENOMEM;
        strftime(before, sizeof(before), "%Y-%m-%dT%H:%M:%S", gmtime(&(time_t){ r->started }));
        for (int pass = 0; pass < 10 && ret == 0; pass++) {
                struct http_req q;
                int found = 0;
                http_req_init(&q, "GET");
                /* Query keys in name order, values escaped: curl 7.88 signs
                 * them as given, and RGW checks the canonical form. */
                snprintf(q.url, sizeof(q.url), "%s?prefix=%s&uploads=", r->bucket_base, prefix);
                ret = remote_request(r, &q, "?uploads");
                for (const char *u = q.resp; ret == 0 && (u = strstr(u, "<Upload>")); u += 8) {
                        char key[STUB_KEY_MAX + 512], id[512], initiated[64], *id_esc;
                        if (xml_first_value(u, "Key", key, sizeof(key)) < 0 ||
                            xml_first_value(u, "UploadId", id, sizeof(id)) < 0 ||
                            xml_first_value(u, "Initiated", initiated, sizeof(initiated)) < 0 ||
                            strncmp(initiated, before, strlen(before)) >= 0 ||
                            strncmp(key, r->prefix, strlen(r->prefix)) != 0)
                                continue;
                        if (!(id_esc = curl_easy_escape(NULL, id, 0)))
                                break;
                        multipart_abort(r, key + strlen(r->prefix), id_esc);
                        curl_free(id_esc);
                        found++;
                }
                http_req_done(&q);
                aborted += found;
                if (found == 0)
                        break;
        }
        curl_free(prefix);
        if (aborted)
                log_info("tenant %s: aborted %d multipart upload(s) left behind by a crash", r->tenant, aborted);
        return ret;
}

static int s3_store(struct backend *b, const char *key, int fd, uint64_t size, const uint8_t sha256[32]) {
        struct remote *r = (struct remote *)b;
        _cleanup_md_ctx_ EVP_MD_CTX *md = EVP_MD_CTX_new();
        char sha_hex[65];
        struct http_req q;
        int ret;

        if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
                return -ENOMEM;
        hex_encode(sha256, 32, sha_hex);
        if (size > r->multipart_threshold)
                ret = multipart_store(r, key, fd, size, sha_hex, md);
        else {
                struct curl_slist *h = object_headers(r, sha_hex);
                /* The payload's SHA-256 is the key's: the server checks it. */
                ret = remote_put_checked(r, key, NULL, fd, 0, size, h, sha_hex, md, NULL, 0);
                curl_slist_free_all(h);
        }
        if (ret < 0)
                return ret;
        ret = remote_upload_matches(r, md, key, sha256);
        if (ret < 0)
                return ret;
        /* Before the stub says archived: the store has it, whole and ours. */
        http_req_init(&q, "HEAD");
        remote_object_url(r, &q, key, NULL);
        ret = remote_request(r, &q, key);
        if (ret == 0 && (!q.meta.have_length || q.meta.content_length != size || strcmp(q.meta.meta_sha256, sha_hex) != 0)) {
                log_error("tenant %s: %s: after upload the store reports %llu bytes, sha256 '%s'", r->tenant, key,
                          (unsigned long long)q.meta.content_length, q.meta.meta_sha256);
                ret = -EIO;
        }
        http_req_done(&q);
        return ret;
}

const struct backend_ops backend_s3_ops = {
        .scheme = "s3",
        .open = s3_open,
        .close = remote_close,
        .fetch = remote_fetch,
        .exists = remote_exists,
        .store = s3_store,
        .remove = remote_remove,
        .set_credentials = s3_set_credentials,
        .cleanup = s3_cleanup,
};
