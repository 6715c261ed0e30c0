/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Writes 2*n lowercase hex digits and a NUL to out (2*n+1 bytes). */
void hex_encode(const uint8_t *in, size_t n, char *out);
/* Decodes exactly 2*n hex digits (a NUL must follow) into out; -EINVAL else. */
int hex_decode(const char *in, uint8_t *out, size_t n);
