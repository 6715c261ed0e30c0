/* Fuzz target for what AWS's credential services answer, as tierd reads
 * it (supervisor/workers/awsanswer.c): the input is given both as STS's
 * XML and as a metadata endpoint's JSON. Whatever is taken has every key
 * NUL-terminated within its buffer; nothing crashes or leaks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "awsanswer.h"

static void check(const struct proto_credentials *c) {
        if (strnlen(c->access_key, sizeof(c->access_key)) >= sizeof(c->access_key) ||
            strnlen(c->secret_key, sizeof(c->secret_key)) >= sizeof(c->secret_key) ||
            strnlen(c->session_token, sizeof(c->session_token)) >= sizeof(c->session_token) || !c->access_key[0])
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct proto_credentials c;
        int64_t expires;
        char why[512];
        const char *err = NULL;
        if (aws_sts_credentials((const char *)data, size, &c, &expires, why, sizeof(why)) == 0)
                check(&c);
        if (strnlen(why, sizeof(why)) >= sizeof(why))
                abort();
        if (aws_json_credentials((const char *)data, size, &c, &expires, &err) == 0)
                check(&c);
        return 0;
}
