/* SPDX-License-Identifier: MIT */
/*
 * Garbage collection's marks (gcmarks.c): sets of SHA-256 object hashes,
 * and the walk that marks every object a stub names.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t hash_t[32];

struct hashes {
        hash_t *h;
        size_t n, cap;
};

int hashes_add(struct hashes *s, const uint8_t h[32]);
/* Sorted once filled: hashes_has() needs it. */
void hashes_sort(struct hashes *s);
/* from's hashes added to into (from emptied), and into sorted: 0 or
 * -ENOMEM (into sorted still, without some of them). */
int hashes_merge_sort(struct hashes *into, struct hashes *from);
bool hashes_has(const struct hashes *s, const uint8_t h[32]);
/* Kept sorted as it grows. */
int hashes_insert_sorted(struct hashes *s, const uint8_t h[32]);
void hashes_done(struct hashes *s);

/* Marks (in marks, unsorted) every 64-hex-digit run in the stub of every
 * regular file beneath dir_fd (taken, and closed), read without opening a
 * file (common/treewalk.h). 0, -ELOOP past 256 directories deep, or the
 * first error. */
int gc_mark_stubs(int dir_fd, struct hashes *marks);
