/* SPDX-License-Identifier: MIT */
/*
 * The one small interface every object store sits behind: fetch a range,
 * store an object, check it exists, remove it. Chosen by URL scheme.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* Receives fetched bytes in order; returns 0 or a negative errno to abort. */
typedef int (*backend_sink_t)(void *ctx, const void *data, size_t n);

struct backend;

struct backend_ops {
        const char *scheme;
        int (*open)(const struct proto_config *cfg, int store_fd, struct backend **ret);
        void (*close)(struct backend *b);
        /* Exactly length bytes from offset, or an error (-ENOENT: no such
         * object; -EIO: short or failed). */
        int (*fetch)(struct backend *b, const char *key, uint64_t offset, uint64_t length, backend_sink_t sink,
                     void *ctx);
        /* 0 and the size if it exists, -ENOENT if not. */
        int (*exists)(struct backend *b, const char *key, uint64_t *size);
        /* Uploads fd's first size bytes; fails with -EBADMSG (nothing stored)
         * when what was read does not hash to sha256. With
         * BACKEND_STORE_IF_ABSENT, -EEXIST (nothing stored) when key is
         * there already: a conditional PUT (If-None-Match: *). */
        int (*store)(struct backend *b, const char *key, int fd, uint64_t size, const uint8_t sha256[32],
                     unsigned flags);
        int (*remove)(struct backend *b, const char *key);
        /* Optional: new keys (rotated credentials). */
        void (*set_credentials)(struct backend *b, const struct proto_credentials *c);
        /* Optional: once at start, with credentials: tidy what a crash left. */
        int (*cleanup)(struct backend *b);
};

enum { BACKEND_STORE_IF_ABSENT = 1u << 0 };

struct backend {
        const struct backend_ops *ops;
};

extern const struct backend_ops backend_file_ops;
extern const struct backend_ops backend_s3_ops;
extern const struct backend_ops backend_http_ops;

int backend_open(const struct proto_config *cfg, int store_fd, struct backend **ret);
