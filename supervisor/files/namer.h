/* SPDX-License-Identifier: MIT */
/*
 * A file's name beneath its tenant's directory, for what picks files by
 * handle and needs their names: archive_after (a view path to archive),
 * the quota's releases (the globs of "pin", the catalog's limits),
 * hydrations and the usage group's notes (the globs of "pin").
 *
 * On the event loop a name is read from the file's /proc link only: the
 * path the kernel's dentries give, no lookup. A file reached by handle
 * after the kernel dropped its dentry (memory pressure: the cold files
 * archive_after and the quota pick are exactly those) has no path there
 * (the link reads "/"). Finding it (inopath.h: a tree lookup per
 * directory level, as deep as the tenant chose) runs on a thread, a
 * bounded batch at a time; what it finds is kept a short while for the
 * loop to read, and whoever asked is called back.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>

#include "tierd.h"

/* fd's path beneath the tenant's subvolume (malloc'd) in *ret: 0; or
 * -ENOENT: not beneath it, deleted; -EAGAIN: its dentry was dropped and no
 * thread named it lately (namer_ask); -ESTALE: its dentry was dropped and
 * no name can be found (the thread found none lately: moved meanwhile, not
 * the tenant's; or the filesystem keeps no names: xfs, ext4). Loop-safe. */
int usage_name_of_fd(const struct tenant *tn, int fd, char **ret);
/* usage_name_of_fd's answer for a file it has no name of now (its dentry
 * dropped): -EAGAIN or -ESTALE. */
static inline bool usage_name_unknown(int r) { return r == -EAGAIN || r == -ESTALE; }
/* The same, NULL for any error. */
char *usage_rel_of_fd(const struct tenant *tn, int fd);
/* The path beneath the tenant's subvolume of where, a /proc link's text
 * read on a thread (malloc'd) in *ret: 0, -ENOENT (not beneath it,
 * deleted), -ENOMEM. Pure: no system call. */
int usage_rel_of_path(const struct tenant *tn, const char *where, char **ret);
/* fd's file is in the btrfs subvolume the tenant has to itself (its
 * directory is the subvolume's root): the tenant's, whatever its name. */
bool usage_fd_in_own_subvolume(const struct tenant *tn, int fd);

/* A thread can name the tenant's files whose dentries were dropped: its
 * filesystem keeps the names of an inode (btrfs; not xfs or ext4). */
bool namer_can_name(const struct tenant *tn);
/* Names fd's file on a thread (btrfs): 0 (being named: usage_name_of_fd
 * has it once that batch ends); -EBUSY: as many files as a batch holds
 * wait already (ask again later); -EOPNOTSUPP: not btrfs; -errno. */
int namer_ask(struct tenant *tn, int fd);
/* done(userdata) once the batch on its thread now ends (once, however
 * often asked; -EALREADY then): 0; -ENOENT: none runs. */
int namer_after_batch(struct tenant *tn, void (*done)(void *userdata), void *userdata);
/* At the tenant's end: a batch on its thread is left to end, unheard. */
void namer_free(struct tenant *tn);
