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

#include "tierd.h"

/* fd's path beneath the tenant's subvolume (malloc'd) in *ret: 0; or
 * -ENOENT (not beneath it, deleted) or -EAGAIN (its dentry was dropped and
 * no thread has named it lately: namer_ask). Loop-safe. */
int usage_name_of_fd(const struct tenant *tn, int fd, char **ret);
/* The same, NULL for either error. */
char *usage_rel_of_fd(const struct tenant *tn, int fd);

/* Names fd's file on a thread: 0, and done(userdata) (if given) is called
 * on the loop once that was tried, whatever came of it; -EBUSY: as many
 * files as a batch holds wait already (ask again later), -errno. */
int namer_ask(struct tenant *tn, int fd, void (*done)(void *userdata), void *userdata);
/* At the tenant's end: a batch on its thread is left to end, unheard. */
void namer_free(struct tenant *tn);

/* Threads only (a tree lookup per directory level for a file whose dentry
 * was dropped): fd's path beneath a subvolume at subvol_rel in its
 * filesystem, open as subvol_fd, or NULL. */
char *subvol_rel_of_fd(const char *subvol_rel, int subvol_fd, int fd);
