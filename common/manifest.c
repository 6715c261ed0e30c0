/* SPDX-License-Identifier: MIT */
#include "manifest.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

static void put64(uint8_t *p, uint64_t v) {
        for (int i = 0; i < 8; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p) {
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--)
                v = v << 8 | p[i];
        return v;
}

static void put32(uint8_t *p, uint32_t v) {
        for (int i = 0; i < 4; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) {
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void sha256(const void *data, size_t len, uint8_t out[32]) {
        EVP_Digest(data, len, out, NULL, EVP_sha256(), NULL);
}

bool manifest_shape(struct manifest *m, uint64_t chunks) {
        uint64_t n = chunks;
        m->levels = 0;
        for (;;) {
                if (m->levels == MANIFEST_LEVELS_MAX)
                        return false;
                m->count[m->levels++] = n;
                if (n <= MANIFEST_FANOUT)
                        break;
                n = (n + MANIFEST_FANOUT - 1) / MANIFEST_FANOUT;
        }
        /* header | top | ... | level 0 */
        uint64_t off = MANIFEST_HEADER;
        for (int l = (int)m->levels - 1; l >= 0; l--) {
                m->offset[l] = off;
                off += m->count[l] * 32;
        }
        return true;
}

uint64_t manifest_length(const struct manifest *m) {
        uint64_t len = MANIFEST_HEADER;
        for (unsigned l = 0; l < m->levels; l++)
                len += m->count[l] * 32;
        return len;
}

size_t manifest_head_length(uint64_t chunks) {
        struct manifest m;
        if (!manifest_shape(&m, chunks))
                return 0;
        return MANIFEST_HEADER + m.count[m.levels - 1] * 32;
}

static void header(const struct manifest *m, uint8_t h[MANIFEST_HEADER]) {
        memset(h, 0, MANIFEST_HEADER);
        memcpy(h, "TIERDMF1", 8); /* NOLINT(bugprone-not-null-terminated-result): a magic, not a string */
        put32(h + 8, MANIFEST_VERSION);
        put32(h + 12, m->levels);
        put64(h + 16, m->chunk);
        put64(h + 24, m->size);
        put64(h + 32, m->chunks);
}

int manifest_build(const uint8_t (*leaves)[32], uint64_t chunks, uint64_t chunk, uint64_t size, uint8_t **ret,
                   size_t *ret_len, uint8_t root[32]) {
        struct manifest m = { .chunk = chunk, .size = size, .chunks = chunks };

        if (chunks < 2 || chunk == 0 || (size + chunk - 1) / chunk != chunks || !manifest_shape(&m, chunks))
                return -EINVAL;
        size_t len = manifest_length(&m);
        uint8_t *buf = calloc(1, len);
        if (!buf)
                return -ENOMEM;
        header(&m, buf);
        memcpy(buf + m.offset[0], leaves, chunks * 32);
        for (unsigned l = 1; l < m.levels; l++)
                for (uint64_t i = 0; i < m.count[l]; i++) {
                        uint64_t first = i * MANIFEST_FANOUT, n = m.count[l - 1] - first;
                        if (n > MANIFEST_FANOUT)
                                n = MANIFEST_FANOUT;
                        sha256(buf + m.offset[l - 1] + first * 32, n * 32, buf + m.offset[l] + i * 32);
                }
        /* header and top are contiguous: the head */
        sha256(buf, MANIFEST_HEADER + m.count[m.levels - 1] * 32, root);
        *ret = buf;
        *ret_len = len;
        return 0;
}

int manifest_parse_head(const uint8_t *buf, size_t len, const uint8_t root[32], struct manifest *m) {
        uint8_t got[32];

        if (len < MANIFEST_HEADER || memcmp(buf, "TIERDMF1", 8) != 0 || get32(buf + 8) != MANIFEST_VERSION)
                return -EBADMSG;
        *m = (struct manifest){ .chunk = get64(buf + 16), .size = get64(buf + 24), .chunks = get64(buf + 32) };
        for (int i = 40; i < MANIFEST_HEADER; i++)
                if (buf[i])
                        return -EBADMSG;
        if (m->chunks < 2 || m->chunk == 0 || m->chunks > UINT64_MAX / 32 || m->size > UINT64_MAX - m->chunk ||
            (m->size + m->chunk - 1) / m->chunk != m->chunks || !manifest_shape(m, m->chunks) || m->levels != get32(buf + 12))
                return -EBADMSG;
        size_t head = MANIFEST_HEADER + m->count[m->levels - 1] * 32;
        if (len != head)
                return -EBADMSG;
        sha256(buf, head, got);
        if (memcmp(got, root, 32) != 0)
                return -EBADMSG;
        memcpy(m->top, buf + MANIFEST_HEADER, head - MANIFEST_HEADER);
        return 0;
}

void manifest_page_range(const struct manifest *m, unsigned level, uint64_t index, uint64_t *offset, uint64_t *length) {
        uint64_t page = index / MANIFEST_FANOUT, first = page * MANIFEST_FANOUT, n = m->count[level] - first;
        *offset = m->offset[level] + first * 32;
        *length = (n > MANIFEST_FANOUT ? MANIFEST_FANOUT : n) * 32;
}

int manifest_check_page(const struct manifest *m, unsigned level, uint64_t page, const uint8_t *bytes, size_t len,
                        const uint8_t *parent_page) {
        uint64_t off, want;
        uint8_t got[32];

        if (level + 1 >= m->levels)
                return -EINVAL; /* the top is checked with the head */
        manifest_page_range(m, level, page * MANIFEST_FANOUT, &off, &want);
        if (len != want)
                return -EBADMSG;
        sha256(bytes, len, got);
        const uint8_t *expected = level + 2 == m->levels ? m->top + page * 32
                                                         : manifest_hash_in_page(parent_page, page);
        return memcmp(got, expected, 32) == 0 ? 0 : -EBADMSG;
}

uint64_t manifest_index_at(unsigned level, uint64_t chunk_index) {
        while (level--)
                chunk_index /= MANIFEST_FANOUT;
        return chunk_index;
}

const uint8_t *manifest_hash_in_page(const uint8_t *page_bytes, uint64_t index) {
        return page_bytes + (index % MANIFEST_FANOUT) * 32;
}
