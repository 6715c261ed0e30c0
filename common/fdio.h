/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Writes all n bytes of buf at fd's offset (again after EINTR and short
 * writes): 0, or a negative errno. */
int write_full(int fd, const void *buf, size_t n);
