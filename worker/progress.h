/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Each worker thread serves one request at a time; what it is serving is
 * thread-local, so the byte loops deep in a backend can say "still moving"
 * without every interface carrying a context for it. */
void progress_begin(int sock, uint64_t request_id);
/* The request this thread serves, for threads it starts to carry on. */
void progress_current(int *sock, uint64_t *request_id);
/* Tells tierd the current request made progress (at most once a second). */
void progress_report(void);
/* progress_report() as a sha256_fd_range() callback. */
int progress_each(void *ctx, const void *buf, size_t n);
