/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

/* Reads the policy file again and applies it: fill settings at once, worker
 * settings by a planned restart of that tenant's worker (in-flight work is
 * re-sent; readers notice nothing). -EINVAL: the file is not a valid policy;
 * -EXDEV: it moves or adds tenants, which needs a restart of tierd. Either
 * way nothing changes and *error (malloc'd) says why. */
int tierd_reload_policy(struct tierd *t, char **error);
/* The same, unless the file's bytes are those last applied: 1 applied, 0
 * unchanged. */
int tierd_reload_policy_if_changed(struct tierd *t, char **error);
/* Notes the file's bytes as applied (at start). */
void tierd_policy_remember(struct tierd *t);

/* SetTenantPolicy: sets the tenant's keys named in patch (a JSON object;
 * null removes a key) in the policy file, then applies the file as a reload
 * does. Nothing is written or changed unless the result is a valid policy
 * that needs no restart. -ENOENT no such tenant, -EINVAL bad settings,
 * -EXDEV needs a restart, -EROFS the file cannot be written (a ConfigMap);
 * *error (malloc'd) says why. */
int tierd_set_tenant_policy(struct tierd *t, const char *tenant, const char *patch, char **error);
