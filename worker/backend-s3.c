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
#include <time.h>

#include "hash.h"
#include "hex.h"
#include "http.h"
#include "log.h"
#include "macro.h"
#include "objkey.h"
#include "progress.h"
#include "s3xml.h"
#include "url.h"

#define MAX_PARTS 10000

static int md_update(void *ctx, const void *buf, size_t n) {
        progress_report();
        return EVP_DigestUpdate(ctx, buf, n) ? 0 : -EIO;
}

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
                snprintf(endpoint, sizeof(endpoint), "https://s3.%s.%s", cfg->region, aws_domain(cfg->region));
        r = calloc(1, sizeof(*r));
        if (r) {
                char bucket_url[2 * PROTO_URL_MAX];
                k = s3_bucket_url(endpoint, url.bucket, cfg->virtual_hosted, bucket_url, sizeof(bucket_url));
                if (k >= 0)
                        k = (r->bucket_base = strdup(bucket_url)) ? 0 : -1;
                if (k >= 0)
                        k = asprintf(&r->prefix, "%s%s", url.prefix, *url.prefix ? "/" : "");
                if (k >= 0)
                        k = asprintf(&r->object_base, "%s%s", r->bucket_base, r->prefix);
                if (k >= 0)
                        k = asprintf(&r->copy_source, "/%s/%s", url.bucket, r->prefix);
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
#define ANSWER_MAX (1u << 20) /* an XML answer with the whitespace S3 keeps a long one alive with */

static int post(struct remote *r, const char *key, const char *query, const char *body, struct curl_slist *headers,
                struct http_req *q) {
        uint8_t sha[32];
        http_req_init(q, "POST");
        q->collect_max = ANSWER_MAX; /* its XML answer, whole */
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

#define UPLOAD_THREADS 4

struct multipart {
        struct remote *r;
        const char *key, *id_escaped;
        int fd;
        uint64_t size, nparts, next;
        uint8_t (*part_sha)[32];
        char (*etag)[128];
        pthread_mutex_t lock;
        int error;
        int progress_sock;
        uint64_t progress_id;
};

/* One pass: the whole object's hash (it must still be the key's: the file
 * may have changed since) and each part's. The server checks every part
 * against its hash, so what it assembles is exactly what this pass read. */
static int hash_parts(struct multipart *m, const uint8_t want[32]) {
        _cleanup_md_ctx_ EVP_MD_CTX *whole = EVP_MD_CTX_new();
        uint8_t got[32];
        if (!whole || !EVP_DigestInit_ex(whole, EVP_sha256(), NULL))
                return -ENOMEM;
        for (uint64_t i = 0; i < m->nparts; i++) {
                uint64_t off = i * m->r->part_size, len = MIN(m->r->part_size, m->size - off);
                int r = sha256_fd_range(m->fd, off, len, m->part_sha[i], md_update, whole);
                if (r < 0)
                        return r;
        }
        if (!EVP_DigestFinal_ex(whole, got, NULL))
                return -EIO;
        return memcmp(got, want, 32) == 0 ? 0 : -EBADMSG;
}

/* Upload threads take the next part until none is left or one failed. */
static void *upload_parts(void *arg) {
        struct multipart *m = arg;
        progress_begin(m->progress_sock, m->progress_id); /* this thread moves the request's bytes too */
        for (;;) {
                char query[700], part_hex[65];
                uint64_t i;
                int r;
                pthread_mutex_lock(&m->lock);
                i = m->next++;
                r = m->error;
                pthread_mutex_unlock(&m->lock);
                if (i >= m->nparts || r < 0)
                        return NULL;
                uint64_t off = i * m->r->part_size, len = MIN(m->r->part_size, m->size - off);
                hex_encode(m->part_sha[i], 32, part_hex);
                snprintf(query, sizeof(query), "partNumber=%" PRIu64 "&uploadId=%s", i + 1, m->id_escaped);
                r = remote_put_checked(m->r, m->key, query, m->fd, off, len, NULL, part_hex, NULL, m->etag[i],
                                       sizeof(m->etag[i]));
                if (r == 0 && !m->etag[i][0])
                        r = -EIO;
                if (r < 0) {
                        pthread_mutex_lock(&m->lock);
                        m->error = m->error ?: r;
                        pthread_mutex_unlock(&m->lock);
                }
        }
}

/* Initiate, upload the parts in parallel, complete; abort on any failure so
 * no half upload stays behind. */
static int multipart_store(struct remote *r, const char *key, int fd, uint64_t size, const uint8_t sha256[32],
                           const char *sha_hex) {
        struct multipart m = { .r = r, .key = key, .fd = fd, .size = size, .lock = PTHREAD_MUTEX_INITIALIZER,
                               .nparts = (size + r->part_size - 1) / r->part_size };
        char upload_id[512] = "", query[700], *complete = NULL;
        size_t complete_size = 0;
        pthread_t threads[UPLOAD_THREADS];
        unsigned nthreads = 0;
        struct http_req q;
        int ret;

        if (m.nparts > MAX_PARTS)
                return -EFBIG;
        progress_current(&m.progress_sock, &m.progress_id);
        m.part_sha = calloc(m.nparts, sizeof(*m.part_sha));
        m.etag = calloc(m.nparts, sizeof(*m.etag));
        ret = m.part_sha && m.etag ? hash_parts(&m, sha256) : -ENOMEM;
        if (ret == 0) {
                /* libcurl before 8.5 signs "?uploads" wrong: "?uploads=" is right. */
                struct curl_slist *meta = object_headers(r, sha_hex);
                ret = post(r, key, "uploads=", "", meta, &q);
                if (ret == 0) {
                        struct s3xml_field id = { "UploadId", upload_id, sizeof(upload_id), false };
                        struct s3xml_spec spec = { .root = "InitiateMultipartUploadResult", .top = &id, .n_top = 1 };
                        ret = q.collect ? s3xml_parse(q.collect, q.collect_len, &spec) : -EIO;
                        if (ret == 0 && (!id.seen || !upload_id[0]))
                                ret = -EIO;
                }
                http_req_done(&q);
                curl_slist_free_all(meta);
        }
        char *id_escaped = ret == 0 ? curl_easy_escape(NULL, upload_id, 0) : NULL;
        if (ret == 0 && !id_escaped)
                ret = -ENOMEM;
        if (ret == 0) {
                m.id_escaped = id_escaped;
                for (; nthreads < UPLOAD_THREADS && nthreads < m.nparts; nthreads++)
                        if (pthread_create(&threads[nthreads], NULL, upload_parts, &m) != 0)
                                break;
                if (nthreads == 0)
                        upload_parts(&m);
                for (unsigned i = 0; i < nthreads; i++)
                        pthread_join(threads[i], NULL);
                ret = m.error;
        }
        if (ret == 0) {
                FILE *xml = open_memstream(&complete, &complete_size);
                if (!xml)
                        ret = -ENOMEM;
                else {
                        fputs("<CompleteMultipartUpload>", xml);
                        for (uint64_t i = 0; i < m.nparts; i++)
                                fprintf(xml, "<Part><PartNumber>%" PRIu64 "</PartNumber><ETag>%s</ETag></Part>", i + 1,
                                        m.etag[i]);
                        fputs("</CompleteMultipartUpload>", xml);
                        fclose(xml);
                        snprintf(query, sizeof(query), "uploadId=%s", id_escaped);
                        ret = post(r, key, query, complete, NULL, &q);
                        /* S3 may answer 200 with an error document. */
                        if (ret == 0 && (!q.collect || !s3xml_root_is(q.collect, q.collect_len,
                                                                      "CompleteMultipartUploadResult")))
                                ret = -EIO;
                        http_req_done(&q);
                }
        }
        if (ret < 0 && id_escaped)
                multipart_abort(r, key, id_escaped);
        free(complete);
        free(m.part_sha);
        free(m.etag);
        curl_free(id_escaped);
        return ret;
}

/* Only keys tierd makes under our prefix (objkey.h), of one kind:
 * a shared bucket's other uploads are not ours to abort, and such a key
 * needs no escaping in a URL. */
static bool our_object_key(const struct remote *r, const char *key, uint32_t kind, struct proto_object *o) {
        size_t n = strlen(r->prefix);
        return strncmp(key, r->prefix, n) == 0 && object_key_parse(key + n, o) == 0 && o->kind == kind;
}

struct cleanup_ctx {
        struct remote *r;
        char before[32]; /* uploads begun before we started: not a live worker's */
        int aborted;
};

static int abort_left_behind(void *userdata, const struct s3xml_field *f, size_t n) {
        struct cleanup_ctx *c = userdata;
        const char *key = f[0].value, *id = f[1].value, *initiated = f[2].value;
        char *id_esc;
        (void)n;
        if (strncmp(initiated, c->before, strlen(c->before)) >= 0 ||
            !our_object_key(c->r, key, PROTO_OBJECT_DATA, &(struct proto_object){}))
                return 0;
        if (!(id_esc = curl_easy_escape(NULL, id, 0)))
                return -ENOMEM;
        multipart_abort(c->r, key + strlen(c->r->prefix), id_esc);
        curl_free(id_esc);
        c->aborted++;
        return 0;
}

#define LIST_ANSWER_MAX (8u << 20) /* a page of 1,000 keys is about 400 KiB */
#define CLEANUP_PAGE 200           /* uploads a page: small answers, each page's aborted at once */
#define LIST_PAGES_MAX 1000000     /* of 1,000 keys: a guard, not a limit met */
#define CLEANUP_PAGES_MAX 5000     /* a million uploads: then the next start goes on */

/* Multipart uploads a crashed worker left behind cost storage forever:
 * list those under our prefix begun before we started (every page), and
 * abort them. */
static int s3_cleanup(struct backend *b) {
        struct remote *r = (struct remote *)b;
        char *prefix = curl_easy_escape(NULL, r->prefix, 0);
        char key[STUB_KEY_MAX + 512], id[512], initiated[64], truncated[16], next_key[STUB_KEY_MAX + 512] = "",
                next_id[512] = "", sent_key[STUB_KEY_MAX + 512], sent_id[512];
        struct s3xml_field fields[] = { { "Key", key, sizeof(key), false },
                                        { "UploadId", id, sizeof(id), false },
                                        { "Initiated", initiated, sizeof(initiated), false } };
        struct s3xml_field top[] = { { "IsTruncated", truncated, sizeof(truncated), false },
                                     { "NextKeyMarker", next_key, sizeof(next_key), false },
                                     { "NextUploadIdMarker", next_id, sizeof(next_id), false } };
        struct cleanup_ctx c = { .r = r };
        int ret = 0;

        if (!prefix)
                return -ENOMEM;
        strftime(c.before, sizeof(c.before), "%Y-%m-%dT%H:%M:%S", gmtime(&(time_t){ r->started }));
        for (int page = 0; page < CLEANUP_PAGES_MAX && ret == 0; page++) {
                char *key_esc = next_key[0] ? curl_easy_escape(NULL, next_key, 0) : NULL;
                char *id_esc = next_id[0] ? curl_easy_escape(NULL, next_id, 0) : NULL;
                if ((next_key[0] && !key_esc) || (next_id[0] && !id_esc)) {
                        curl_free(key_esc);
                        curl_free(id_esc);
                        ret = -ENOMEM;
                        break;
                }
                memcpy(sent_key, next_key, sizeof(sent_key));
                memcpy(sent_id, next_id, sizeof(sent_id));
                struct s3xml_spec spec = { .root = "ListMultipartUploadsResult", .record = "Upload", .fields = fields,
                                           .n_fields = ARRAY_SIZE(fields), .each = abort_left_behind, .ctx = &c,
                                           .top = top, .n_top = ARRAY_SIZE(top) };
                struct http_req q;
                http_req_init(&q, "GET");
                q.collect_max = LIST_ANSWER_MAX;
                /* Query keys in name order, values escaped: curl 7.88 signs
                 * them as given, and RGW checks the canonical form. */
                int n = snprintf(q.url, sizeof(q.url), "%s?%s%s%smax-uploads=%d&prefix=%s%s%s&uploads=",
                                 r->bucket_base, key_esc ? "key-marker=" : "", key_esc ?: "", key_esc ? "&" : "",
                                 CLEANUP_PAGE, prefix, id_esc ? "&upload-id-marker=" : "", id_esc ?: "");
                curl_free(key_esc);
                curl_free(id_esc);
                ret = n < 0 || (size_t)n >= sizeof(q.url) ? -E2BIG : remote_request(r, &q, "?uploads");
                if (ret == 0)
                        ret = q.collect ? s3xml_parse(q.collect, q.collect_len, &spec) : -EIO;
                http_req_done(&q);
                if (ret < 0 || strcmp(truncated, "true") != 0)
                        break;
                if ((!next_key[0] && !next_id[0]) ||
                    (strcmp(next_key, sent_key) == 0 && strcmp(next_id, sent_id) == 0))
                        ret = -EIO; /* more, but no new marker to go on from */
        }
        curl_free(prefix);
        if (c.aborted)
                log_info("tenant %s: aborted %d multipart upload(s) left behind by a crash", r->tenant, c.aborted);
        return ret;
}

static int s3_store(struct backend *b, const char *key, int fd, uint64_t size, const uint8_t sha256[32],
                    unsigned flags) {
        struct remote *r = (struct remote *)b;
        _cleanup_md_ctx_ EVP_MD_CTX *md = EVP_MD_CTX_new();
        char sha_hex[65];
        struct http_req q;
        int ret;

        if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
                return -ENOMEM;
        hex_encode(sha256, 32, sha_hex);
        if (size > r->multipart_threshold && (flags & BACKEND_STORE_IF_ABSENT))
                return -EFBIG; /* conditional writes are for small objects */
        if (size > r->multipart_threshold)
                ret = multipart_store(r, key, fd, size, sha256, sha_hex);
        else {
                struct curl_slist *h = object_headers(r, sha_hex);
                /* Never over a key there already (unless it is known
                 * damaged): a server that does not check the payload's
                 * SHA-256 would keep a changed file's bytes under a key
                 * other files depend on. */
                if (!(flags & BACKEND_STORE_REPLACE)) {
                        struct curl_slist *c = curl_slist_append(h, "If-None-Match: *");
                        if (!c) { /* never sent without it: that would overwrite */
                                curl_slist_free_all(h);
                                return -ENOMEM;
                        }
                        h = c;
                }
                /* The payload's SHA-256 is the key's: the server checks it. */
                ret = remote_put_checked(r, key, NULL, fd, 0, size, h, sha_hex, md, NULL, 0);
                curl_slist_free_all(h);
                if (ret == 0)
                        ret = remote_upload_matches(md, sha256);
                if (ret == -EEXIST && !(flags & BACKEND_STORE_IF_ABSENT))
                        ret = 0; /* the same bytes are there: kept, checked below */
        }
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

/* "2026-12-04T08:14:36.000Z", in UTC; 0 if not that. */
static int64_t parse_iso8601(const char *s) {
        struct tm tm = {};
        const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
        return end && (*end == '.' || *end == 'Z') ? (int64_t)timegm(&tm) : 0;
}

struct list_ctx {
        struct remote *r;
        uint32_t kind;
        backend_list_t each;
        void *ctx;
};

/* One <Contents> of a page: ours, of the kind asked for, handed on. */
static int list_one(void *userdata, const struct s3xml_field *f, size_t n) {
        struct list_ctx *l = userdata;
        const char *key = f[0].value, *size = f[1].value, *modified = f[2].value;
        struct proto_object o;
        char *e;
        (void)n;
        if (!our_object_key(l->r, key, l->kind, &o))
                return 0;
        errno = 0;
        o.size = strtoull(size, &e, 10);
        o.mtime = parse_iso8601(modified);
        if (errno || *e || e == size || o.mtime == 0) {
                log_error("tenant %s: the store lists %s with size '%s', modified '%s': not understood", l->r->tenant,
                          key, size, modified);
                return -EIO;
        }
        return l->each(l->ctx, &o);
}

/* ListObjectsV2, a page after the other. */
static int s3_list(struct backend *b, uint32_t kind, backend_list_t each, void *ctx) {
        struct remote *r = (struct remote *)b;
        const char *kind_prefix = object_kind_prefix(kind);
        char full[PROTO_URL_MAX], token[1024] = "", sent[1024], truncated[16];
        char key[STUB_KEY_MAX + 512], size[32], modified[64];
        struct s3xml_field fields[] = { { "Key", key, sizeof(key), false },
                                        { "Size", size, sizeof(size), false },
                                        { "LastModified", modified, sizeof(modified), false } };
        struct s3xml_field top[] = { { "IsTruncated", truncated, sizeof(truncated), false },
                                     { "NextContinuationToken", token, sizeof(token), false } };
        struct list_ctx l = { .r = r, .kind = kind, .each = each, .ctx = ctx };
        char *prefix;
        int ret = 0;

        if (!kind_prefix)
                return -EINVAL;
        snprintf(full, sizeof(full), "%s%s", r->prefix, kind_prefix);
        if (!(prefix = curl_easy_escape(NULL, full, 0)))
                return -ENOMEM;
        for (unsigned page = 0; ret == 0; page++) {
                struct s3xml_spec spec = { .root = "ListBucketResult", .record = "Contents", .fields = fields,
                                           .n_fields = ARRAY_SIZE(fields), .each = list_one, .ctx = &l, .top = top,
                                           .n_top = ARRAY_SIZE(top) };
                struct http_req q;
                char *token_esc = token[0] ? curl_easy_escape(NULL, token, 0) : NULL;
                if (token[0] && !token_esc) {
                        ret = -ENOMEM;
                        break;
                }
                if (page == LIST_PAGES_MAX) {
                        curl_free(token_esc);
                        ret = -E2BIG;
                        break;
                }
                memcpy(sent, token, sizeof(sent));
                http_req_init(&q, "GET");
                q.collect_max = LIST_ANSWER_MAX;
                /* Query keys in name order, values escaped (see s3_cleanup). */
                int n = snprintf(q.url, sizeof(q.url), "%s?%s%s%slist-type=2&max-keys=1000&prefix=%s", r->bucket_base,
                                 token_esc ? "continuation-token=" : "", token_esc ?: "", token_esc ? "&" : "", prefix);
                curl_free(token_esc);
                if (n < 0 || (size_t)n >= sizeof(q.url))
                        ret = -E2BIG;
                if (ret == 0)
                        ret = remote_request(r, &q, "?list-type=2");
                /* A 200 that is no listing, or one cut short: -EIO. */
                if (ret == 0)
                        ret = q.collect ? s3xml_parse(q.collect, q.collect_len, &spec) : -EIO;
                http_req_done(&q);
                if (ret < 0 || strcmp(truncated, "true") != 0)
                        break;
                if (!token[0] || strcmp(token, sent) == 0) {
                        log_error("tenant %s: the store's listing says there is more but gives no new token to go on "
                                  "from", r->tenant);
                        ret = -EIO;
                }
        }
        curl_free(prefix);
        return ret;
}

/* A copy onto itself, its metadata given again (REPLACE): S3 makes its
 * Last-Modified now, which is the age a collection reads. */
static int s3_touch(struct backend *b, const char *key) {
        struct remote *r = (struct remote *)b;
        struct curl_slist *h = NULL;
        struct http_req q;
        uint64_t size = 0;
        int ret;

        http_req_init(&q, "HEAD");
        remote_object_url(r, &q, key, NULL);
        ret = remote_request(r, &q, key);
        if (ret == 0 && !q.meta.meta_sha256[0])
                ret = -EIO; /* not one tierd stored */
        if (ret == 0)
                h = object_headers(r, q.meta.meta_sha256);
        size = q.meta.content_length;
        http_req_done(&q);
        if (ret < 0)
                return ret;
        if (size > (5ull << 30)) {
                curl_slist_free_all(h);
                return -EFBIG; /* past a single copy's limit: uploaded again instead */
        }
        http_req_init(&q, "PUT");
        q.collect_max = ANSWER_MAX;
        remote_object_url(r, &q, key, NULL);
        for (struct curl_slist *l = h; l && ret == 0; l = l->next)
                ret = http_req_header(&q, "%s", l->data);
        if (ret == 0)
                ret = http_req_header(&q, "x-amz-copy-source: %s%s", r->copy_source, key);
        if (ret == 0)
                ret = http_req_header(&q, "x-amz-metadata-directive: REPLACE");
        if (ret == 0)
                ret = remote_request(r, &q, key);
        /* A copy can fail after its 200: the body then says <Error>. */
        if (ret == 0 && (!q.collect || !s3xml_root_is(q.collect, q.collect_len, "CopyObjectResult")))
                ret = -EIO;
        curl_slist_free_all(h);
        http_req_done(&q);
        return ret;
}

const struct backend_ops backend_s3_ops = {
        .scheme = "s3",
        .open = s3_open,
        .store = s3_store,
        REMOTE_BACKEND_OPS,
        .set_credentials = s3_set_credentials,
        .cleanup = s3_cleanup,
        .list = s3_list,
        .touch = s3_touch,
};
