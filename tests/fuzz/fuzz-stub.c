/* Fuzz target for the stub codec (security.tierd, common/stub.c): any
 * bytes are refused or parsed, and what parses formats back to text that
 * parses to the same stub. */
#include <stdlib.h>
#include <string.h>

#include "stub.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct stub s = {}, again = {};
        const char *err = NULL;
        char text[8192];

        if (stub_parse((const char *)data, size, &s, &err) == 0) {
                int n = stub_format(&s, text, sizeof(text));
                if (n < 0 || stub_parse(text, (size_t)n, &again, &err) != 0 || again.size != s.size ||
                    again.state != s.state || strcmp(again.key, s.key) != 0 || again.populated.n != s.populated.n ||
                    memcmp(again.sha256, s.sha256, 32) != 0)
                        abort(); /* a stub tierd writes must read back the same */
                stub_done(&again);
        }
        stub_done(&s);
        return 0;
}
