/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

/* Reads the tenant's credentials file and header files. */
int tenant_secrets_load(struct tenant *tn);
/* Re-reads credentials files when they change (rotated keys apply without a
 * restart) and hands them to the workers. */
int secrets_watch_start(struct tierd *t);
