/* Fuzz target for the OCI hook's input (cli/ocihook.c): the input is the
 * container state, a NUL, then the bundle's config.json; anything is
 * refused with a reason or parsed into a request whose fields are sane. */
#include <stdlib.h>
#include <string.h>

#include "ocihook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct oci_hook h = {};
        const char *why = NULL;
        const uint8_t *nul = memchr(data, 0, size);
        size_t state_len = nul ? (size_t)(nul - data) : size;
        const char *config = nul ? (const char *)nul + 1 : "";
        size_t config_len = nul ? size - state_len - 1 : 0;

        if (oci_hook_parse_state(&h, (const char *)data, state_len, &why) == 0 &&
            oci_hook_parse_config(&h, config, config_len, NULL, &why) == 0 && h.ours) {
                if (!h.tenant || !h.stage || !h.id)
                        abort();
                if (strcmp(h.stage, "createRuntime") == 0 &&
                    (!h.rootfs || h.rootfs[0] != '/' || h.pid <= 1 || !h.mount_path || !h.k8s_namespace))
                        abort();
        }
        oci_hook_done(&h);
        return 0;
}
