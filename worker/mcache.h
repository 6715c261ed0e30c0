/* SPDX-License-Identifier: MIT */
/*
 * The worker's cache of verified manifest parts (heads and pages), so the
 * fills of one file fetch its manifest once: LRU, bounded in bytes (the
 * policy's "manifest_cache"), shared by the worker's threads.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct manifest_cache;

/* max 0: nothing is cached. */
struct manifest_cache *mcache_new(uint64_t max_bytes);
void mcache_free(struct manifest_cache *c);
/* Copies the part of manifest root at offset (len bytes) into buf: true if
 * it was there. Only parts verified before mcache_put are ever there. */
bool mcache_get(struct manifest_cache *c, const uint8_t root[32], uint64_t offset, size_t len, uint8_t *buf);
/* Whether that part is there (a fill's plan: what it need not fetch). */
bool mcache_has(struct manifest_cache *c, const uint8_t root[32], uint64_t offset, size_t len);
void mcache_put(struct manifest_cache *c, const uint8_t root[32], uint64_t offset, const uint8_t *buf, size_t len);
