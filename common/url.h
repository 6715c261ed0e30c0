/* SPDX-License-Identifier: MIT */
/* Backend URLs: file:///DIR (embedded default), s3://BUCKET/PREFIX,
 * http(s)://HOST[:PORT]/PREFIX. */
#pragma once

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
