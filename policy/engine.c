/* SPDX-License-Identifier: MIT */
#include "engine.h"

#include <stdlib.h>

static uint64_t add_sat(uint64_t a, uint64_t b) {
        return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t fraction_of(uint64_t v, double f) {
        double r = (double)v * f;
        return r >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)r;
}

bool engine_fits(const struct engine_limits *l, uint64_t used, uint64_t need) {
        return !l->quota || add_sat(used, need) <= l->quota;
}

bool engine_over_high(const struct engine_limits *l, uint64_t used) {
        return l->quota && used > fraction_of(l->quota, l->high);
}

static bool releasable(const struct engine_file *f) {
        return (f->state == ENGINE_ARCHIVED || f->state == ENGINE_PARTIAL) && f->local > 0 &&
               !(f->flags & (ENGINE_PINNED | ENGINE_SHARED | ENGINE_GONE | ENGINE_BUSY));
}

/* Does file i go before file j? Least recently used first; then larger;
 * then lower index, so the order is total. */
static bool release_before(const struct engine_file *files, uint32_t i, uint32_t j) {
        const struct engine_file *x = &files[i], *y = &files[j];
        if (x->last_use != y->last_use)
                return x->last_use < y->last_use;
        if (x->local != y->local)
                return x->local > y->local;
        return i < j;
}

static bool archive_before(const struct engine_file *files, uint32_t i, uint32_t j) {
        if (files[i].mtime != files[j].mtime)
                return files[i].mtime < files[j].mtime;
        return i < j;
}

typedef bool (*before_t)(const struct engine_file *files, uint32_t i, uint32_t j);

/* The k first files by before, in a max-heap of k (its root the last of
 * them): one pass over the table, O(n log k), k entries of memory. */
static void heap_sift_down(const struct engine_file *files, before_t before, uint32_t *h, size_t n, size_t i) {
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, m = i;
                if (l < n && before(files, h[m], h[l]))
                        m = l;
                if (r < n && before(files, h[m], h[r]))
                        m = r;
                if (m == i)
                        return;
                uint32_t t = h[i];
                h[i] = h[m];
                h[m] = t;
                i = m;
        }
}

static void heap_sift_up(const struct engine_file *files, before_t before, uint32_t *h, size_t i) {
        while (i > 0 && before(files, h[(i - 1) / 2], h[i])) {
                uint32_t t = h[i];
                h[i] = h[(i - 1) / 2];
                h[(i - 1) / 2] = t;
                i = (i - 1) / 2;
        }
}

static void heap_offer(const struct engine_file *files, before_t before, uint32_t *h, size_t *n, size_t max,
                       uint32_t i) {
        if (*n < max) {
                h[(*n)++] = i;
                heap_sift_up(files, before, h, *n - 1);
        } else if (before(files, i, h[0])) {
                h[0] = i;
                heap_sift_down(files, before, h, *n, 0);
        }
}

/* Empties the heap into out in order, first first. */
static void heap_drain(const struct engine_file *files, before_t before, uint32_t *h, size_t n) {
        for (size_t k = n; k > 1; k--) {
                uint32_t t = h[0];
                h[0] = h[k - 1];
                h[k - 1] = t;
                heap_sift_down(files, before, h, k - 1, 0);
        }
}

size_t engine_plan_release(const struct engine_file *files, size_t n, const struct engine_limits *l, uint64_t used,
                           uint64_t need, size_t skip, uint32_t *out, size_t max, uint64_t *freed) {
        uint64_t target, total = add_sat(used, need), got = 0, can_free = 0;
        size_t k = 0, m = 0;

        *freed = 0;
        if (!l->quota || max == 0)
                return 0;
        /* Down to the low watermark; a fill bigger than that only needs to fit. */
        target = fraction_of(l->quota, l->low);
        if (need > target)
                target = l->quota;
        if (total <= target)
                return 0;
        for (size_t i = 0; i < n; i++)
                if (i != skip && releasable(&files[i])) {
                        can_free = add_sat(can_free, files[i].local);
                        heap_offer(files, release_before, out, &m, max, (uint32_t)i);
                }
        /* A fill that cannot fit even with everything released: release
         * nothing (the reader gets EDQUOT either way). */
        if (need && total - (can_free < total ? can_free : total) > l->quota)
                return 0;
        heap_drain(files, release_before, out, m);
        for (; k < m && total - got > target; k++) {
                got = add_sat(got, files[out[k]].local);
                if (got > total)
                        got = total;
        }
        *freed = got;
        return k;
}

size_t engine_plan_archive(const struct engine_file *files, size_t n, uint32_t now, uint32_t after,
                           uint64_t min_size, uint32_t *out, size_t max) {
        size_t m = 0;
        if (max == 0)
                return 0;
        for (size_t i = 0; i < n; i++) {
                const struct engine_file *f = &files[i];
                if ((f->state == ENGINE_LOCAL || f->state == ENGINE_DIRTY) &&
                    !(f->flags & (ENGINE_GONE | ENGINE_BUSY | ENGINE_ARCHIVING)) && f->size >= min_size && f->size > 0 &&
                    f->mtime <= now && now - f->mtime >= after)
                        heap_offer(files, archive_before, out, &m, max, (uint32_t)i);
        }
        heap_drain(files, archive_before, out, m);
        return m;
}

uint64_t engine_local_bytes(const struct engine_file *files, size_t n) {
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++)
                if (!(files[i].flags & ENGINE_GONE))
                        sum = add_sat(sum, files[i].local);
        return sum;
}
