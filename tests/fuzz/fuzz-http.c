/* Fuzz target for what tierd's worker believes of a store's answer
 * (worker/http-check.c): header lines, the shape of a ranged answer and
 * (S3's XML: fuzz-s3xml). Input: 8 bytes of requested start, 8 of length,
 * 2 of status, then header lines separated by '\n'. An answer taken as
 * right must name the range asked. */
#include <stdlib.h>
#include <string.h>

#include "http-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct http_meta m = {};
        uint64_t start, len;
        uint16_t status;

        if (size < 18)
                return 0;
        memcpy(&start, data, 8);
        memcpy(&len, data + 8, 8);
        memcpy(&status, data + 16, 2);
        start %= 1ull << 40;
        len = len % (1ull << 30) + 1;
        for (size_t i = 18; i < size;) {
                const uint8_t *nl = memchr(data + i, '\n', size - i);
                size_t n = nl ? (size_t)(nl - (data + i)) : size - i;
                http_meta_header(&m, (const char *)data + i, n);
                i += n + 1;
        }
        if (http_range_answer_ok(status % 600, &m, start, start + len)) {
                bool ranged = m.have_range && m.range_start == start && m.range_end == start + len;
                bool whole = start == 0 && m.have_length && m.content_length == len;
                if (!ranged && !whole)
                        abort();
        }
        return 0;
}
