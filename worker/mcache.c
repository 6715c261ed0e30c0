/* SPDX-License-Identifier: MIT */
#include "mcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct entry {
        struct entry *next;
        uint8_t root[32];
        uint64_t offset, used; /* used: the tick of the last hit */
        size_t len;
        uint8_t bytes[];
};

struct manifest_cache {
        pthread_mutex_t lock;
        struct entry *entries;
        uint64_t bytes, max, tick;
};

struct manifest_cache *mcache_new(uint64_t max_bytes) {
        struct manifest_cache *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        pthread_mutex_init(&c->lock, NULL);
        c->max = max_bytes;
        return c;
}

void mcache_free(struct manifest_cache *c) {
        if (!c)
                return;
        while (c->entries) {
                struct entry *e = c->entries;
                c->entries = e->next;
                free(e);
        }
        pthread_mutex_destroy(&c->lock);
        free(c);
}

static struct entry **find(struct manifest_cache *c, const uint8_t root[32], uint64_t offset, size_t len) {
        for (struct entry **p = &c->entries; *p; p = &(*p)->next)
                if ((*p)->offset == offset && (*p)->len == len && memcmp((*p)->root, root, 32) == 0)
                        return p;
        return NULL;
}

bool mcache_get(struct manifest_cache *c, const uint8_t root[32], uint64_t offset, size_t len, uint8_t *buf) {
        if (!c || !c->max)
                return false;
        pthread_mutex_lock(&c->lock);
        struct entry **p = find(c, root, offset, len);
        if (p) {
                memcpy(buf, (*p)->bytes, len);
                (*p)->used = ++c->tick;
        }
        pthread_mutex_unlock(&c->lock);
        return p != NULL;
}

bool mcache_has(struct manifest_cache *c, const uint8_t root[32], uint64_t offset, size_t len) {
        if (!c || !c->max)
                return false;
        pthread_mutex_lock(&c->lock);
        bool found = find(c, root, offset, len) != NULL;
        pthread_mutex_unlock(&c->lock);
        return found;
}

/* Drops the least recently used entries until need more bytes fit. */
static void make_room(struct manifest_cache *c, uint64_t need) {
        while (c->entries && c->bytes + need > c->max) {
                struct entry **oldest = &c->entries;
                for (struct entry **p = &c->entries; *p; p = &(*p)->next)
                        if ((*p)->used < (*oldest)->used)
                                oldest = p;
                struct entry *e = *oldest;
                *oldest = e->next;
                c->bytes -= e->len;
                free(e);
        }
}

void mcache_put(struct manifest_cache *c, const uint8_t root[32], uint64_t offset, const uint8_t *buf, size_t len) {
        if (!c || len > c->max)
                return;
        struct entry *e = malloc(sizeof(*e) + len);
        if (!e)
                return;
        memcpy(e->root, root, 32);
        e->offset = offset;
        e->len = len;
        memcpy(e->bytes, buf, len);
        pthread_mutex_lock(&c->lock);
        if (find(c, root, offset, len)) { /* another thread was first */
                pthread_mutex_unlock(&c->lock);
                free(e);
                return;
        }
        make_room(c, len);
        e->used = ++c->tick;
        e->next = c->entries;
        c->entries = e;
        c->bytes += len;
        pthread_mutex_unlock(&c->lock);
}
