/* SPDX-License-Identifier: MIT */
#include "size.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

int size_parse(const char *s, uint64_t *ret) {
        static const struct { const char *suffix; unsigned shift; } units[] = {
                { "", 0 }, { "B", 0 },
                { "K", 10 }, { "KiB", 10 }, { "M", 20 }, { "MiB", 20 },
                { "G", 30 }, { "GiB", 30 }, { "T", 40 }, { "TiB", 40 },
        };
        uint64_t v = 0;
        const char *p = s;

        if (!s || !isdigit((unsigned char)*p))
                return -EINVAL;
        for (; isdigit((unsigned char)*p); p++) {
                unsigned d = (unsigned)(*p - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
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
        uint64_t v = 0;
        const char *p = s;

        if (!s || !isdigit((unsigned char)*p))
                return -EINVAL;
        for (; isdigit((unsigned char)*p); p++) {
                unsigned d = (unsigned)(*p - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
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
