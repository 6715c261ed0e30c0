/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-bus.h>

#include "tierd.h"

#define ERROR_ACCESS_DENIED "org.tierd1.Error.AccessDenied"

/* May the sender of m change files? uid 0, or a member of the policy's
 * admin_group. Fills error (AccessDenied) and returns < 0 if not. */
int bus_check_admin(struct tierd *t, sd_bus_message *m, sd_bus_error *error);
/* Root only: placing mounts in other processes' namespaces (containers)
 * is more than changing files. */
int bus_check_root(sd_bus_message *m, sd_bus_error *error);
