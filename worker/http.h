/* SPDX-License-Identifier: MIT */
/*
 * Object stores over HTTP, through libcurl: the transport shared by the
 * plain HTTP store (backend-http.c) and S3 (backend-s3.c, which adds SigV4
 * and its metadata). Each worker thread has its own curl handles and one
 * connection cache, so connections are kept alive and a fill's transfers
 * can run side by side; every response is checked before a byte reaches a
 * file.
 */
#pragma once

#include <curl/curl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "backend.h"
#include "http-check.h"

/* Transfers a worker thread runs side by side (a fill's chunks and the
 * manifest pages they need). */
#define REMOTE_PARALLEL_MAX 8

struct remote {
        struct backend base;
        bool s3;
        char *object_base; /* URL that a key is appended to, ending in '/' */
        char *bucket_base; /* s3: URL of the bucket, ending in '/' */
        char *prefix;      /* s3: key prefix ("" or "a/b/") */
        char *copy_source; /* s3: "/BUCKET/PREFIX", a copy's source before the key */
        time_t started;    /* uploads begun before this are a dead worker's */
        char sigv4[96];    /* "aws:amz:REGION:s3" */
        struct curl_slist *extra_headers; /* under lock: replaced when a header file changes */
        struct curl_slist *resolve; /* under lock: tierd resolves the host, the worker reads no file to */
        bool need_resolve;          /* a store on the network: no request without an address */
        char sse[16], kms_key_id[256], ca_file[PROTO_URL_MAX];
        char proxy[300]; /* "" directly (curl reads no environment here: the worker has none) */
        uint64_t connect_timeout_usec, stall_timeout_usec, multipart_threshold, part_size;
        pthread_mutex_t lock; /* guards cred and extra_headers: rotated while threads fetch */
        struct proto_credentials cred;
        pthread_key_t curl_key; /* the thread's handles (http.c) */
        char tenant[STUB_TENANT_MAX];
};

struct http_req {
        CURL *curl; /* the handle performing it */
        const char *method; /* GET, HEAD, PUT, POST, DELETE, MOVE */
        char url[PROTO_URL_MAX + 512];
        struct curl_slist *headers;
        char payload_sha256[65]; /* S3: x-amz-content-sha256 (hex); "" = empty payload */
        /* Upload body: from a file range (hashed as it is read) or memory. */
        int body_fd;
        uint64_t body_off, body_len, body_pos;
        EVP_MD_CTX *body_md;
        EVP_MD_CTX *body_md_start; /* body_md before the body's first byte: a rewind goes back to it */
        const char *body_mem;
        size_t body_mem_len;
        /* Download: exactly want bytes from want_off, to sink. */
        backend_sink_t sink;
        void *sink_ctx;
        uint64_t want_off, want, got;
        int sink_error;
        /* A 2xx body kept whole in memory (a listing), up to collect_max
         * bytes; 0: not kept. */
        size_t collect_max, collect_len;
        char *collect;
        /* Response */
        long status;
        bool checked;
        bool quiet_missing; /* a 404 is an answer, not a failure to log */
        struct http_meta meta;
        char resp[8192]; /* small bodies: XML answers, error messages */
        size_t resp_len;
        char error[CURL_ERROR_SIZE];
};

void http_req_init(struct http_req *q, const char *method);
void http_req_done(struct http_req *q);
int http_req_header(struct http_req *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One request, retried with exponential backoff and jitter on connection
 * failures and 5xx while the stall timeout allows (a GET resumes where the
 * last attempt stopped). Returns 0 for a 2xx; -ENOENT 404, -EACCES 403,
 * -EIO otherwise, each failure logged once without secrets. */
int remote_request(struct remote *r, struct http_req *q, const char *key);

/* Plain stores and S3 share these. */
int remote_init(struct remote *r, const struct proto_config *cfg, bool s3);
void remote_close(struct backend *b);
int remote_set_headers(struct backend *b, const char *headers);
int remote_set_resolve(struct backend *b, const char *resolve);
int remote_fetch(struct backend *b, const char *key, uint64_t offset, uint64_t length, backend_sink_t sink, void *ctx);
void remote_fetch_many(struct backend *b, struct fetch_part *parts, size_t n);
int remote_exists(struct backend *b, const char *key, uint64_t *size, int64_t *mtime);
int remote_remove(struct backend *b, const char *key);
/* What every HTTP-based backend's ops share: remote_*. */
#define REMOTE_BACKEND_OPS                                                                             \
        .close = remote_close, .fetch = remote_fetch, .fetch_many = remote_fetch_many,                \
        .exists = remote_exists, .remove = remote_remove, .set_headers = remote_set_headers,          \
        .set_resolve = remote_set_resolve
void remote_object_url(struct remote *r, struct http_req *q, const char *key, const char *query);
/* After an upload hashed into md: 0 if it hashed to sha256, else -EBADMSG
 * (the file changed while it was read). */
int remote_upload_matches(EVP_MD_CTX *md, const uint8_t sha256[32]);
int remote_put_checked(struct remote *r, const char *key, const char *query, int fd, uint64_t off, uint64_t len,
                       struct curl_slist *headers, const char *payload_sha256, EVP_MD_CTX *md, char *etag,
                       size_t etag_size);
