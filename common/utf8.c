/* SPDX-License-Identifier: MIT */
#include "utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the well-formed sequence at s (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF; and no noncharacters, which sd-bus
 * refuses too), or 0. */
static size_t sequence_length(const unsigned char *s, size_t left) {
        size_t n;
        uint32_t cp;

        if (s[0] < 0x80)
                return 1;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                n = 2, cp = s[0] & 0x1f;
        else if (s[0] >= 0xe0 && s[0] <= 0xef)
                n = 3, cp = s[0] & 0x0f;
        else if (s[0] >= 0xf0 && s[0] <= 0xf4)
                n = 4, cp = s[0] & 0x07;
        else
                return 0;
        if (left < n)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff) ||
            (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) == 0xfffe)
                return 0;
        return n;
}

bool utf8_valid(const char *s, size_t len) {
        const unsigned char *p = (const unsigned char *)s;
        for (size_t i = 0; i < len;) {
                size_t n = sequence_length(p + i, len - i);
                if (n == 0)
                        return false;
                i += n;
        }
        return true;
}

char *utf8_escape(const char *s) {
        const unsigned char *p = (const unsigned char *)s;
        size_t len = strlen(s), o = 0;
        char *out = malloc(len * 4 + 1);

        if (!out)
                return NULL;
        for (size_t i = 0; i < len;) {
                size_t n = sequence_length(p + i, len - i);
                if (n == 0 || p[i] < 0x20 || p[i] == 0x7f) {
                        o += (size_t)sprintf(out + o, "\\x%02x", p[i]);
                        i++;
                } else {
                        memcpy(out + o, p + i, n);
                        o += n;
                        i += n;
                }
        }
        out[o] = 0;
        return out;
}
