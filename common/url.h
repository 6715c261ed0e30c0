/* SPDX-License-Identifier: MIT */
/* Backend URLs: file:///DIR (embedded default), s3://BUCKET/PREFIX,
 * http(s)://HOST[:PORT]/PREFIX. */
#pragma once

#include <stdbool.h>

enum backend_kind { BACKEND_FILE, BACKEND_HTTP, BACKEND_S3 };

struct backend_url {
        enum backend_kind kind;
        char *path;   /* file://: the absolute store directory */
        char *bucket; /* s3:// */
        char *base;   /* http(s)://: "scheme://host[:port]" */
        char *prefix; /* s3://, http(s)://: key prefix, no leading or trailing '/', may be "" */
};

/* Returns 0, or -EINVAL with *error set to a static reason. */
int backend_url_parse(const char *url, struct backend_url *ret, const char **error);
void backend_url_done(struct backend_url *u);

/* An http(s):// URL as libcurl reads it (curl_url(): the same parser that
 * will fetch it), with no user, password, query, fragment or zone id. */
struct http_url {
        char *base;    /* "scheme://host[:port]", the port only if given */
        char *host;    /* an IPv6 address without its brackets */
        char *path;    /* after the first '/', "" for none */
        unsigned port; /* given, or the scheme's (80, 443) */
        bool tls;
};
int http_url_parse(const char *url, struct http_url *ret, const char **error);
void http_url_done(struct http_url *u);

/* AWS's domain for region: "amazonaws.com.cn" in the China regions
 * ("cn-north-1"), "amazonaws.com" elsewhere (NULL: us-east-1's). */
const char *aws_domain(const char *region);
