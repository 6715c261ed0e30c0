/* SPDX-License-Identifier: MIT */
/*
 * Byte range sets: which parts of a stub are populated, which are missing.
 * Ranges are half-open [start, end), kept sorted, merged and non-empty.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct range {
        uint64_t start, end;
};

struct range_set {
        struct range *r;
        size_t n, allocated;
};

void range_set_done(struct range_set *s);
void range_set_clear(struct range_set *s);
int range_set_add(struct range_set *s, uint64_t start, uint64_t end);
/* Adds every range of from (NULL: none) to s. */
int range_set_add_set(struct range_set *s, const struct range_set *from);
bool range_set_covers(const struct range_set *s, uint64_t start, uint64_t end);
bool range_set_overlaps(const struct range_set *s, uint64_t start, uint64_t end);
/* Appends to out the parts of [start, end) that s does not cover. */
int range_set_missing(const struct range_set *s, uint64_t start, uint64_t end, struct range_set *out);
uint64_t range_set_total(const struct range_set *s);
/* Keeps at most max ranges by forgetting the smallest ones, but never the
 * one holding keep (an offset). For a record of what is present, forgetting
 * is always safe: those bytes are fetched again. */
void range_set_limit(struct range_set *s, size_t max, uint64_t keep);

/* Widens [*start, *end) to multiples of chunk and clips it to size. Returns
 * false when nothing is left (start at or beyond size). */
bool range_round_to_chunks(uint64_t *start, uint64_t *end, uint64_t chunk, uint64_t size);
uint64_t round_up_u64(uint64_t v, uint64_t align);
