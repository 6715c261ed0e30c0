/* SPDX-License-Identifier: MIT */
/*
 * The catalog's notification group: creates, deletes and renames beneath
 * tenants that keep a catalog (supervisor/catalog.h).
 */
#pragma once

#include "tierd.h"

/* Opens the filesystem's group if one of its tenants keeps a catalog (and
 * it has none yet). */
int catalogwatch_open(struct tiered_fs *fs);
void catalogwatch_close(struct tiered_fs *fs);
