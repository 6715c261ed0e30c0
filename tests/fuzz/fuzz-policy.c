/* Fuzz target for the policy parser (policy/policy.c): any bytes are
 * refused with a message or parsed; and the tenant editor (SetTenantPolicy)
 * on a valid policy with the input as its patch. */
#include <stdlib.h>
#include <string.h>

#include "policy.h"

static const char base[] = "{\"tenants\": [{\"name\": \"a\", \"subvolume\": \"/t/a\", \"mount\": \"/v/a\","
                           " \"backend\": \"file:///s\"}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct policy *p = NULL;
        char *err = NULL, *text = NULL, *patch = malloc(size + 1);

        if (policy_parse((const char *)data, size, "fuzz", &p, &err) == 0) {
                for (size_t i = 0; i < p->n_tenants; i++)
                        if (!policy_find_tenant(p, p->tenants[i].name))
                                abort();
                policy_free(p);
        }
        free(err); /* a refusal always says why (NULL only for -ENOMEM) */
        err = NULL;
        if (patch) {
                memcpy(patch, data, size);
                patch[size] = 0;
                if (policy_edit_tenant(base, strlen(base), "fuzz", "a", patch, &text, &err) == 0) {
                        /* What the editor writes is a valid policy. */
                        if (policy_parse(text, strlen(text), "fuzz", &p, NULL) != 0)
                                abort();
                        policy_free(p);
                }
        }
        free(text);
        free(err);
        free(patch);
        return 0;
}
