/* SPDX-License-Identifier: MIT */
/* Backend URLs: file:///DIR (embedded default), http(s)://, s3:// (later). */
#pragma once

enum backend_kind { BACKEND_FILE, BACKEND_HTTP, BACKEND_S3 };

struct backend_url {
        enum backend_kind kind;
        char *path; /* file://: the absolute store directory */
};

/* Returns 0, -EINVAL with *error set to a static reason for a malformed URL,
 * or -EOPNOTSUPP for a scheme this build cannot serve yet. */
int backend_url_parse(const char *url, struct backend_url *ret, const char **error);
void backend_url_done(struct backend_url *u);
