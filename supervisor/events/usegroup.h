/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

/* The use group of a filesystem with tracked tenants (usage.c): a
 * FAN_REPORT_FID notification group, no fd per event, for the opens that
 * give each file its last use, the writes that change its local bytes and
 * the deletes that remove it. Kept in the fd store across restarts. */
int usegroup_open(struct tiered_fs *fs);
void usegroup_close(struct tiered_fs *fs);
