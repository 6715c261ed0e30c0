/* SPDX-License-Identifier: MIT */
#include "ranges.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void range_set_done(struct range_set *s) {
        free(s->r);
        *s = (struct range_set){};
}

void range_set_clear(struct range_set *s) { s->n = 0; }

static int range_set_reserve(struct range_set *s, size_t n) {
        if (n <= s->allocated)
                return 0;
        size_t a = s->allocated ? s->allocated * 2 : 4;
        while (a < n)
                a *= 2;
        struct range *r = realloc(s->r, a * sizeof(*r));
        if (!r)
                return -ENOMEM;
        s->r = r;
        s->allocated = a;
        return 0;
}

int range_set_add(struct range_set *s, uint64_t start, uint64_t end) {
        size_t i, j;
        int r;

        if (start >= end)
                return 0;
        /* First range that ends at or after start: it may merge. */
        for (i = 0; i < s->n && s->r[i].end < start; i++)
                ;
        /* Ranges from i up to j-1 touch or overlap [start, end). */
        for (j = i; j < s->n && s->r[j].start <= end; j++) {
                if (s->r[j].start < start)
                        start = s->r[j].start;
                if (s->r[j].end > end)
                        end = s->r[j].end;
        }
        if (j == i) {
                r = range_set_reserve(s, s->n + 1);
                if (r < 0)
                        return r;
                memmove(&s->r[i + 1], &s->r[i], (s->n - i) * sizeof(s->r[0]));
                s->n++;
        } else if (j > i + 1) {
                memmove(&s->r[i + 1], &s->r[j], (s->n - j) * sizeof(s->r[0]));
                s->n -= j - i - 1;
        }
        s->r[i] = (struct range){ start, end };
        return 0;
}

bool range_set_covers(const struct range_set *s, uint64_t start, uint64_t end) {
        if (start >= end)
                return true;
        for (size_t i = 0; i < s->n; i++)
                if (s->r[i].start <= start && s->r[i].end >= end)
                        return true;
        return false;
}

bool range_set_overlaps(const struct range_set *s, uint64_t start, uint64_t end) {
        for (size_t i = 0; i < s->n; i++)
                if (s->r[i].start < end && s->r[i].end > start)
                        return true;
        return false;
}

int range_set_missing(const struct range_set *s, uint64_t start, uint64_t end, struct range_set *out) {
        uint64_t pos = start;
        int r;

        for (size_t i = 0; i < s->n && pos < end; i++) {
                if (s->r[i].end <= pos)
                        continue;
                if (s->r[i].start >= end)
                        break;
                if (s->r[i].start > pos) {
                        r = range_set_add(out, pos, s->r[i].start);
                        if (r < 0)
                                return r;
                }
                pos = s->r[i].end;
        }
        if (pos < end)
                return range_set_add(out, pos, end);
        return 0;
}

int range_set_add_set(struct range_set *s, const struct range_set *from) {
        for (size_t i = 0; from && i < from->n; i++) {
                int r = range_set_add(s, from->r[i].start, from->r[i].end);
                if (r < 0)
                        return r;
        }
        return 0;
}

uint64_t range_set_total(const struct range_set *s) {
        uint64_t t = 0;
        for (size_t i = 0; i < s->n; i++)
                t += s->r[i].end - s->r[i].start;
        return t;
}

void range_set_limit(struct range_set *s, size_t max, uint64_t keep) {
        while (s->n > max && s->n > 1) {
                size_t victim = s->n;
                for (size_t i = 0; i < s->n; i++) {
                        if (s->r[i].start <= keep && keep < s->r[i].end)
                                continue;
                        if (victim == s->n || s->r[i].end - s->r[i].start < s->r[victim].end - s->r[victim].start)
                                victim = i;
                }
                if (victim == s->n)
                        return;
                memmove(&s->r[victim], &s->r[victim + 1], (s->n - victim - 1) * sizeof(s->r[0]));
                s->n--;
        }
}

uint64_t round_up_u64(uint64_t v, uint64_t align) {
        if (align == 0)
                return v;
        uint64_t rem = v % align;
        if (rem == 0)
                return v;
        if (v > UINT64_MAX - (align - rem))
                return UINT64_MAX;
        return v + (align - rem);
}

bool range_round_to_chunks(uint64_t *start, uint64_t *end, uint64_t chunk, uint64_t size) {
        if (chunk == 0)
                chunk = 1;
        if (*start >= size)
                return false;
        *start -= *start % chunk;
        *end = round_up_u64(*end, chunk);
        if (*end > size)
                *end = size;
        return *start < *end;
}
