/* SPDX-License-Identifier: MIT */
/*
 * The one small interface every object store sits behind: fetch a range,
 * store an object, check it exists, remove it. Chosen by URL scheme.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* Receives fetched bytes in order; returns 0 or a negative errno to abort. */
typedef int (*backend_sink_t)(void *ctx, const void *data, size_t n);
/* Receives a listing's objects one by one; 0 or a negative errno to abort. */
typedef int (*backend_list_t)(void *ctx, const struct proto_object *o);

struct backend;

/* One range of a backend_fetch_many: its own sink, its own result. */
struct fetch_part {
        const char *key;
        uint64_t offset, length;
        backend_sink_t sink;
        void *ctx;
        int result; /* set: as fetch's */
};

struct backend_ops {
        const char *scheme;
        int (*open)(const struct proto_config *cfg, int store_fd, struct backend **ret);
        void (*close)(struct backend *b);
        /* Exactly length bytes from offset, or an error (-ENOENT: no such
         * object; -EIO: short or failed). */
        int (*fetch)(struct backend *b, const char *key, uint64_t offset, uint64_t length, backend_sink_t sink,
                     void *ctx);
        /* Optional: the parts at once, so that they cost one round trip to
         * a remote store, not one each (each part's sink is called from
         * this thread, interleaved with the others'). */
        void (*fetch_many)(struct backend *b, struct fetch_part *parts, size_t n);
        /* 0 and the size (and when it last changed, in seconds since the
         * epoch, if mtime is given) if it exists, -ENOENT if not. */
        int (*exists)(struct backend *b, const char *key, uint64_t *size, int64_t *mtime);
        /* Uploads fd's first size bytes; fails with -EBADMSG (nothing stored)
         * when what was read does not hash to sha256. With
         * BACKEND_STORE_IF_ABSENT, -EEXIST (nothing stored) when key is
         * there already: a conditional PUT (If-None-Match: *). */
        int (*store)(struct backend *b, const char *key, int fd, uint64_t size, const uint8_t sha256[32],
                     unsigned flags);
        int (*remove)(struct backend *b, const char *key);
        /* Optional (no garbage collection without them): every object of
         * tierd's of one kind (objkey.h), in no particular order; and an
         * object made new again, its content and metadata unchanged (S3: a
         * copy onto itself), so that a collection that found it old does
         * not take it now that an archive relies on it. */
        int (*list)(struct backend *b, uint32_t kind, backend_list_t each, void *ctx);
        int (*touch)(struct backend *b, const char *key);
        /* Optional: new keys (rotated credentials). */
        void (*set_credentials)(struct backend *b, const struct proto_credentials *c);
        /* Optional: new configured headers ("Name: value" lines, a rotated
         * token): 0, or -errno with the old ones kept. */
        int (*set_headers)(struct backend *b, const char *headers);
        /* Optional: new addresses of the store's host ("HOST:PORT:ADDR,..."). */
        int (*set_resolve)(struct backend *b, const char *resolve);
        /* Optional: once at start, with credentials: tidy what a crash left. */
        int (*cleanup)(struct backend *b);
};

/* IF_ABSENT: a fenced write, -EEXIST if the key is there. REPLACE: one
 * there is replaced (tierd's own objects, or a content-addressed one known
 * damaged: another size). Neither: the key is content-addressed, one there
 * already holds the same bytes and is kept as it is. */
enum { BACKEND_STORE_IF_ABSENT = 1u << 0, BACKEND_STORE_REPLACE = 1u << 1 };

struct backend {
        const struct backend_ops *ops;
        /* Held across "is it there? then refresh it" (an archive reusing an
         * object) and "is it old? then delete it" (a collection): each sees
         * the other whole, so an archive never relies on an object a
         * collection is deleting. Archives and collections of a tenant go
         * through its host worker, this process. */
        pthread_mutex_t gc_lock;
};

extern const struct backend_ops backend_file_ops;
extern const struct backend_ops backend_s3_ops;
extern const struct backend_ops backend_http_ops;

int backend_open(const struct proto_config *cfg, int store_fd, struct backend **ret);

/* Every part fetched, at once where the store can (else one after the
 * other); each part's result in it. */
void backend_fetch_many(struct backend *b, struct fetch_part *parts, size_t n);

/* An archive's object: if key is in the store already, of size bytes, it
 * is made new again (touch: a collection that found it old does not take
 * it now) and *reused set (reused may be NULL); else fd's bytes are
 * uploaded. Content-addressed: an object with this key and size is this
 * content. */
int backend_store_once(struct backend *b, const char *key, int fd, uint64_t size, const uint8_t sha256[32],
                       bool *reused);
/* tierd's own objects (a trace, the catalog's): fd's bytes stored as key
 * (how: BACKEND_STORE_*), after any collection's check and delete of the
 * same key under way. */
int backend_put(struct backend *b, const char *key, int fd, uint64_t size, const uint8_t sha256[32], unsigned how);
/* A collection's delete: key goes only if it is of size bytes and last
 * changed before the second `before`; else -EBUSY. 0 if it is gone.
 * before INT64_MAX: its size alone is checked, no age asked. */
int backend_remove_if_old(struct backend *b, const char *key, uint64_t size, int64_t before);
