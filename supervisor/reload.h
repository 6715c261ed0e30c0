/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

/* Reads the policy file again and applies it: fill settings at once, worker
 * settings by a planned restart of that tenant's worker (in-flight work is
 * re-sent; readers notice nothing). -EINVAL: the file is not a valid policy;
 * -EXDEV: it moves or adds tenants, which needs a restart of tierd. Either
 * way nothing changes and *error (malloc'd) says why. */
int tierd_reload_policy(struct tierd *t, char **error);
