/* SPDX-License-Identifier: MIT */
#include "fillbuf.h"

#include <sys/mman.h>

static __thread uint8_t *buf;
static __thread size_t cap;

uint8_t *fillbuf_get(size_t n) {
        if (n <= cap)
                return buf;
        fillbuf_release();
        /* Populated at once: one call, not a fault per page as the bytes
         * come in. */
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p == MAP_FAILED)
                return NULL;
        buf = p;
        cap = n;
        return buf;
}

void fillbuf_release(void) {
        if (buf)
                munmap(buf, cap);
        buf = NULL;
        cap = 0;
}
