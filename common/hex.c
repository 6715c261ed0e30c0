/* SPDX-License-Identifier: MIT */
#include "hex.h"

#include <errno.h>
#include <string.h>

void hex_encode(const uint8_t *in, size_t n, char *out) {
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[in[i] >> 4];
                out[2 * i + 1] = digits[in[i] & 15];
        }
        out[2 * n] = 0;
}

static int hex_value(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int hex_decode(const char *in, uint8_t *out, size_t n) {
        if (strlen(in) != 2 * n)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                int hi = hex_value(in[2 * i]), lo = hex_value(in[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                out[i] = (uint8_t)(hi << 4 | lo);
        }
        return 0;
}
