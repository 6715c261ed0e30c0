/* SPDX-License-Identifier: MIT */
/* What a new worker is given (supervisor/workers/workerspawn.c). */
#pragma once

#include <sys/types.h>

#include "proto.h"
#include "tierd.h"

/* In the child, between fork and exec: only async-signal-safe calls. */
void __attribute__((noreturn)) worker_exec(const char *path, int sock, pid_t parent, const char *vg_log);
/* The tenant's settings, secrets and store addresses, as the worker's
 * first message. */
void worker_config(struct tenant *tn, struct proto_config *cfg);
