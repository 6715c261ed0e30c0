/* SPDX-License-Identifier: MIT */
/*
 * A worker thread's fill buffer: the memory a fill's bytes wait in while
 * their chunks are checked, kept from one fill to the next. A fresh
 * mapping for each fill costs a page fault per 4 KiB twice over (when the
 * bytes come in, and when pwrite reads them), about 4 ms a MiB on a
 * virtual machine whose faults are slow; a thread idle for
 * FILLBUF_IDLE_SEC gives it back (an idle worker holds none).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define FILLBUF_IDLE_SEC 2

/* At least n bytes, this thread's (valid until its next fillbuf_get or
 * fillbuf_release); NULL if it cannot be had. */
uint8_t *fillbuf_get(size_t n);
/* Unmaps this thread's buffer. */
void fillbuf_release(void);
