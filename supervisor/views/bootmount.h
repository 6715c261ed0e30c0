/* SPDX-License-Identifier: MIT */
/*
 * The policy's "filesystems": tierd mounts them itself, detached first, so
 * that its marks exist before any process can reach a stub on them.
 */
#pragma once

#include "policy.h"

/* A detached mount of f (fsopen/fsmount), in *ret_mnt_fd: returns 0. If f's
 * device is mounted at its mountpoint already (a predecessor's, or the
 * admin's): returns 1 and *ret_mnt_fd = -1. Negative errno on anything
 * else; *why says what (static). */
int bootmount_open(const struct policy_filesystem *f, int *ret_mnt_fd, const char **why);
/* Moves the detached mount onto its mountpoint: only once it is marked. */
int bootmount_attach(int mnt_fd, const char *mountpoint);
/* tierd stops for good: what it mounted goes, before its groups close. */
void bootmount_remove(const char *mountpoint);
