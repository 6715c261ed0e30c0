/* SPDX-License-Identifier: MIT */
#include "http.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "hex.h"
#include "log.h"
#include "macro.h"
#include "progress.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define BACKOFF_FIRST_USEC 100000ull
#define BACKOFF_MAX_USEC 5000000ull

void http_req_init(struct http_req *q, const char *method) {
        *q = (struct http_req){ .method = method, .body_fd = -1 };
}

void http_req_done(struct http_req *q) {
        curl_slist_free_all(q->headers);
        q->headers = NULL;
        EVP_MD_CTX_free(q->body_md_start);
        q->body_md_start = NULL;
        free(q->collect);
        q->collect = NULL;
}

static size_t collect_body(struct http_req *q, const char *buf, size_t len) {
        char *p;
        progress_report(); /* a long listing is still moving */
        if (len > q->collect_max - q->collect_len) {
                snprintf(q->error, sizeof(q->error), "answer longer than %zu bytes", q->collect_max);
                q->sink_error = -EFBIG;
                return 0;
        }
        if (!(p = realloc(q->collect, q->collect_len + len + 1))) {
                q->sink_error = -ENOMEM;
                return 0;
        }
        memcpy(p + q->collect_len, buf, len);
        q->collect = p;
        q->collect_len += len;
        p[q->collect_len] = 0;
        return len;
}

int http_req_header(struct http_req *q, const char *fmt, ...) {
        char line[2048];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= sizeof(line))
                return -E2BIG;
        struct curl_slist *l = curl_slist_append(q->headers, line);
        if (!l)
                return -ENOMEM;
        q->headers = l;
        return 0;
}

void remote_object_url(struct remote *r, struct http_req *q, const char *key, const char *query) {
        snprintf(q->url, sizeof(q->url), "%s%s%s%s", r->object_base, key, query ? "?" : "", query ? query : "");
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

/* The sockets this thread's transfers opened (sockopt_note, closed
 * through sockopt_close): few, one a connection kept alive. libcurl 7.88
 * closes a connect attempt that lost or timed out without the close
 * callback (fixed in 8.2.0), so a number may stay listed after its
 * socket went: a number noted again is listed once, and a full list
 * makes room by dropping its oldest entry. A socket not listed only
 * misses ack_headers; a stale number only costs a setsockopt that fails
 * (or one more ACK on another of the thread's sockets). */
#define THREAD_SOCKS_MAX 32
static __thread int thread_socks[THREAD_SOCKS_MAX];
static __thread size_t thread_n_socks;

static void socks_forget(curl_socket_t fd) {
        for (size_t i = 0; i < thread_n_socks; i++)
                if (thread_socks[i] == fd) {
                        memmove(thread_socks + i, thread_socks + i + 1, (--thread_n_socks - i) * sizeof(int));
                        return;
                }
}

static int sockopt_note(void *clientp, curl_socket_t fd, curlsocktype purpose) {
        (void)clientp;
        if (purpose != CURLSOCKTYPE_IPCXN)
                return CURL_SOCKOPT_OK;
        socks_forget(fd); /* the number of a socket closed unseen */
        if (thread_n_socks == THREAD_SOCKS_MAX)
                socks_forget(thread_socks[0]);
        thread_socks[thread_n_socks++] = fd;
        return CURL_SOCKOPT_OK;
}

static int sockopt_close(void *clientp, curl_socket_t fd) {
        (void)clientp;
        socks_forget(fd);
        return close(fd);
}

/* The end of an answer's headers: their ACK goes now. A server that writes
 * its headers and its body apart, with Nagle on (Ceph RGW's beast frontend
 * unless it is given tcp_nodelay), holds a small body until the headers
 * are ACKed; on a kept-alive connection the kernel delays that ACK up to
 * 40 ms (a fresh one ACKs at once), and every small object, manifest page
 * or HEAD took 40 ms more than its round trip. TCP_QUICKACK sends an ACK
 * that is due at once; it is not kept, hence once an answer. libcurl 7.88
 * does not say which socket a transfer uses while it runs: every socket of
 * this thread is told (a socket with no ACK due only leaves the kernel's
 * delayed-ACK mode until its next exchange). */
static void ack_headers(void) {
        int one = 1;
        for (size_t i = 0; i < thread_n_socks; i++)
                (void)setsockopt(thread_socks[i], IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

/* Headers: status line, lengths, the range we got, S3's metadata. */
static size_t on_header(char *buf, size_t size, size_t n, void *userdata) {
        struct http_req *q = userdata;
        if (size * n <= 2 && (buf[0] == '\r' || buf[0] == '\n'))
                ack_headers();
        http_meta_header(&q->meta, buf, size * n);
        return size * n;
}

/* The body of a GET goes to the sink only once the answer is known to be
 * the range asked for; anything else is kept (small) for the error log. */
static size_t on_body(char *buf, size_t size, size_t n, void *userdata) {
        struct http_req *q = userdata;
        size_t len = size * n;

        curl_easy_getinfo(q->curl, CURLINFO_RESPONSE_CODE, &q->status);
        if (q->collect_max && q->status >= 200 && q->status <= 299)
                return collect_body(q, buf, len);
        if (!q->sink || q->status < 200 || q->status > 299) {
                size_t k = MIN(len, sizeof(q->resp) - 1 - q->resp_len);
                memcpy(q->resp + q->resp_len, buf, k);
                q->resp_len += k;
                q->resp[q->resp_len] = 0;
                return len;
        }
        if (!q->checked) {
                if (!http_range_answer_ok(q->status, &q->meta, q->want_off + q->got, q->want_off + q->want)) {
                        snprintf(q->error, sizeof(q->error), "server answered %ld with another range than asked", q->status);
                        q->sink_error = -EIO;
                        return 0;
                }
                q->checked = true;
        }
        if (q->got + len > q->want) {
                snprintf(q->error, sizeof(q->error), "server sent more than the %" PRIu64 " bytes asked", q->want);
                q->sink_error = -EIO; /* never write past what was asked */
                return 0;
        }
        int r = q->sink(q->sink_ctx, buf, len);
        if (r < 0) {
                q->sink_error = r;
                return 0;
        }
        q->got += len;
        return len;
}

static size_t on_upload(char *buf, size_t size, size_t n, void *userdata) {
        struct http_req *q = userdata;
        size_t want = MIN(size * n, (size_t)(q->body_len - q->body_pos));
        ssize_t k;

        if (want == 0)
                return 0;
        do
                k = pread(q->body_fd, buf, want, (off_t)(q->body_off + q->body_pos));
        while (k < 0 && errno == EINTR);
        if (k <= 0) {
                snprintf(q->error, sizeof(q->error), "the file shrank or failed during upload");
                q->sink_error = k < 0 ? -errno : -EBADMSG;
                return CURL_READFUNC_ABORT;
        }
        if (q->body_md)
                EVP_DigestUpdate(q->body_md, buf, (size_t)k);
        progress_report();
        q->body_pos += (uint64_t)k;
        return (size_t)k;
}

/* curl sends an upload's body again from its start when the connection
 * it reused turns out closed (a store's or a proxy's keep-alive ran out):
 * the body is read again from its start, and the hash taken as it goes
 * back to where it was before its first byte. */
static int on_upload_seek(void *userdata, curl_off_t offset, int origin) {
        struct http_req *q = userdata;
        if (origin != SEEK_SET || offset != 0 || (q->body_md && !q->body_md_start))
                return CURL_SEEKFUNC_CANTSEEK;
        if (q->body_md && !EVP_MD_CTX_copy_ex(q->body_md, q->body_md_start))
                return CURL_SEEKFUNC_FAIL;
        q->body_pos = 0;
        return CURL_SEEKFUNC_OK;
}

/* A thread's handles: one multi handle, whose connection cache all its
 * easy handles share (a transfer alone and transfers side by side reuse
 * the same kept-alive connections), and up to REMOTE_PARALLEL_MAX easy
 * handles, one per transfer in flight. */
struct thread_handles {
        CURLM *multi;
        CURL *easy[REMOTE_PARALLEL_MAX];
};

static void thread_handles_free(void *p) {
        struct thread_handles *t = p;
        for (size_t i = 0; i < ARRAY_SIZE(t->easy); i++)
                if (t->easy[i])
                        curl_easy_cleanup(t->easy[i]);
        curl_multi_cleanup(t->multi);
        free(t);
}

static struct thread_handles *thread_handles(struct remote *r) {
        struct thread_handles *t = pthread_getspecific(r->curl_key);
        if (t)
                return t;
        if (!(t = calloc(1, sizeof(*t))))
                return NULL;
        if (!(t->multi = curl_multi_init()) || pthread_setspecific(r->curl_key, t) != 0) {
                curl_multi_cleanup(t->multi);
                free(t);
                return NULL;
        }
        return t;
}

/* The thread's i-th easy handle, reset (its connections stay in the
 * multi handle's cache). */
static CURL *thread_easy(struct thread_handles *t, size_t i) {
        if (t->easy[i])
                curl_easy_reset(t->easy[i]);
        else
                t->easy[i] = curl_easy_init();
        return t->easy[i];
}

/* to with the lines of from (extra_headers, resolve: replaced under the
 * lock when tierd hands new ones) appended: this transfer's copy. */
static struct curl_slist *copy_locked(struct remote *r, struct curl_slist *const *from, struct curl_slist *to) {
        pthread_mutex_lock(&r->lock);
        for (const struct curl_slist *h = *from; h; h = h->next)
                to = curl_slist_append(to, h->data);
        pthread_mutex_unlock(&r->lock);
        return to;
}

/* One attempt's lists, freed when it ends. */
struct attempt {
        struct curl_slist *headers, *resolve;
        CURLcode cc;
        uint64_t ended_usec; /* run_transfers: when it ended */
};

static void set_method(CURL *c, struct http_req *q) {
        if (strcmp(q->method, "HEAD") == 0)
                curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        else if (strcmp(q->method, "PUT") == 0) {
                curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(c, CURLOPT_READFUNCTION, on_upload);
                curl_easy_setopt(c, CURLOPT_READDATA, q);
                curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_upload_seek);
                curl_easy_setopt(c, CURLOPT_SEEKDATA, q);
                /* Before its first byte: where a rewind takes the hash back to
                 * (none kept: the rewind is refused, the upload fails). */
                if (q->body_md && q->body_pos == 0) {
                        if (!q->body_md_start)
                                q->body_md_start = EVP_MD_CTX_new();
                        if (q->body_md_start && !EVP_MD_CTX_copy_ex(q->body_md_start, q->body_md)) {
                                EVP_MD_CTX_free(q->body_md_start);
                                q->body_md_start = NULL;
                        }
                }
                curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->body_len);
        } else if (strcmp(q->method, "POST") == 0) {
                curl_easy_setopt(c, CURLOPT_POST, 1L);
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body_mem ? q->body_mem : "");
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_mem_len);
        } else if (strcmp(q->method, "GET") != 0)
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
}

/* The request's headers: its own, the configured ones, its range, and
 * S3's signature inputs. */
static struct curl_slist *request_headers(struct remote *r, CURL *c, struct http_req *q) {
        struct curl_slist *headers = NULL;

        for (struct curl_slist *h = q->headers; h; h = h->next)
                headers = curl_slist_append(headers, h->data);
        headers = copy_locked(r, &r->extra_headers, headers);
        /* No 100-continue round trip; but curl's SigV4 would sign the empty
         * "Expect:" as a header and RGW then refuses the signature. */
        if (!r->s3)
                headers = curl_slist_append(headers, "Expect:");
        if (q->sink) {
                char range[96];
                snprintf(range, sizeof(range), "Range: bytes=%" PRIu64 "-%" PRIu64, q->want_off + q->got,
                         q->want_off + q->want - 1);
                headers = curl_slist_append(headers, range);
        }
        if (r->s3) {
                char sha[128];
                snprintf(sha, sizeof(sha), "x-amz-content-sha256: %s", q->payload_sha256[0] ? q->payload_sha256 : EMPTY_SHA256);
                headers = curl_slist_append(headers, sha);
                pthread_mutex_lock(&r->lock);
                curl_easy_setopt(c, CURLOPT_AWS_SIGV4, r->sigv4);
                curl_easy_setopt(c, CURLOPT_USERNAME, r->cred.access_key);
                curl_easy_setopt(c, CURLOPT_PASSWORD, r->cred.secret_key);
                if (r->cred.session_token[0]) {
                        char tok[sizeof(r->cred.session_token) + 32];
                        snprintf(tok, sizeof(tok), "x-amz-security-token: %s", r->cred.session_token);
                        headers = curl_slist_append(headers, tok);
                        explicit_bzero(tok, sizeof(tok));
                }
                pthread_mutex_unlock(&r->lock);
        }
        return headers;
}

/* Sets c up for one attempt of q: 0, or -EIO (with q's error said) when
 * it cannot be made. */
static int attempt_start(struct remote *r, struct http_req *q, CURL *c, struct attempt *a) {
        *a = (struct attempt){ .cc = CURLE_FAILED_INIT };
        q->curl = c;
        q->status = 0;
        q->resp_len = 0;
        q->resp[0] = 0;
        q->collect_len = 0; /* a retry starts the body again */
        q->sink_error = 0;
        q->checked = false;
        q->error[0] = 0;
        if (!c)
                return -ENOMEM;
        if (!(a->resolve = copy_locked(r, &r->resolve, NULL)) && r->need_resolve) {
                /* tierd looks the host up (the worker asks no DNS server),
                 * and has no address yet: no retry, nothing changes here
                 * until it hands some. */
                snprintf(q->error, sizeof(q->error), "no address for the store's host yet (tierd looks it up again)");
                q->sink_error = -EHOSTUNREACH;
                return -EIO;
        }
        curl_easy_setopt(c, CURLOPT_URL, q->url);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, q->error);
        curl_easy_setopt(c, CURLOPT_SOCKOPTFUNCTION, sockopt_note);
        curl_easy_setopt(c, CURLOPT_CLOSESOCKETFUNCTION, sockopt_close);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, q);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, q);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(r->connect_timeout_usec / 1000));
        /* A stall is no byte for that long, not a total budget. */
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)MAX(1u, r->stall_timeout_usec / 1000000));
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        /* Through the proxy tierd chose (resolver.c), or none: "" also keeps
         * curl from reading a proxy from the environment. */
        curl_easy_setopt(c, CURLOPT_PROXY, r->proxy);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        /* A small answer (a manifest page) never waits for a delayed ACK. */
        curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
        if (r->ca_file[0])
                curl_easy_setopt(c, CURLOPT_CAINFO, r->ca_file);
        if (a->resolve)
                curl_easy_setopt(c, CURLOPT_RESOLVE, a->resolve);
        set_method(c, q);
        a->headers = request_headers(r, c, q);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, a->headers);
        return 0;
}

/* The attempt's outcome: 0 when an HTTP answer came (any status), else a
 * negative errno; the handle holds no credential after it. */
static int attempt_end(struct http_req *q, struct attempt *a) {
        int ret = 0;

        curl_easy_getinfo(q->curl, CURLINFO_RESPONSE_CODE, &q->status);
        if (a->cc != CURLE_OK) {
                if (!q->error[0])
                        snprintf(q->error, sizeof(q->error), "%s", curl_easy_strerror(a->cc));
                ret = q->sink_error ? q->sink_error : -EIO;
        } else if (q->sink && q->status >= 200 && q->status <= 299 && q->got != q->want) {
                snprintf(q->error, sizeof(q->error), "short body: %" PRIu64 " of %" PRIu64 " bytes", q->got, q->want);
                ret = -EIO;
        }
        /* Credentials must not linger in the handle between requests, nor
         * pointers to q (which may be freed) or to the lists; its
         * connections stay in the multi handle's cache. */
        curl_easy_reset(q->curl);
        curl_slist_free_all(a->headers);
        curl_slist_free_all(a->resolve);
        a->headers = a->resolve = NULL;
        return ret;
}

/* The outcome and end time of each transfer of qs that has ended. */
static void collect_done(CURLM *m, struct http_req *const *qs, struct attempt *a, size_t n) {
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)))
                for (size_t i = 0; i < n; i++)
                        if (msg->msg == CURLMSG_DONE && qs[i] && qs[i]->curl == msg->easy_handle) {
                                a[i].cc = msg->data.result;
                                a[i].ended_usec = now_usec();
                        }
}

/* The transfers of qs side by side on the thread's multi handle, until
 * each has ended (its CURLcode in a[i].cc). */
static void run_transfers(CURLM *m, struct http_req *const *qs, struct attempt *a, size_t n) {
        int running = 0;

        for (size_t i = 0; i < n; i++)
                if (qs[i] && curl_multi_add_handle(m, qs[i]->curl) == CURLM_OK)
                        running++;
        for (size_t i = 0; i < n; i++)
                a[i].ended_usec = 0;
        while (running > 0) {
                if (curl_multi_perform(m, &running) != CURLM_OK)
                        break;
                collect_done(m, qs, a, n);
                if (running > 0 && curl_multi_poll(m, NULL, 0, 1000, NULL) != CURLM_OK)
                        break;
        }
        collect_done(m, qs, a, n);
        for (size_t i = 0; i < n; i++) {
                if (!a[i].ended_usec)
                        a[i].ended_usec = now_usec();
                if (qs[i])
                        curl_multi_remove_handle(m, qs[i]->curl);
        }
}

/* One attempt. 0 when an HTTP answer came (any status), else -EIO. */
static int perform(struct remote *r, struct http_req *q) {
        struct thread_handles *t = thread_handles(r);
        struct attempt a;

        if (!t)
                return -ENOMEM;
        int ret = attempt_start(r, q, thread_easy(t, 0), &a);
        if (ret == 0) {
                run_transfers(t->multi, &q, &a, 1);
                ret = attempt_end(q, &a);
        }
        curl_slist_free_all(a.resolve);
        return ret;
}

static bool retryable(int r, long status) {
        if (r == -EIO && status == 0)
                return true; /* connection refused, reset, timeout */
        if (r == -EIO && status >= 200 && status <= 299)
                return true; /* short or broken body: resume */
        return status >= 500 || status == 429;
}

/* The rest of q's attempts, after one whose outcome is ret: retried while
 * it may help and the stall timeout allows (counted from started). */
static int request_settle(struct remote *r, struct http_req *q, const char *key, int ret, uint64_t started) {
        uint64_t deadline = started + r->stall_timeout_usec, backoff = BACKOFF_FIRST_USEC;
        unsigned attempt = 1;

        for (;;) {
                if (ret == 0 && q->status >= 200 && q->status <= 299)
                        return 0;
                if (ret == 0)
                        ret = q->status == 404   ? -ENOENT
                              : q->status == 403 ? -EACCES
                              : q->status == 412 ? -EEXIST /* If-None-Match: * and the object is there */
                                                 : -EIO;
                if (q->sink_error == -EIO && q->status >= 200 && q->status <= 299 && q->error[0] &&
                    strncmp(q->error, "short body", 10) != 0)
                        break; /* a wrong range or too many bytes: the server is broken, not busy */
                if (q->sink_error && q->sink_error != -EIO)
                        break; /* the local side failed (ENOSPC...) */
                /* An upload cut off mid-body (a store or proxy closed the
                 * connection: broken pipe) is sent again from its start,
                 * its hash taken back to before its first byte; with no
                 * such state kept, not again: the hash covers one pass. */
                if (q->body_fd >= 0 && q->body_pos > 0 && q->body_md &&
                    (!q->body_md_start || !EVP_MD_CTX_copy_ex(q->body_md, q->body_md_start)))
                        break;
                if (!retryable(ret, q->status) || now_usec() + backoff > deadline)
                        break;
                /* Exponential backoff with jitter: many workers do not retry in step. */
                usleep((useconds_t)(backoff / 2 + (uint64_t)random() % (backoff / 2 + 1)));
                backoff = MIN(backoff * 2, BACKOFF_MAX_USEC);
                q->body_pos = 0;
                attempt++;
                ret = perform(r, q);
        }
        if ((ret == -ENOENT && q->quiet_missing) || ret == -EEXIST)
                return ret;
        /* Logged once, with what a person needs and no secret. */
        log_error("tenant %s: %s %s%s: HTTP %ld%s%s%s (after %u attempt%s)", r->tenant, q->method, r->object_base, key,
                  q->status, q->error[0] ? ", " : "", q->error,
                  q->resp_len && strstr(q->resp, "<Code>") ? ", server said " : "", attempt, attempt > 1 ? "s" : "");
        if (q->resp_len && strstr(q->resp, "<Code>")) {
                const char *code = strstr(q->resp, "<Code>") + 6;
                log_error("tenant %s: server error code %.*s", r->tenant, (int)strcspn(code, "<"), code);
        }
        return ret;
}

int remote_request(struct remote *r, struct http_req *q, const char *key) {
        uint64_t started = now_usec();
        return request_settle(r, q, key, perform(r, q), started);
}

int remote_init(struct remote *r, const struct proto_config *cfg, bool s3) {
        int ret;
        r->s3 = s3;
        r->base.ops = s3 ? &backend_s3_ops : &backend_http_ops;
        snprintf(r->tenant, sizeof(r->tenant), "%s", cfg->tenant);
        snprintf(r->sse, sizeof(r->sse), "%s", cfg->sse);
        snprintf(r->kms_key_id, sizeof(r->kms_key_id), "%s", cfg->kms_key_id);
        snprintf(r->ca_file, sizeof(r->ca_file), "%s", cfg->ca_file);
        snprintf(r->proxy, sizeof(r->proxy), "%s", cfg->proxy);
        snprintf(r->sigv4, sizeof(r->sigv4), "aws:amz:%s:s3", cfg->region);
        r->connect_timeout_usec = cfg->connect_timeout_usec ?: 10000000ull;
        r->stall_timeout_usec = cfg->stall_timeout_usec ?: 30000000ull;
        r->multipart_threshold = cfg->multipart_threshold ?: (64u << 20);
        r->part_size = cfg->part_size ?: (8u << 20);
        pthread_mutex_init(&r->lock, NULL);
        if (pthread_key_create(&r->curl_key, thread_handles_free) != 0)
                return -ENOMEM;
        r->need_resolve = cfg->resolve_needed != 0;
        if ((ret = remote_set_resolve(&r->base, cfg->resolve)) < 0)
                return ret;
        return remote_set_headers(&r->base, cfg->headers);
}

int remote_fetch(struct backend *b, const char *key, uint64_t offset, uint64_t length, backend_sink_t sink, void *ctx) {
        struct remote *r = (struct remote *)b;
        struct http_req q;
        int ret;

        if (length == 0)
                return 0;
        http_req_init(&q, "GET");
        remote_object_url(r, &q, key, NULL);
        q.sink = sink;
        q.sink_ctx = ctx;
        q.want_off = offset;
        q.want = length;
        ret = remote_request(r, &q, key);
        http_req_done(&q);
        return ret;
}

static void fetch_request(struct remote *r, struct http_req *q, const struct fetch_part *p) {
        http_req_init(q, "GET");
        remote_object_url(r, q, p->key, NULL);
        q->sink = p->sink;
        q->sink_ctx = p->ctx;
        q->want_off = p->offset;
        q->want = p->length;
}

/* The first attempts side by side on the thread's handles (one round trip
 * for all on kept-alive connections); a part whose first attempt failed
 * goes on alone, retried as any request. */
static void fetch_batch(struct remote *r, struct thread_handles *t, struct fetch_part *parts, size_t n) {
        struct http_req *q[REMOTE_PARALLEL_MAX] = { 0 };
        struct attempt a[REMOTE_PARALLEL_MAX];
        int ret[REMOTE_PARALLEL_MAX] = { 0 };
        uint64_t started = now_usec();

        for (size_t i = 0; i < n; i++) {
                a[i] = (struct attempt){ 0 };
                if (parts[i].length == 0 || !(q[i] = malloc(sizeof(*q[i])))) {
                        parts[i].result = parts[i].length == 0 ? 0 : -ENOMEM;
                        continue;
                }
                fetch_request(r, q[i], &parts[i]);
                ret[i] = attempt_start(r, q[i], thread_easy(t, i), &a[i]);
        }
        struct http_req *running[REMOTE_PARALLEL_MAX];
        for (size_t i = 0; i < n; i++)
                running[i] = q[i] && ret[i] == 0 ? q[i] : NULL;
        run_transfers(t->multi, running, a, n);
        for (size_t i = 0; i < n; i++) {
                if (!q[i])
                        continue;
                if (running[i])
                        ret[i] = attempt_end(q[i], &a[i]);
                curl_slist_free_all(a[i].resolve);
                /* Its retries' time as if it had run alone: the time it
                 * waited for the others after it ended does not count (a
                 * part that failed at once still gets its retries when
                 * another ran long; one that stalled gets none more). */
                parts[i].result = request_settle(r, q[i], parts[i].key, ret[i],
                                                 started + (now_usec() - a[i].ended_usec));
                http_req_done(q[i]);
                free(q[i]);
        }
}

void remote_fetch_many(struct backend *b, struct fetch_part *parts, size_t n) {
        struct remote *r = (struct remote *)b;
        struct thread_handles *t = thread_handles(r);

        for (size_t done = 0; done < n; done += REMOTE_PARALLEL_MAX) {
                size_t k = MIN(n - done, (size_t)REMOTE_PARALLEL_MAX);
                if (t)
                        fetch_batch(r, t, parts + done, k);
                else
                        for (size_t i = done; i < done + k; i++)
                                parts[i].result = -ENOMEM;
        }
}
