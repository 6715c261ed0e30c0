/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-bus.h>

#include "tierd.h"

#define ERROR_ACCESS_DENIED "org.tierd1.Error.AccessDenied"

/* May the sender of m change files? uid 0, or a member of the policy's
 * admin_group. 0: yes. < 0: no, error filled (AccessDenied, or why the
 * caller is not known). > 0: not known yet, and never waited for (the
 * bus or the user database is being asked): m is put aside and will be
 * dispatched again, so the handler returns 1 at once, having done and
 * replied nothing. So: if ((r = bus_check_admin(t, m, error)) != 0)
 * return r; before anything but reading the arguments. */
int bus_check_admin(struct tierd *t, sd_bus_message *m, sd_bus_error *error);
/* Root only (placing mounts in other processes' namespaces is more than
 * changing files): returns as bus_check_admin does. */
int bus_check_root(sd_bus_message *m, sd_bus_error *error);
/* The bus is closing: lookups in flight are left to end unheard, and
 * what was learnt is forgotten. */
void access_close(void);
