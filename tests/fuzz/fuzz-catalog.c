/* Fuzz target for the catalog's format (common/catalog.c): any bytes, read
 * from a store, are refused with a reason or decoded into entries whose
 * paths are valid names beneath a subvolume. Half the time the input gets
 * a correct hmac-sha256 trailer (the key is the fuzzer's), so the entries'
 * checks run, not only the trailer's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-format.h"

static int each(void *userdata, const struct catalog_entry *e) {
        (void)userdata;
        if (!catalog_path_valid(e->path, e->path_len))
                abort();
        for (size_t i = 0; i < e->n_xattrs; i++)
                if (!catalog_xattr_name_allowed(e->xattrs[i].name))
                        abort();
        return 0;
}

static const struct catalog_key key = { .bytes = "fuzzing key, 32 bytes or longer.", .len = 32 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct catalog_header h;
        const char *why;
        char *obj = NULL;
        size_t len = 0;

        if (size > 0 && (data[0] & 1)) {
                uint8_t mac[32];
                char hex[65];
                if (catalog_mac(&key, data + 1, size - 1, mac) < 0)
                        abort();
                for (int i = 0; i < 32; i++)
                        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
                obj = malloc(size - 1 + 100);
                if (!obj)
                        return 0;
                memcpy(obj, data + 1, size - 1);
                len = size - 1 + (size_t)snprintf(obj + size - 1, 100, "{\"hmac-sha256\":\"%s\"}\n", hex);
        } else {
                obj = malloc(size ? size : 1);
                if (!obj)
                        return 0;
                memcpy(obj, data, size);
                len = size;
        }
        if (catalog_decode(obj, len, &key, &h, each, NULL, &why) == -EBADMSG && !*why)
                abort(); /* a refusal always says why */
        free(obj);
        return 0;
}
