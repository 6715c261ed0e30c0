/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Writes all n bytes of buf at fd's offset (again after EINTR and short
 * writes): 0, or a negative errno. */
int write_full(int fd, const void *buf, size_t n);

/* Above every fd number open in the process of pidfd (a dead tierd's
 * keeper shares its fd table): where a sweep of its event numbers may
 * stop. fallback when that cannot be read. */
unsigned fd_numbers_in_use(int pidfd, unsigned fallback);

/* fsync of the directory that holds path: a file created or renamed there
 * is an entry of that directory, which a power cut can lose until it is
 * synced, although the file itself was. 0, or a negative errno. */
int fsync_dir_of(const char *path);
