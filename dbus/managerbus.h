/* SPDX-License-Identifier: MIT */
#pragma once

#include "face.h"
#include "tierd.h"

#define TIERD_BUS_NAME "org.tierd1"
#define TIERD_BUS_PATH "/org/tierd1"
#define TIERD_BUS_MANAGER "org.tierd1.Manager"

/* dbus/ as tierd's face (face.h). Its open connects to the system bus,
 * publishes the manager, tenants, containers and jobs, takes the name and
 * sets t->face; its close flushes and drops the connection. */
extern const struct tierd_face bus_face;
