/* SPDX-License-Identifier: MIT */
#include "reload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "secrets.h"
#include "workers.h"

int tierd_reload_policy(struct tierd *t, char **error) {
        struct policy *np = NULL, *old = t->policy;
        const char *why = NULL;
        int r;

        *error = NULL;
        r = policy_load_file(t->policy_path, &np, error);
        if (r < 0) {
                if (!*error && asprintf(error, "%s: %s", t->policy_path, strerror(-r)) < 0)
                        *error = NULL;
                return -EINVAL;
        }
        if (!policy_same_places(old, np, &why)) {
                policy_free(np);
                if (asprintf(error, "%s: %s: restart tierd to apply it (SIGTERM hands over without a gap)",
                             t->policy_path, why) < 0)
                        *error = NULL;
                return -EXDEV;
        }
        t->policy = np;
        for (size_t i = 0; i < t->n_tenants; i++) {
                struct tenant *tn = &t->tenants[i];
                bool restart = !policy_tenant_worker_equal(tn->cfg, &np->tenants[i]);
                tn->cfg = &np->tenants[i];
                /* Credentials and header files may be named anew. */
                if (restart && (r = tenant_secrets_load(tn)) < 0)
                        log_error_errno(r, "tenant %s: keeping the credentials it had: %m", tn->cfg->name);
                if (restart)
                        worker_restart_planned(&tn->worker);
        }
        policy_free(old);
        log_info("policy %s reloaded", t->policy_path);
        return 0;
}
