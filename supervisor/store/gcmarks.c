/* SPDX-License-Identifier: MIT */
/*
 * Garbage collection's marks: sets of object hashes, and the walk that
 * reads every stub beneath a directory (on gc's own thread) and marks
 * each object it names.
 */
#include "gcmarks.h"

#include <errno.h>
#include <linux/limits.h> /* XATTR_SIZE_MAX: the largest value an xattr can have */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hex.h"
#include "macro.h"
#include "stub.h"
#include "treewalk.h"

#define GC_DEPTH_MAX 256

int hashes_add(struct hashes *s, const uint8_t h[32]) {
        hash_t *p = array_room(s->h, s->n, &s->cap, sizeof(hash_t), 1024);
        if (!p)
                return -ENOMEM;
        s->h = p;
        memcpy(s->h[s->n++], h, 32);
        return 0;
}

static int compare_hash(const void *a, const void *b) { return memcmp(a, b, 32); }

void hashes_sort(struct hashes *s) { qsort(s->h, s->n, sizeof(hash_t), compare_hash); }

int hashes_merge_sort(struct hashes *into, struct hashes *from) {
        int r = 0;
        for (size_t i = 0; i < from->n && r == 0; i++)
                r = hashes_add(into, from->h[i]);
        hashes_done(from);
        hashes_sort(into);
        return r;
}

bool hashes_has(const struct hashes *s, const uint8_t h[32]) {
        return s->n && bsearch(h, s->h, s->n, sizeof(hash_t), compare_hash);
}

/* Kept sorted as it grows: archives arrive during the sweep. */
int hashes_insert_sorted(struct hashes *s, const uint8_t h[32]) {
        size_t lo = 0, hi = s->n;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int c = memcmp(s->h[mid], h, 32);
                if (c == 0)
                        return 0;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        int r = hashes_add(s, h); /* room at the end, then moved into place */
        if (r < 0)
                return r;
        memmove(s->h[lo + 1], s->h[lo], (s->n - 1 - lo) * sizeof(hash_t));
        memcpy(s->h[lo], h, 32);
        return 0;
}

void hashes_done(struct hashes *s) {
        free(s->h);
        *s = (struct hashes){};
}

/* Every 64-hex-digit run in a stub's text, whoever's stub it is and even
 * if it does not parse: a mark too many keeps an object, one too few
 * would lose it. */
static int mark_hex_runs(struct hashes *s, const char *text, size_t len) {
        size_t run = 0;
        for (size_t i = 0; i <= len; i++) {
                if (i < len && text[i] && strchr("0123456789abcdef", text[i])) {
                        run++;
                        continue;
                }
                if (run == 64) {
                        char hex[65];
                        uint8_t h[32];
                        memcpy(hex, text + i - 64, 64);
                        hex[64] = 0;
                        if (hex_decode(hex, h, 32) == 0 && hashes_add(s, h) < 0)
                                return -ENOMEM;
                }
                run = 0;
        }
        return 0;
}

struct marking {
        struct hashes *marks;
        char *xattr; /* XATTR_SIZE_MAX */
};

/* Read through the directory's fd (treewalk_xattr): no open, so no event
 * and no use recorded, and never through a symlink. */
static int mark_stub(void *userdata, int dir_fd, const char *name, const struct stat *st) {
        struct marking *m = userdata;
        if (!S_ISREG(st->st_mode))
                return 0;
        ssize_t n = treewalk_xattr(dir_fd, name, STUB_XATTR, m->xattr, XATTR_SIZE_MAX);
        if (n < 0)
                return n == -ENODATA || n == -ENOENT ? 0 : (int)n;
        return mark_hex_runs(m->marks, m->xattr, (size_t)n);
}

int gc_mark_stubs(int dir_fd, struct hashes *marks) {
        struct marking m = { .marks = marks, .xattr = malloc(XATTR_SIZE_MAX) };
        unsigned long deeper = 0;
        int r = m.xattr ? treewalk(dir_fd, GC_DEPTH_MAX, mark_stub, &m, &deeper) : (close(dir_fd), -ENOMEM);
        free(m.xattr);
        /* A directory passed over may hold the only stub naming an object. */
        return r == 0 && deeper ? -ELOOP : r;
}
