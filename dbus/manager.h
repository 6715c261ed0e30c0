/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

#define TIERD_BUS_NAME "org.tierd1"
#define TIERD_BUS_PATH "/org/tierd1"
#define TIERD_BUS_MANAGER "org.tierd1.Manager"

/* Connects to the system bus, publishes the manager and takes the name. */
int manager_bus_open(struct tierd *t);
/* The PolicyReloaded signal. */
void manager_bus_policy_reloaded(struct tierd *t);
