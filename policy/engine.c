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

/* Least recently used first; then larger; then lower index. */
static int by_use(const void *a, const void *b, void *table) {
        const struct engine_file *files = table;
        uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
        const struct engine_file *x = &files[i], *y = &files[j];
        if (x->last_use != y->last_use)
                return x->last_use < y->last_use ? -1 : 1;
        if (x->local != y->local)
                return x->local > y->local ? -1 : 1;
        return i < j ? -1 : i > j;
}

size_t engine_plan_release(const struct engine_file *files, size_t n, const struct engine_limits *l, uint64_t used,
                           uint64_t need, size_t skip, uint32_t *out, size_t max, uint64_t *freed) {
        uint64_t target, total = add_sat(used, need), got = 0;
        uint32_t *cand;
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
        cand = malloc(sizeof(uint32_t) * (n ? n : 1));
        if (!cand)
                return 0;
        for (size_t i = 0; i < n; i++)
                if (i != skip && releasable(&files[i]))
                        cand[m++] = (uint32_t)i;
        qsort_r(cand, m, sizeof(*cand), by_use, (void *)files);
        for (size_t i = 0; i < m && k < max && total - got > target; i++) {
                out[k++] = cand[i];
                got = add_sat(got, files[cand[i]].local);
                if (got > total)
                        got = total;
        }
        free(cand);
        *freed = got;
        return k;
}

static int by_change(const void *a, const void *b, void *table) {
        const struct engine_file *files = table;
        uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
        if (files[i].mtime != files[j].mtime)
                return files[i].mtime < files[j].mtime ? -1 : 1;
        return i < j ? -1 : i > j;
}

size_t engine_plan_archive(const struct engine_file *files, size_t n, uint32_t now, uint32_t after,
                           uint64_t min_size, uint32_t *out, size_t max) {
        uint32_t *cand = malloc(sizeof(uint32_t) * (n ? n : 1));
        size_t m = 0, k;

        if (!cand)
                return 0;
        for (size_t i = 0; i < n; i++) {
                const struct engine_file *f = &files[i];
                if ((f->state == ENGINE_LOCAL || f->state == ENGINE_DIRTY) && !(f->flags & (ENGINE_GONE | ENGINE_BUSY)) &&
                    f->size >= min_size && f->size > 0 && f->mtime <= now && now - f->mtime >= after)
                        cand[m++] = (uint32_t)i;
        }
        qsort_r(cand, m, sizeof(*cand), by_change, (void *)files);
        k = m < max ? m : max;
        for (size_t i = 0; i < k; i++)
                out[i] = cand[i];
        free(cand);
        return k;
}

uint64_t engine_local_bytes(const struct engine_file *files, size_t n) {
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++)
                if (!(files[i].flags & ENGINE_GONE))
                        sum = add_sat(sum, files[i].local);
        return sum;
}
