/* SPDX-License-Identifier: MIT */
/*
 * A hash of directory handles, with a least-recently-heard list for each
 * tenant (catalogowner.h).
 */
#include "catalogowner.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "handle.h"
#include "macro.h"

struct owned {
        struct owned *chain;         /* the bucket's next */
        struct owned *newer, *older; /* the tenant's list (not a pinned one's) */
        int tenant;
        bool pinned;
        struct file_handle fh; /* with its bytes after it */
};

struct owner_list {
        struct owned *newest, *oldest;
        size_t n;
};

struct catalog_owners {
        struct owned **buckets;
        size_t mask;
        size_t n_tenants;
        struct owner_list *lists; /* each tenant's */
};

/* FNV-1a over the handle's type and bytes. */
static size_t handle_hash(const struct file_handle *fh) {
        uint64_t h = 1469598103934665603ULL ^ (uint32_t)fh->handle_type;
        for (unsigned i = 0; i < fh->handle_bytes; i++)
                h = (h ^ fh->f_handle[i]) * 1099511628211ULL;
        return (size_t)h;
}

struct catalog_owners *catalog_owners_new(size_t n_tenants, size_t n_here) {
        struct catalog_owners *o = calloc(1, sizeof(*o));
        size_t n = 1024;

        /* A bucket for every two directories at most. */
        while (n < 1u << 20 && n < n_here * OWNER_MAX / 2)
                n <<= 1;
        if (!o || !(o->buckets = calloc(n, sizeof(struct owned *))) ||
            !(o->lists = calloc(n_tenants ?: 1, sizeof(*o->lists)))) {
                if (o)
                        free(o->buckets);
                free(o);
                return NULL;
        }
        o->mask = n - 1;
        o->n_tenants = n_tenants;
        return o;
}

static struct owned **find(struct catalog_owners *o, const struct file_handle *fh) {
        struct owned **at = &o->buckets[handle_hash(fh) & o->mask];
        while (*at && !file_handle_equal(&(*at)->fh, fh))
                at = &(*at)->chain;
        return at;
}

static void unlist(struct catalog_owners *o, struct owned *e) {
        struct owner_list *l = &o->lists[e->tenant];
        if (e->pinned)
                return;
        *(e->newer ? &e->newer->older : &l->newest) = e->older;
        *(e->older ? &e->older->newer : &l->oldest) = e->newer;
        e->newer = e->older = NULL;
        l->n--;
}

static void list_first(struct catalog_owners *o, struct owned *e) {
        struct owner_list *l = &o->lists[e->tenant];
        if (e->pinned)
                return;
        e->newer = NULL;
        e->older = l->newest;
        *(l->newest ? &l->newest->newer : &l->oldest) = e;
        l->newest = e;
        l->n++;
}

static void drop(struct catalog_owners *o, struct owned **at) {
        struct owned *e = *at;
        if (!e)
                return;
        *at = e->chain;
        unlist(o, e);
        free(e);
}

int catalog_owners_get(struct catalog_owners *o, const struct file_handle *fh) {
        struct owned *e = fh ? *find(o, fh) : NULL;
        if (!e)
                return -1;
        unlist(o, e);
        list_first(o, e);
        return e->tenant;
}

int catalog_owners_set(struct catalog_owners *o, const struct file_handle *fh, int tenant) {
        struct owned **at = find(o, fh), *e;

        if (*at && (*at)->pinned)
                return 0;
        if (*at && (*at)->tenant == tenant) {
                unlist(o, *at);
                list_first(o, *at);
                return 0;
        }
        if (*at)
                drop(o, at);
        if (tenant < 0 || (size_t)tenant >= o->n_tenants)
                return 0;
        if (o->lists[tenant].n >= OWNER_MAX) {
                struct owned *old = o->lists[tenant].oldest;
                drop(o, find(o, &old->fh));
                at = find(o, fh); /* the chain may have changed */
        }
        if (!(e = calloc(1, sizeof(*e) + fh->handle_bytes)))
                return -ENOMEM;
        memcpy(&e->fh, fh, sizeof(*fh) + fh->handle_bytes);
        e->tenant = tenant;
        e->chain = *at;
        *at = e;
        list_first(o, e);
        return 0;
}

int catalog_owners_pin(struct catalog_owners *o, const struct file_handle *fh, int tenant) {
        struct owned **at = find(o, fh), *e;

        if (tenant < 0 || (size_t)tenant >= o->n_tenants)
                return -EINVAL;
        if (*at)
                drop(o, at);
        if (!(e = calloc(1, sizeof(*e) + fh->handle_bytes)))
                return -ENOMEM;
        memcpy(&e->fh, fh, sizeof(*fh) + fh->handle_bytes);
        e->tenant = tenant;
        e->pinned = true;
        e->chain = *at;
        *at = e;
        return 0;
}

void catalog_owners_clear(struct catalog_owners *o) {
        for (size_t i = 0; i < o->n_tenants; i++)
                while (o->lists[i].oldest)
                        drop(o, find(o, &o->lists[i].oldest->fh));
}

static void drop_all(struct catalog_owners *o) {
        for (size_t i = 0; i <= o->mask; i++)
                while (o->buckets[i])
                        drop(o, &o->buckets[i]);
}

size_t catalog_owners_count(const struct catalog_owners *o, int tenant) {
        return tenant >= 0 && (size_t)tenant < o->n_tenants ? o->lists[tenant].n : 0;
}

void catalog_owners_free(struct catalog_owners *o) {
        if (!o)
                return;
        drop_all(o);
        free(o->buckets);
        free(o->lists);
        free(o);
}
