/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Is s (len bytes) well-formed UTF-8 without noncharacters? D-Bus strings
 * must be. */
bool utf8_valid(const char *s, size_t len);
/* A copy of s that is valid UTF-8: each byte that is not part of a
 * well-formed sequence, and each control character, becomes "\xNN", so a
 * file name that is not UTF-8 can still be shown in a message. malloc'd. */
char *utf8_escape(const char *s);
