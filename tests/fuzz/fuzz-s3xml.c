/* Fuzz target for S3's XML answers as the worker reads them
 * (worker/s3xml.c): the input is a listing. Every record handed on has
 * each field NUL-terminated within its buffer; nothing crashes or leaks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3xml.h"

static int each(void *ctx, const struct s3xml_field *f, size_t n) {
        (void)ctx;
        for (size_t i = 0; i < n; i++)
                if (!f[i].seen || strnlen(f[i].value, f[i].size) >= f[i].size)
                        abort();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char key[64], sz[16], modified[32], truncated[8], token[64];
        struct s3xml_field fields[] = { { "Key", key, sizeof(key), false },
                                        { "Size", sz, sizeof(sz), false },
                                        { "LastModified", modified, sizeof(modified), false } };
        struct s3xml_field top[] = { { "IsTruncated", truncated, sizeof(truncated), false },
                                     { "NextContinuationToken", token, sizeof(token), false } };
        struct s3xml_spec spec = { .root = NULL, .record = "Contents", .fields = fields, .n_fields = 3,
                                   .each = each, .top = top, .n_top = 2 };
        if (s3xml_parse((const char *)data, size, &spec) == 0)
                for (size_t i = 0; i < 2; i++)
                        if (strnlen(top[i].value, top[i].size) >= top[i].size)
                                abort();
        s3xml_root_is((const char *)data, size, "ListBucketResult");
        return 0;
}
