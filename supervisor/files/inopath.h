/* SPDX-License-Identifier: MIT */
/*
 * The name of a file tierd reached by its handle after the kernel dropped
 * its dentry (memory pressure: the cold files archive_after picks are
 * exactly those). open_by_handle_at() then gives a file with no path (its
 * /proc link reads "/"), and a plain handle names no parent to find it
 * through. btrfs keeps every inode's names in its tree, and
 * BTRFS_IOC_INO_PATHS reads them (CAP_DAC_READ_SEARCH): a tree lookup a
 * directory level, no directory read; not for a file of more than a few
 * links, each of which would cost a walk. Other filesystems keep no
 * names: nothing.
 *
 * A lookup per directory level, as deep as the tenant chose: on threads
 * only (namer.c's batches, tracework.c), never on the event loop.
 */
#pragma once

#define BTRFS_SUBVOL_ROOT_INO 256 /* BTRFS_FIRST_FREE_OBJECTID: every subvolume's root directory */

/* fd's file's path beneath subvol_fd (the tenant's directory, on the
 * same btrfs subvolume), one that leads to the same inode when opened from
 * there (malloc'd), or NULL: another filesystem, no name beneath it, or
 * the file is not there any more. */
char *inode_rel_beneath(int subvol_fd, int fd);

/* The same for a subvolume at subvol_rel in its filesystem, open as
 * subvol_fd: the path of fd's /proc link, or if it reads "/" (its dentry
 * dropped) inode_rel_beneath; NULL if none. */
char *subvol_rel_of_fd(const char *subvol_rel, int subvol_fd, int fd);
/* The path of fd's /proc link only (loop-safe): 0 and *ret (malloc'd);
 * -ENOENT: not beneath subvol_rel, deleted; -EAGAIN: the link reads "/". */
int subvol_rel_of_link(const char *subvol_rel, int fd, char **ret);
/* The same for where, a /proc link's text (pure: no system call). */
int subvol_rel_of_path(const char *subvol_rel, const char *where, char **ret);
