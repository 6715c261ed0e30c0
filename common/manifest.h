/* SPDX-License-Identifier: MIT */
/*
 * The chunk manifest: a hash tree over a file's chunks, stored as its own
 * content-addressed object next to the file's, so that a ranged restore
 * verifies every chunk it writes. Read by range: a 4 KiB read of a 50 GiB
 * file fetches the head (header and top level, at most 4 KiB of hashes) and
 * one 4 KiB page per lower level (two for 50 GiB in 1 MiB chunks), not the
 * 1.6 MiB of a flat list.
 *
 *   level 0      SHA-256 of each chunk (the last may be short)
 *   level k+1    SHA-256 of each page (128 hashes, 4 KiB) of level k,
 *                until a level fits one page: the top
 *   object       header (64 bytes) | top | ... | level 1 | level 0
 *   root         SHA-256(header | top): recorded in the stub, so the
 *                manifest is verified from its first byte
 *
 * Header, little endian: "TIERDMF1", version (u32, 1), levels (u32), chunk
 * (u64), file size (u64), chunks (u64), 24 bytes of zeros.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MANIFEST_VERSION 1
#define MANIFEST_HEADER 64
#define MANIFEST_FANOUT 128 /* hashes a page */
#define MANIFEST_PAGE (MANIFEST_FANOUT * 32)
#define MANIFEST_LEVELS_MAX 8

struct manifest {
        uint64_t chunk, size, chunks;
        unsigned levels;                       /* level 0 .. levels - 1 (the top) */
        uint64_t count[MANIFEST_LEVELS_MAX];   /* hashes in each level */
        uint64_t offset[MANIFEST_LEVELS_MAX];  /* where each level starts in the object */
        uint8_t top[MANIFEST_PAGE];            /* the top level's hashes */
};

/* The manifest object for leaves (one SHA-256 a chunk): malloc'd into *ret,
 * its length and its root. -EINVAL for a file of fewer than two chunks
 * (its whole-file hash covers it: no manifest) or absurd sizes. */
int manifest_build(const uint8_t (*leaves)[32], uint64_t chunks, uint64_t chunk, uint64_t size, uint8_t **ret,
                   size_t *ret_len, uint8_t root[32]);
/* The levels' sizes and where each starts in the object, for a file of
 * chunks chunks: known before a byte of it is fetched (so the pages a chunk
 * needs can be fetched with the head). false if absurd. */
bool manifest_shape(struct manifest *m, uint64_t chunks);
/* The whole object's length, for a shaped m. */
uint64_t manifest_length(const struct manifest *m);
/* How many bytes from the start of the object hold the header and the top
 * (one read), for a file of chunks chunks. */
size_t manifest_head_length(uint64_t chunks);
/* Parses and verifies the head (header and top) against root. -EBADMSG: it
 * does not match root, or is not a version-1 manifest of consistent sizes. */
int manifest_parse_head(const uint8_t *buf, size_t len, const uint8_t root[32], struct manifest *m);
/* The byte range of the page of level that holds hash index. */
void manifest_page_range(const struct manifest *m, unsigned level, uint64_t index, uint64_t *offset, uint64_t *length);
/* Verifies a fetched page of level against the hash its parent gives
 * (parent_page: the page of level + 1 that holds it, or NULL when level + 1
 * is the top). -EBADMSG if it does not match. */
int manifest_check_page(const struct manifest *m, unsigned level, uint64_t page, const uint8_t *bytes, size_t len,
                        const uint8_t *parent_page);
/* Which hash of level covers chunk chunk_index. */
uint64_t manifest_index_at(unsigned level, uint64_t chunk_index);
/* The hash at index within its page of level (page bytes as fetched). */
const uint8_t *manifest_hash_in_page(const uint8_t *page_bytes, uint64_t index);
