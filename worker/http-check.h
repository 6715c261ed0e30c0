/* SPDX-License-Identifier: MIT */
/*
 * What a remote store says, checked before a byte is trusted: response
 * headers and the shape of a ranged answer, small XML values. Pure, so the
 * checks are unit-tested against hostile answers.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_meta {
        bool have_length, have_range;
        uint64_t content_length;
        uint64_t range_start, range_end; /* [start, end) from Content-Range */
        char meta_sha256[65];            /* x-amz-meta-sha256 */
        char etag[128];
        int64_t last_modified; /* seconds since the epoch; 0: not said */
};

/* Takes one header line (no CR/LF needed); a status line resets meta. */
void http_meta_header(struct http_meta *m, const char *line, size_t len);

/* Is (status, meta) exactly the bytes [want_start, want_end) of the object?
 * A 206 must name that range; a 200 is accepted only for a request from 0
 * whose length is the whole answer. */
bool http_range_answer_ok(long status, const struct http_meta *m, uint64_t want_start, uint64_t want_end);

/* S3 URLs: "ENDPOINT/BUCKET/" (path-style) or "SCHEME://BUCKET.HOST/"
 * (virtual-hosted) into out; -E2BIG if it does not fit. */
int s3_bucket_url(const char *endpoint, const char *bucket, bool virtual_hosted, char *out, size_t size);
