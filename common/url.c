/* SPDX-License-Identifier: MIT */
#include "url.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int file_path_valid(const char *p, const char **error) {
        if (p[0] != '/') {
                *error = "file:// backend needs an absolute path (file:///DIR)";
                return -EINVAL;
        }
        for (const char *c = p; *c; c++) {
                if ((unsigned char)*c < 0x20) {
                        *error = "control character in backend path";
                        return -EINVAL;
                }
                if (c[0] == '/' && c[1] == '.' && c[2] == '.' && (c[3] == '/' || c[3] == 0)) {
                        *error = "'..' in backend path";
                        return -EINVAL;
                }
        }
        return 0;
}

/* S3 bucket names: 3-63 of lowercase letters, digits, '-' and '.'. */
static int bucket_valid(const char *b, size_t n, const char **error) {
        if (n < 3 || n > 63) {
                *error = "S3 bucket name must have 3 to 63 characters (s3://BUCKET/PREFIX)";
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++)
                if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '-' || b[i] == '.')) {
                        *error = "S3 bucket name may use only lowercase letters, digits, '-' and '.'";
                        return -EINVAL;
                }
        return 0;
}

/* A key prefix: path segments of unreserved characters, so object URLs
 * need no escaping and every server signs them the same way. */
static int prefix_set(struct backend_url *u, const char *p, const char **error) {
        size_t n = strlen(p);
        while (n > 0 && p[n - 1] == '/')
                n--;
        for (size_t i = 0; i < n; i++) {
                char c = p[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~/", c)) ||
                    (c == '/' && (i == 0 || p[i - 1] == '/'))) {
                        *error = "backend prefix may use only letters, digits, '-', '.', '_', '~' and single '/'";
                        return -EINVAL;
                }
        }
        if ((n == 2 && strncmp(p, "..", 2) == 0) || strstr(p, "/../") || strncmp(p, "../", 3) == 0) {
                *error = "'..' in backend prefix";
                return -EINVAL;
        }
        u->prefix = strndup(p, n);
        return u->prefix ? 0 : -ENOMEM;
}

int backend_url_parse(const char *url, struct backend_url *ret, const char **error) {
        const char *dummy;
        int r;

        if (!error)
                error = &dummy;
        *ret = (struct backend_url){};
        if (!url || !*url) {
                *error = "empty backend URL";
                return -EINVAL;
        }
        if (strncmp(url, "file://", 7) == 0) {
                const char *p = url + 7;
                r = file_path_valid(p, error);
                if (r < 0)
                        return r;
                ret->kind = BACKEND_FILE;
                ret->path = strdup(p);
                if (!ret->path)
                        return -ENOMEM;
                /* Trailing slashes carry no meaning: "file:///a/" is "/a". */
                for (size_t n = strlen(ret->path); n > 1 && ret->path[n - 1] == '/'; n--)
                        ret->path[n - 1] = 0;
                return 0;
        }
        if (strncmp(url, "s3://", 5) == 0) {
                const char *b = url + 5, *slash = strchr(b, '/');
                size_t n = slash ? (size_t)(slash - b) : strlen(b);
                r = bucket_valid(b, n, error);
                if (r < 0)
                        return r;
                ret->kind = BACKEND_S3;
                ret->bucket = strndup(b, n);
                r = prefix_set(ret, slash ? slash + 1 : "", error);
                if (r < 0 || !ret->bucket) {
                        backend_url_done(ret);
                        return r < 0 ? r : -ENOMEM;
                }
                return 0;
        }
        if (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0) {
                struct http_url h;
                if ((r = http_url_parse(url, &h, error)) < 0)
                        return r;
                ret->kind = BACKEND_HTTP;
                ret->base = h.base;
                h.base = NULL;
                r = prefix_set(ret, h.path, error);
                http_url_done(&h);
                if (r < 0)
                        backend_url_done(ret);
                return r;
        }
        *error = "unknown backend URL scheme (expected file://, http://, https:// or s3://)";
        return -EINVAL;
}

void backend_url_done(struct backend_url *u) {
        free(u->path);
        free(u->bucket);
        free(u->base);
        free(u->prefix);
        *u = (struct backend_url){};
}

/* Each part curl found, or NULL. */
static char *part(CURLU *u, CURLUPart what) {
        char *v = NULL;
        return curl_url_get(u, what, &v, 0) == CURLUE_OK ? v : NULL;
}

int http_url_parse(const char *url, struct http_url *ret, const char **error) {
        static const struct { CURLUPart part; const char *why; } refused[] = {
                { CURLUPART_USER, "no user:password@ in a store's URL (credentials have keys of their own)" },
                { CURLUPART_PASSWORD, "no user:password@ in a store's URL (credentials have keys of their own)" },
                { CURLUPART_OPTIONS, "no login options in a store's URL" },
                { CURLUPART_QUERY, "no ?query in a store's URL" },
                { CURLUPART_FRAGMENT, "no #fragment in a store's URL" },
                { CURLUPART_ZONEID, "no IPv6 zone id in a store's URL" },
        };
        CURLU *u = curl_url();
        char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
        int r = -EINVAL;

        *ret = (struct http_url){};
        if (!u)
                return -ENOMEM;
        const char *sep = strstr(url, "://");
        if (sep && sep[3] == '/') { /* curl would take "http:///p" as host p */
                *error = "a store's URL has no host";
                goto out;
        }
        if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
                *error = "not a URL (http://HOST[:PORT][/PREFIX] or https://...; libcurl cannot read it)";
                goto out;
        }
        scheme = part(u, CURLUPART_SCHEME);
        if (!scheme || (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
                *error = "a store's URL is http:// or https://";
                goto out;
        }
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                char *v = part(u, refused[i].part);
                curl_free(v);
                if (v) {
                        *error = refused[i].why;
                        goto out;
                }
        }
        host = part(u, CURLUPART_HOST);
        port = part(u, CURLUPART_PORT);
        path = part(u, CURLUPART_PATH);
        if (!host || !host[0] || strcmp(host, "[]") == 0) {
                *error = "a store's URL has no host";
                goto out;
        }
        for (const char *h = host; *h; h++)
                if ((unsigned char)*h >= 0x80) {
                        /* The name looked up must be the one curl connects to. */
                        *error = "a store's host is ASCII (an IDN in its punycode form: xn--...)";
                        goto out;
                }
        ret->tls = strcmp(scheme, "https") == 0;
        ret->port = ret->tls ? 443 : 80;
        if (port) {
                char *end;
                unsigned long v = strtoul(port, &end, 10);
                if (*end || v == 0 || v > 65535) {
                        *error = "a store's port is 1 to 65535";
                        goto out;
                }
                ret->port = (unsigned)v;
        }
        size_t n = strlen(host);
        bool v6 = host[0] == '[' && host[n - 1] == ']';
        ret->host = v6 ? strndup(host + 1, n - 2) : strdup(host);
        ret->path = strdup(path && path[0] == '/' ? path + 1 : path ? path : "");
        if (asprintf(&ret->base, "%s://%s%s%s", scheme, host, port ? ":" : "", port ?: "") < 0)
                ret->base = NULL;
        r = ret->host && ret->path && ret->base ? 0 : -ENOMEM;
out:
        if (r < 0)
                http_url_done(ret);
        curl_free(scheme);
        curl_free(host);
        curl_free(port);
        curl_free(path);
        curl_url_cleanup(u);
        return r;
}

void http_url_done(struct http_url *u) {
        free(u->base);
        free(u->host);
        free(u->path);
        *u = (struct http_url){};
}

const char *aws_domain(const char *region) {
        return region && strncmp(region, "cn-", 3) == 0 ? "amazonaws.com.cn" : "amazonaws.com";
}
