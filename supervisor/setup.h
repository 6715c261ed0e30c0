/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

/* Mounts and marks the policy's filesystems, opens each tenant's store and
 * subvolume and starts its worker, adopts a predecessor's containers and
 * scans the file tables of tenants with a quota or background archive.
 * Nothing is attached to events yet: that is the caller's next step. */
int tierd_setup(struct tierd *t);
