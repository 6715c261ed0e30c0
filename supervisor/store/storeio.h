/* SPDX-License-Identifier: MIT */
/*
 * Small objects tierd itself keeps in a tenant's store (the catalog), read
 * and written by the tenant's worker through a memfd: tierd never talks to
 * the network.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "tierd.h"

/* done(userdata, 0, data, len) with the whole object (data valid during the
 * call only), or a negative errno: -ENOENT not there, -EFBIG over max. */
typedef void (*store_got_t)(void *userdata, int error, const char *data, size_t len);
int store_get(struct tenant *tn, const char *key, size_t max, store_got_t done, void *userdata);

/* The same, for objects too large to read on the event loop (a catalog
 * snapshot may be a GiB, and reading one decrypts it): work(userdata,
 * data, len) runs over the whole object on a thread of its own
 * (offthread.h: it touches nothing but userdata's own results; an object
 * of at most 64 KiB is worked on the loop, at once), then done(userdata,
 * 0) on the loop; or done(userdata, -errno) when the object could not be
 * read, work not run. */
typedef void (*store_work_t)(void *userdata, const char *data, size_t len);
int store_get_worked(struct tenant *tn, const char *key, size_t max, store_work_t work,
                     void (*done)(void *userdata, int error), void *userdata);

/* Is key there? done(userdata, 0, NULL, its size) or -ENOENT. */
int store_head(struct tenant *tn, const char *key, store_got_t done, void *userdata);

/* Stores len bytes as key; if_absent: -EEXIST when key is there already
 * (nothing written). done(userdata, 0 or a negative errno). */
typedef void (*store_put_t)(void *userdata, int error);

/* Every object of tierd's of one kind (proto.h; at most max bytes of
 * records, else -EFBIG): done(userdata, 0, objects, n), the objects valid
 * during the call only. -EOPNOTSUPP: the store cannot list (http). */
typedef void (*store_listed_t)(void *userdata, int error, const struct proto_object *objects, size_t n);
int store_list(struct tenant *tn, uint32_t kind, size_t max, store_listed_t done, void *userdata);
/* The same, for listings too long to go through on the event loop (a
 * store may hold millions of objects): work(userdata, objects, n) runs
 * on a thread as store_get_worked's does, then done(userdata, 0) on the
 * loop; or done(userdata, -errno), work not run. */
typedef void (*store_list_work_t)(void *userdata, const struct proto_object *objects, size_t n);
int store_list_worked(struct tenant *tn, uint32_t kind, size_t max, store_list_work_t work,
                      void (*done)(void *userdata, int error), void *userdata);

/* Deletes key if it is still of size bytes and last changed before the
 * second `before` (the store's clock), else -EBUSY: an archive refreshed
 * or wrote it since it was listed. before INT64_MAX: the size alone, no
 * age asked (-EIO from a store that does not say ages otherwise).
 * done(userdata, 0 or a negative errno). */
int store_delete_if_old(struct tenant *tn, const char *key, uint64_t size, int64_t before, store_put_t done,
                        void *userdata);
int store_put(struct tenant *tn, const char *key, const void *data, size_t len, bool if_absent, store_put_t done,
              void *userdata);

/* Do a and b keep their objects in one place, however their URLs are
 * spelled? (file://: the same directory; s3://: endpoint, bucket and
 * prefix.) Unsure: yes. */
bool store_same_place(const struct tenant *a, const struct tenant *b);
