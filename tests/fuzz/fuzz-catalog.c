/* Fuzz target for the catalog's format (common/catalog.c): any bytes, read
 * from a store, are refused with a reason or decoded into entries whose
 * paths are valid names beneath a subvolume. Half the time the input gets
 * a correct sha256 trailer, so the entries' checks run, not only the hash. */
#include <errno.h>
#include <openssl/evp.h>
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct catalog_header h;
        const char *why;
        char *obj = NULL;
        size_t len = 0;

        if (size > 0 && (data[0] & 1)) {
                uint8_t sha[32];
                char hex[65];
                EVP_Digest(data + 1, size - 1, sha, NULL, EVP_sha256(), NULL);
                for (int i = 0; i < 32; i++)
                        snprintf(hex + 2 * i, 3, "%02x", sha[i]);
                obj = malloc(size - 1 + 80);
                if (!obj)
                        return 0;
                memcpy(obj, data + 1, size - 1);
                len = size - 1 + (size_t)snprintf(obj + size - 1, 80, "{\"sha256\":\"%s\"}\n", hex);
        } else {
                obj = malloc(size ? size : 1);
                if (!obj)
                        return 0;
                memcpy(obj, data, size);
                len = size;
        }
        if (catalog_decode(obj, len, &h, each, NULL, &why) == -EBADMSG && !*why)
                abort(); /* a refusal always says why */
        free(obj);
        return 0;
}
