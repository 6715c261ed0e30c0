/* SPDX-License-Identifier: MIT */
#include "size.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

/* Leading decimal digits of *p (at least one), without overflow; *p is left
 * at the unit that follows. */
static int parse_decimal(const char **p, uint64_t *ret) {
        uint64_t v = 0;
        const char *s = *p;

        if (!s || !isdigit((unsigned char)*s))
                return -EINVAL;
        for (; isdigit((unsigned char)*s); s++) {
                unsigned d = (unsigned)(*s - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *p = s;
        *ret = v;
        return 0;
}

int size_parse(const char *s, uint64_t *ret) {
        static const struct { const char *suffix; unsigned shift; } units[] = {
                { "", 0 }, { "B", 0 },
                { "K", 10 }, { "KiB", 10 }, { "M", 20 }, { "MiB", 20 },
                { "G", 30 }, { "GiB", 30 }, { "T", 40 }, { "TiB", 40 },
        };
        uint64_t v;
        const char *p = s;
        int r = parse_decimal(&p, &v);

        if (r < 0)
                return r;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                if (strcmp(p, units[i].suffix) != 0)
                        continue;
                if (units[i].shift && v > (UINT64_MAX >> units[i].shift))
                        return -ERANGE;
                *ret = v << units[i].shift;
                return 0;
        }
        return -EINVAL;
}

int duration_parse(const char *s, uint64_t *ret) {
        static const struct { const char *suffix; uint64_t usec; } units[] = {
                { "", 1000000ull }, { "ms", 1000ull }, { "s", 1000000ull }, { "m", 60000000ull },
                { "h", 3600000000ull }, { "d", 86400000000ull },
        };
        uint64_t v;
        const char *p = s;
        int r = parse_decimal(&p, &v);

        if (r < 0)
                return r;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                if (strcmp(p, units[i].suffix) != 0)
                        continue;
                if (v > UINT64_MAX / units[i].usec)
                        return -ERANGE;
                *ret = v * units[i].usec;
                return 0;
        }
        return -EINVAL;
}
