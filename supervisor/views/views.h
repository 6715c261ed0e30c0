/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

/* Bind-mounts the tenant's subvolume at its "mount" (the host view),
 * creating the mount point. Called only once the filesystem is marked. */
int view_place(struct tenant *tn);
void view_remove(struct tenant *tn);
/* mkdir -p, the last directory with mode. */
int mkdir_parents(const char *path, mode_t mode);
/* Is something mounted at path (in /proc/self/mountinfo)? */
bool path_is_mountpoint(const char *path);
