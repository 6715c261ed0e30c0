/* SPDX-License-Identifier: MIT */
/*
 * A walk of a tree through an fd: tierd's threads (offthread.h) walk
 * tenants with it, tierctl release-groups whole filesystems. It opens
 * directories only, never a file, so no FIFO, device, lease or fanotify
 * group can make it wait. Through a detached clone of one mount (tierd's
 * private mount, tierctl's), which has no submounts, it stays on one
 * filesystem.
 */
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

/* Called for every entry that is not a directory: its directory's fd, its
 * name there and its lstat. Non-zero stops the walk with that value. A stub
 * is read with treewalk_xattr (no open). */
typedef int (*treewalk_visit)(void *userdata, int dir_fd, const char *name, const struct stat *st);

/* Walks beneath dir_fd (taken: closed at the end), at most max_depth
 * directories deep (deeper ones are passed over and counted in *skipped).
 * 0, or the first error of visit or of reading a directory. */
int treewalk(int dir_fd, unsigned max_depth, treewalk_visit visit, void *userdata, unsigned long *skipped);

/* The same walk, for tierctl: visit gets each entry's path (root, then the
 * names joined by '/'), directories on another filesystem than root's are
 * not entered, and an entry that cannot be read (a directory it may not
 * list, a path too long) goes to error, and the walk goes on. */
typedef int (*treewalk_path_visit)(void *userdata, const char *path, const struct stat *st);
typedef void (*treewalk_path_error)(void *userdata, const char *path, int error);
int treewalk_paths(int dir_fd, const char *root, unsigned max_depth, treewalk_path_visit visit,
                   treewalk_path_error error, void *userdata, unsigned long *skipped);

/* lgetxattr of name in dir_fd through /proc/thread-self/fd, which opens nothing. */
ssize_t treewalk_xattr(int dir_fd, const char *name, const char *xattr, void *buf, size_t size);
