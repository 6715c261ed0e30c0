/* SPDX-License-Identifier: MIT */
/*
 * Shared by the file verbs only: fileops.c (archive, restore, pin, status),
 * release.c and fileref.c (finding the file a caller named).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "fileops.h"

/* Writes the message for the caller and returns r. */
int file_job_say(char *message, size_t size, int r, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Opens f (flags: O_RDONLY or O_RDWR) where the call found it: -ENOENT
 * when its name leads elsewhere now; message says why. */
int file_ref_open(const struct file_ref *f, int flags, int *ret_fd, char *message, size_t size);
/* rel opened beneath subvol_fd (flags: O_PATH, O_RDONLY or O_RDWR): no
 * symlink, '..' or mount leads outside; cached: walked from the kernel's
 * lookup cache only (a level not in it is -EAGAIN), as the event loop
 * walks; uncached only on a thread (pathwarm.c). An fd, or -1 and errno. */
int file_open_beneath(int subvol_fd, const char *rel, int flags, bool cached);
/* 0: f's path is in the kernel's lookup cache; -EAGAIN: a level is not;
 * another -errno: what opening it would say. */
int file_ref_cached(const struct file_ref *f);
