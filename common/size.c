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

struct unit {
        const char *suffix;
        uint64_t times;
};

/* Digits, then one of the units (n of them) by its exact suffix. */
static int parse_with_unit(const char *s, const struct unit *units, size_t n, uint64_t *ret) {
        uint64_t v;
        const char *p = s;
        int r = parse_decimal(&p, &v);

        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (strcmp(p, units[i].suffix) != 0)
                        continue;
                if (v > UINT64_MAX / units[i].times)
                        return -ERANGE;
                *ret = v * units[i].times;
                return 0;
        }
        return -EINVAL;
}

int size_parse(const char *s, uint64_t *ret) {
        static const struct unit units[] = {
                { "", 1 }, { "B", 1 },
                { "K", 1ull << 10 }, { "KiB", 1ull << 10 }, { "M", 1ull << 20 }, { "MiB", 1ull << 20 },
                { "G", 1ull << 30 }, { "GiB", 1ull << 30 }, { "T", 1ull << 40 }, { "TiB", 1ull << 40 },
        };
        return parse_with_unit(s, units, sizeof(units) / sizeof(units[0]), ret);
}

int duration_parse(const char *s, uint64_t *ret) {
        static const struct unit units[] = {
                { "", 1000000ull }, { "ms", 1000ull }, { "s", 1000000ull }, { "m", 60000000ull },
                { "h", 3600000000ull }, { "d", 86400000000ull },
        };
        return parse_with_unit(s, units, sizeof(units) / sizeof(units[0]), ret);
}
