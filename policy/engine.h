/* SPDX-License-Identifier: MIT */
/*
 * The policy engine's decisions: which files to release when a tenant is
 * over its quota, and which to archive in the background. Pure: it sees a
 * table of files (kept by supervisor/files/usage.c) and returns choices, so every
 * decision is unit-testable over synthetic tables.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum engine_state {
        ENGINE_LOCAL,    /* never archived: only local */
        ENGINE_ARCHIVED, /* whole locally, with a verified copy in the store */
        ENGINE_PARTIAL,  /* some ranges local */
        ENGINE_RELEASED, /* nothing local */
        ENGINE_DIRTY,    /* changed since archived */
};

enum {
        ENGINE_PINNED = 1 << 0,  /* the pin mark or a pin glob: never released */
        ENGINE_SHARED = 1 << 1,  /* its extents are shared (snapshot, reflink): releasing frees nothing */
        ENGINE_SUSPECT = 1 << 2, /* a write may have been missed (queue overflow): check before release */
        ENGINE_GONE = 1 << 3,    /* deleted: a free slot */
        ENGINE_BUSY = 1 << 4,    /* could not be released or archived when last tried: not for a while */
        ENGINE_ARCHIVING = 1 << 5, /* a background archive of it is in flight */
};

/* 32 bytes a file: a million files fit in 32 MiB. */
struct engine_file {
        uint64_t size;     /* content size */
        uint64_t local;    /* bytes allocated locally */
        uint32_t last_use; /* seconds (CLOCK_REALTIME): the last open */
        uint32_t mtime;    /* seconds: the last change */
        uint8_t state;     /* enum engine_state */
        uint8_t flags;
};

struct engine_limits {
        uint64_t quota;      /* 0: none */
        double high, low;    /* watermarks, fractions of quota */
};

/* May a fill of need bytes go ahead with used bytes local? Also true when
 * there is no quota. */
bool engine_fits(const struct engine_limits *l, uint64_t used, uint64_t need);
/* Is the tenant above its high watermark (release now)? */
bool engine_over_high(const struct engine_limits *l, uint64_t used);

/* The files to release, least recently used first, to bring used + need to
 * the low watermark (or, if need alone is above it, to the quota):
 * archived or partial, unpinned, unshared, clean, holding local bytes; never
 * index skip (the file being filled; SIZE_MAX for none). Writes up to max
 * indices into out and the bytes they free into *freed; returns how many.
 * Ties: the larger file first, then the lower index, so the order is total.
 * A fill (need > 0) that could not fit even with every candidate released
 * gets nothing: the cache is not emptied for a reader who gets EDQUOT
 * anyway. One pass, O(n log max) time, no memory beyond out. */
size_t engine_plan_release(const struct engine_file *files, size_t n, const struct engine_limits *l, uint64_t used,
                           uint64_t need, size_t skip, uint32_t *out, size_t max, uint64_t *freed);

/* Files to archive now: never archived or dirty, at least min_size bytes,
 * unchanged for after seconds, not busy or in flight; oldest change first.
 * Returns how many (up to max) written into out. */
size_t engine_plan_archive(const struct engine_file *files, size_t n, uint32_t now, uint32_t after,
                           uint64_t min_size, uint32_t *out, size_t max);

/* Bytes held locally by the table (saturating). */
uint64_t engine_local_bytes(const struct engine_file *files, size_t n);
