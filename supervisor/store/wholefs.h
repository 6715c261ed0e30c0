/* SPDX-License-Identifier: MIT */
/*
 * The root of a whole tiered filesystem, for walks that must see every
 * stub on it (gc's mark). The admin may mount only a directory of it (a
 * btrfs subvolume with subvol=, a bind mount); a btrfs snapshot of a
 * tenant made outside that directory still names objects of the tenant's
 * store. Blocking (reads the mount table, may mount): call it on a thread
 * (offthread.h), never on the event loop.
 */
#pragma once

#include <stdint.h>

/* An O_RDONLY directory fd on the root of the filesystem tierd cloned at
 * start (mnt_id: that mount's id, fs_root_fd: tierd's private clone of it):
 * a dup of fs_root_fd when that mount shows the root already, or a
 * detached read-only mount of the root (btrfs: its top level) made from
 * one of the filesystem's own devices. Negative errno, with *why saying
 * which step failed, when it cannot be had. */
int wholefs_open(uint64_t mnt_id, const char *fstype, int fs_root_fd, const char **why);
