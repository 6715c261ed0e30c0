/* SPDX-License-Identifier: MIT */
/*
 * Which mounts of tierd's mount namespace reach a tenant's subvolume
 * without nosuid and nodev. A container's root writes through its idmapped
 * view as on-disk uid 0: a file it makes setuid, or a device node, is
 * setuid-root or a device on the host wherever the subvolume is reachable
 * through a mount that honours those bits. tierd refuses such a tenant
 * unless its policy says "allow_setuid_mounts": true.
 */
#pragma once

#include "policy.h"

/* The first mount that reaches the subvolume (of its filesystem: its
 * directory, one above, or one inside; or a filesystem stacked on it: an
 * overlay with a layer there, a FUSE mirror of it) and lacks nosuid or
 * nodev, except those whose target is in skip (NULL-terminated; tierd's
 * own views, which it makes nosuid,nodev itself). Returns 1 with
 * *ret_target (malloc'd) for one, 0 for none, a negative errno when the
 * mount table cannot be read. */
int hostmounts_find_setuid(const char *subvolume, char *const *skip, char **ret_target);

/* 0 if the tenant's subvolume is reachable only through nosuid,nodev
 * mounts (or its policy allows otherwise); -EPERM with *error saying which
 * mount and what to do; another negative errno when it cannot tell. */
int hostmounts_check(const struct policy *p, const struct policy_tenant *cfg, char **error);
