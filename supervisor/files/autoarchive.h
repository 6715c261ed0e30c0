/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

/* Background archive ("archive_after"): files unchanged for that long are
 * archived, oldest change first, within "archive_rate" bytes a second, so
 * that release is instant when pressure comes. Started for tenants with
 * archive_after; follows policy reloads. */
void autoarchive_update(struct tenant *tn);
void autoarchive_stop(struct tenant *tn);
