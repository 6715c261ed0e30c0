/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

/* Parses "4096", "512K", "10G" (binary units, K M G T, optional "iB"/"B").
 * Returns 0 or -EINVAL (garbage, empty, negative) / -ERANGE (overflow). */
int size_parse(const char *s, uint64_t *ret);

/* Parses a duration: "30s", "500ms", "30m", "12h", "7d", or a plain number of
 * seconds. Returns microseconds in *ret; -EINVAL or -ERANGE. */
int duration_parse(const char *s, uint64_t *ret);
