/* SPDX-License-Identifier: MIT */
#include "verify.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fdio.h"
#include "fillbuf.h"
#include "hash.h"
#include "log.h"
#include "macro.h"
#include "manifest.h"
#include "progress.h"
#include "stub.h"

#define LEAVES_MAX (1u << 20)  /* 32 MiB of hashes at most; beyond, no manifest: the file restores whole */
#define CHUNK_MAX (64u << 20)  /* a fill holds a chunk in memory to check it: bigger ones get no manifest */
#define WINDOW (8u << 20)     /* bytes fetched and checked at once */
/* The manifest's bytes from its start to the last page a fill's first
 * chunk needs come in one GET when they are at most this many (a file of
 * up to about 8,000 chunks); past that, the head and each page apart. */
#define MANIFEST_PREFIX_MAX (256u << 10)

struct chunk_hasher {
        EVP_MD_CTX *md;
        uint64_t chunk, pos, i;
        uint8_t (*leaves)[32];
};

static int hash_chunks(void *ctx, const void *buf, size_t n) {
        struct chunk_hasher *h = ctx;
        const uint8_t *p = buf;

        progress_report();
        while (n > 0) {
                size_t take = (size_t)MIN((uint64_t)n, h->chunk - h->pos % h->chunk);
                EVP_DigestUpdate(h->md, p, take);
                h->pos += take;
                p += take;
                n -= take;
                if (h->pos % h->chunk == 0) {
                        EVP_DigestFinal_ex(h->md, h->leaves[h->i++], NULL);
                        EVP_DigestInit_ex(h->md, EVP_sha256(), NULL);
                }
        }
        return 0;
}

static int store_manifest(struct backend *b, const uint8_t *buf, size_t len, const uint8_t root[32]) {
        char key[STUB_KEY_MAX];
        uint8_t sha[32];

        stub_manifest_key(root, key);
        _cleanup_close_ int fd = memfd_create("manifest", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = write_full(fd, buf, len);
        if (r < 0)
                return r;
        EVP_Digest(buf, len, sha, NULL, EVP_sha256(), NULL);
        return backend_store_once(b, key, fd, len, sha, NULL);
}

int archive_hash_and_manifest(struct backend *b, int fd, uint64_t size, uint64_t chunk, struct proto_reply *rep) {
        _cleanup_md_ctx_ EVP_MD_CTX *md = EVP_MD_CTX_new();
        uint64_t chunks = chunk ? (size + chunk - 1) / chunk : 0;
        struct chunk_hasher h = { .md = md, .chunk = chunk };
        bool manifest = chunks >= 2 && chunks <= LEAVES_MAX && chunk <= CHUNK_MAX;
        int r;

        if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
                return -ENOMEM;
        if (manifest && !(h.leaves = calloc(chunks, 32)))
                return -ENOMEM;
        r = sha256_fd_range(fd, 0, size, rep->sha256, manifest ? hash_chunks : progress_each, manifest ? &h : NULL);
        if (r < 0 || !manifest) {
                free(h.leaves);
                return r;
        }
        if (h.pos % chunk != 0)
                EVP_DigestFinal_ex(md, h.leaves[h.i++], NULL); /* the short last chunk */
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;
        r = h.i == chunks ? manifest_build((const uint8_t(*)[32])h.leaves, chunks, chunk, size, &buf, &len, rep->manifest)
                          : -EIO;
        free(h.leaves);
        if (r < 0)
                return r;
        r = store_manifest(b, buf, len, rep->manifest);
        if (r < 0)
                return r;
        rep->flags |= PROTO_REPLY_MANIFEST;
        return 0;
}

struct mem_sink {
        uint8_t *buf;
        size_t len, cap;
};

static int mem_write(void *ctx, const void *data, size_t n) {
        struct mem_sink *m = ctx;
        progress_report();
        if (n > m->cap - m->len)
                return -EMSGSIZE; /* more than asked: a hostile or broken store */
        memcpy(m->buf + m->len, data, n);
        m->len += n;
        return 0;
}

/* Exactly length bytes of key at offset into buf. */
static int fetch_into(struct backend *b, const char *key, uint64_t offset, uint64_t length, uint8_t *buf) {
        struct mem_sink m = { .buf = buf, .cap = length };
        int r = b->ops->fetch(b, key, offset, length, mem_write, &m);
        return r < 0 ? r : m.len == length ? 0 : -EIO;
}

/* Manifest bytes fetched beside a fill's first window, not checked yet:
 * leaf_of takes a page from them before asking the store. */
struct piece {
        uint64_t off, len;
        uint8_t *bytes;
        bool ok;
};

/* The pages on the way from the top to one chunk's leaf, kept while the
 * chunks of a fill follow one another (and in the worker's cache across
 * fills). */
struct path {
        struct manifest_cache *mcache;
        uint8_t root[32];
        struct manifest m;
        char key[STUB_KEY_MAX];
        int64_t page[MANIFEST_LEVELS_MAX]; /* which page of each level is held, -1 none */
        uint8_t bytes[MANIFEST_LEVELS_MAX][MANIFEST_PAGE];
        struct piece pre[MANIFEST_LEVELS_MAX];
        size_t npre;
};

static void path_free(struct path **pp) {
        if (!*pp)
                return;
        for (size_t i = 0; i < (*pp)->npre; i++)
                free((*pp)->pre[i].bytes);
        free(*pp);
}

/* len bytes of the manifest at off: from what came with the first window,
 * else from the store. Checked by the caller either way. */
static int page_get(struct backend *b, const struct path *p, uint64_t off, uint64_t len, uint8_t *dst) {
        for (size_t i = 0; i < p->npre; i++) {
                const struct piece *c = &p->pre[i];
                if (c->ok && off >= c->off && off + len <= c->off + c->len) {
                        memcpy(dst, c->bytes + (off - c->off), len);
                        return 0;
                }
        }
        return fetch_into(b, p->key, off, len, dst);
}

static int leaf_of(struct backend *b, struct path *p, uint64_t chunk_index, const uint8_t **leaf) {
        const struct manifest *m = &p->m;
        if (m->levels == 1) {
                *leaf = m->top + chunk_index * 32;
                return 0;
        }
        for (int level = (int)m->levels - 2; level >= 0; level--) {
                uint64_t idx = manifest_index_at((unsigned)level, chunk_index), page = idx / MANIFEST_FANOUT, off, len;
                if (p->page[level] == (int64_t)page)
                        continue;
                manifest_page_range(m, (unsigned)level, idx, &off, &len);
                /* A cached page was checked on its way in, against the same
                 * root: the same bytes. */
                int r = 0;
                if (!mcache_get(p->mcache, p->root, off, len, p->bytes[level])) {
                        r = page_get(b, p, off, len, p->bytes[level]);
                        if (r == 0)
                                r = manifest_check_page(m, (unsigned)level, page, p->bytes[level], len,
                                                        level + 2 < (int)m->levels ? p->bytes[level + 1] : NULL);
                        if (r == 0)
                                mcache_put(p->mcache, p->root, off, p->bytes[level], len);
                }
                if (r < 0) {
                        p->page[level] = -1;
                        return r;
                }
                p->page[level] = (int64_t)page;
                for (int below = level - 1; below >= 0; below--)
                        p->page[below] = -1; /* they hang from another page now */
        }
        *leaf = manifest_hash_in_page(p->bytes[0], chunk_index);
        return 0;
}

static int add_piece(struct path *p, uint64_t off, uint64_t len) {
        if (p->npre == ARRAY_SIZE(p->pre) || !(p->pre[p->npre].bytes = malloc(len)))
                return -ENOMEM;
        p->pre[p->npre].off = off;
        p->pre[p->npre++].len = len;
        return 0;
}

/* The manifest parts chunk_index's leaf needs that the cache lacks (shape:
 * the manifest's layout, known from the sizes alone): with the head, the
 * bytes from the start to the last of them when that is small, else the
 * head and each page apart. The head, when not cached, is pre[0]. */
static int plan_pieces(struct path *p, const struct manifest *shape, bool head_cached, size_t head_len,
                       uint64_t chunk_index) {
        struct { uint64_t off, len; } need[MANIFEST_LEVELS_MAX];
        uint64_t prefix = head_len;
        size_t n = 0;

        for (int level = (int)shape->levels - 2; level >= 0; level--) {
                manifest_page_range(shape, (unsigned)level, manifest_index_at((unsigned)level, chunk_index),
                                    &need[n].off, &need[n].len);
                if (mcache_has(p->mcache, p->root, need[n].off, need[n].len))
                        continue;
                prefix = MAX(prefix, need[n].off + need[n].len);
                n++;
        }
        if (!head_cached && prefix <= MANIFEST_PREFIX_MAX)
                return add_piece(p, 0, prefix);
        if (!head_cached && add_piece(p, 0, head_len) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (add_piece(p, need[i].off, need[i].len) < 0)
                        return -ENOMEM;
        return 0;
}

/* The first window of a fill ([offset, +n) into win) and, side by side with
 * it, the manifest parts its first chunk needs: one round trip to a remote
 * store where there used to be three (head, window, page) in a row. The
 * window goes first: it takes the thread's kept-alive connection, and the
 * small parts, whose answers come while the window's first byte is still
 * on its way, any other. The head, when it was not cached, is copied into
 * head; *head_r says whether it came. */
static int fetch_first(struct backend *b, struct path *p, const struct proto_request *req, uint64_t n, uint8_t *win,
                       uint8_t *head, size_t head_len, int *head_r) {
        struct fetch_part parts[MANIFEST_LEVELS_MAX + 1];
        struct mem_sink sinks[ARRAY_SIZE(parts)];

        sinks[0] = (struct mem_sink){ .buf = win, .cap = n };
        parts[0] = (struct fetch_part){ .key = req->key, .offset = req->offset, .length = n, .sink = mem_write,
                                        .ctx = &sinks[0] };
        for (size_t i = 0; i < p->npre; i++) {
                struct piece *c = &p->pre[i];
                sinks[i + 1] = (struct mem_sink){ .buf = c->bytes, .cap = c->len };
                parts[i + 1] = (struct fetch_part){ .key = p->key, .offset = c->off, .length = c->len,
                                                    .sink = mem_write, .ctx = &sinks[i + 1] };
        }
        backend_fetch_many(b, parts, p->npre + 1);
        for (size_t i = 0; i < p->npre; i++)
                p->pre[i].ok = parts[i + 1].result == 0 && sinks[i + 1].len == p->pre[i].len;
        if (head) {
                /* Not cached: the head is the first piece. */
                *head_r = p->pre[0].ok ? 0 : parts[1].result < 0 ? parts[1].result : -EIO;
                if (*head_r == 0)
                        memcpy(head, p->pre[0].bytes, head_len);
        }
        return parts[0].result < 0 ? parts[0].result : sinks[0].len == n ? 0 : -EIO;
}

static bool chunk_matches(const uint8_t *data, size_t len, const uint8_t leaf[32]) {
        uint8_t got[32];
        EVP_Digest(data, len, got, NULL, EVP_sha256(), NULL);
        return memcmp(got, leaf, 32) == 0;
}

/* Every chunk of the window [at, +n) in win checked before any of it is
 * written; a chunk that does not match is fetched once more (a transient
 * corruption on the wire), then -EBADMSG. */
static int check_window(struct backend *b, struct path *p, const struct proto_request *req, uint8_t *win, uint64_t at,
                        uint64_t n) {
        uint64_t chunk = req->chunk;
        int r;

        for (uint64_t c = at; c < at + n; c += chunk) {
                uint64_t len = MIN(chunk, at + n - c), index = c / chunk;
                const uint8_t *leaf;
                if ((r = leaf_of(b, p, index, &leaf)) < 0) {
                        if (r == -EBADMSG)
                                log_error("object %s: manifest page for chunk %llu does not verify", req->key,
                                          (unsigned long long)index);
                        return r; /* a store error stays one */
                }
                if (chunk_matches(win + (c - at), len, leaf))
                        continue;
                if ((r = fetch_into(b, req->key, c, len, win + (c - at))) < 0)
                        return r;
                if (!chunk_matches(win + (c - at), len, leaf)) {
                        log_error("object %s: chunk %llu (bytes %llu+%llu) does not match its manifest, twice: "
                                  "nothing written", req->key, (unsigned long long)index, (unsigned long long)c,
                                  (unsigned long long)len);
                        return -EBADMSG;
                }
        }
        return 0;
}

int fetch_verified(struct backend *b, struct manifest_cache *mcache, const struct proto_request *req,
                   backend_sink_t sink, void *ctx) {
        uint64_t chunk = req->chunk, end = req->offset + req->length, chunks;
        _cleanup_(path_free) struct path *p = calloc(1, sizeof(*p));
        _cleanup_free_ uint8_t *head = NULL;
        uint8_t *win;
        struct manifest shape;
        int r, head_r = 0;

        if (!p || chunk == 0 || chunk > CHUNK_MAX || req->offset % chunk || (end % chunk && end != req->size) ||
            end > req->size)
                return p ? -EINVAL : -ENOMEM;
        chunks = (req->size + chunk - 1) / chunk;
        size_t head_len = manifest_head_length(chunks);
        stub_manifest_key(req->manifest, p->key);
        p->mcache = mcache;
        memcpy(p->root, req->manifest, 32);
        /* Whole chunks, no more than the fill (whole chunks, or to the end
         * of the object): the thread's buffer. */
        uint64_t window = MIN(MAX((uint64_t)WINDOW, chunk) / chunk * chunk, MAX(req->length, 1));
        if (!head_len || !manifest_shape(&shape, chunks) || !(head = malloc(head_len)) || !(win = fillbuf_get(window)))
                return head_len ? -ENOMEM : -EINVAL;
        bool cached = mcache_get(mcache, req->manifest, 0, head_len, head);
        uint64_t n = MIN(end - req->offset, window);
        r = plan_pieces(p, &shape, cached, head_len, req->offset / chunk);
        if (r == 0)
                r = fetch_first(b, p, req, n, win, cached ? NULL : head, head_len, &head_r);
        if (head_r < 0) {
                /* The store failed, not the manifest: the error as it is. */
                log_error("object %s: cannot fetch its manifest %s: %s", req->key, p->key, strerror(-head_r));
                return head_r == -ENOENT ? -PROTO_ENOMANIFEST : head_r;
        }
        if (r < 0)
                return r;
        r = manifest_parse_head(head, head_len, req->manifest, &p->m);
        if (r == 0 && !cached)
                mcache_put(mcache, req->manifest, 0, head, head_len);
        if (r == 0 && (p->m.chunk != chunk || p->m.size != req->size))
                r = -EBADMSG;
        if (r < 0) {
                log_error("object %s: its manifest %s does not match its root", req->key, p->key);
                return -EBADMSG;
        }
        for (int l = 0; l < MANIFEST_LEVELS_MAX; l++)
                p->page[l] = -1;

        for (uint64_t at = req->offset; at < end; at += n) {
                n = MIN(end - at, window);
                if (at != req->offset && (r = fetch_into(b, req->key, at, n, win)) < 0)
                        return r;
                if ((r = check_window(b, p, req, win, at, n)) < 0 || (r = sink(ctx, win, n)) < 0)
                        return r;
        }
        return 0;
}
