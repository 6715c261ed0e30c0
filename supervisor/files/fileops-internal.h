/* SPDX-License-Identifier: MIT */
/*
 * Shared by the file verbs only: fileops.c (archive, restore, pin, status),
 * release.c and fileref.c (finding the file a caller named).
 */
#pragma once

#include <stddef.h>

#include "fileops.h"

/* Writes the message for the caller and returns r. */
int file_job_say(char *message, size_t size, int r, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Opens f (flags: O_RDONLY or O_RDWR) where the call found it: -ENOENT
 * when its name leads elsewhere now; message says why. */
int file_ref_open(const struct file_ref *f, int flags, int *ret_fd, char *message, size_t size);
/* 0: f's path is in the kernel's lookup cache; -EAGAIN: a level is not;
 * another -errno: what opening it would say. */
int file_ref_cached(const struct file_ref *f);
