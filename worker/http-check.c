/* SPDX-License-Identifier: MIT */
#include "http-check.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Decimal digits only: no sign, no space inside, no overflow. Advances *p. */
static bool parse_u64(const char **p, uint64_t *ret) {
        uint64_t v = 0;
        const char *s = *p;
        if (*s < '0' || *s > '9')
                return false;
        for (; *s >= '0' && *s <= '9'; s++) {
                unsigned d = (unsigned)(*s - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return false;
                v = v * 10 + d;
        }
        *p = s;
        *ret = v;
        return true;
}

static const char *header_value(const char *line, const char *name) {
        size_t n = strlen(name);
        if (strncasecmp(line, name, n) != 0 || line[n] != ':')
                return NULL;
        line += n + 1;
        while (*line == ' ' || *line == '\t')
                line++;
        return line;
}

void http_meta_header(struct http_meta *m, const char *buf, size_t len) {
        char line[512];
        const char *v;
        uint64_t a, b;

        snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) - 1 ? len : sizeof(line) - 1), buf);
        line[strcspn(line, "\r\n")] = 0;
        if (strncmp(line, "HTTP/", 5) == 0) {
                /* A new response (after 100-continue): forget the last one. */
                *m = (struct http_meta){};
        } else if ((v = header_value(line, "content-length"))) {
                m->have_length = parse_u64(&v, &m->content_length) && *v == 0;
        } else if ((v = header_value(line, "content-range"))) {
                /* "bytes START-END/TOTAL" (TOTAL may be "*") */
                m->have_range = strncmp(v, "bytes ", 6) == 0 && (v += 6, parse_u64(&v, &a)) && *v++ == '-' &&
                                parse_u64(&v, &b) && *v == '/' && b >= a && b < UINT64_MAX;
                if (m->have_range) {
                        m->range_start = a;
                        m->range_end = b + 1;
                }
        } else if ((v = header_value(line, "x-amz-meta-sha256"))) {
                snprintf(m->meta_sha256, sizeof(m->meta_sha256), "%s", v);
        } else if ((v = header_value(line, "last-modified"))) {
                time_t t = curl_getdate(v, NULL); /* an HTTP date: libcurl reads every form of it */
                m->last_modified = t > 0 ? (int64_t)t : 0;
        } else if ((v = header_value(line, "etag"))) {
                snprintf(m->etag, sizeof(m->etag), "%s", v);
        }
}

bool http_range_answer_ok(long status, const struct http_meta *m, uint64_t want_start, uint64_t want_end) {
        if (status == 206)
                return m->have_range && m->range_start == want_start && m->range_end == want_end &&
                       (!m->have_length || m->content_length == want_end - want_start);
        if (status == 200)
                return want_start == 0 && m->have_length && m->content_length == want_end;
        return false;
}

int s3_bucket_url(const char *endpoint, const char *bucket, bool virtual_hosted, char *out, size_t size) {
        const char *host = strstr(endpoint, "://");
        int n;
        if (!host)
                return -EINVAL;
        host += 3;
        if (virtual_hosted)
                n = snprintf(out, size, "%.*s%s.%s/", (int)(host - endpoint), endpoint, bucket, host);
        else
                n = snprintf(out, size, "%s/%s/", endpoint, bucket);
        return n < 0 || (size_t)n >= size ? -E2BIG : 0;
}
