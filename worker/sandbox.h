/* SPDX-License-Identifier: MIT */
#pragma once

#include "proto.h"

/* Locks this worker down before it serves its first request: its own uid,
 * no capabilities, no_new_privs, Landlock (no file but its store and CA
 * bundle, TCP connect to its backend's port only, no signals out), and a
 * seccomp allowlist whose violations are reported to tierd on control_fd.
 * Must run before any thread starts (Landlock binds the calling thread). */
int sandbox_apply(const struct proto_config *cfg, int store_fd, int control_fd);
