/* SPDX-License-Identifier: MIT */
/*
 * The manager's ImportTenant: a tenant's tree made again from its catalog.
 */
#pragma once

#include <systemd/sd-bus.h>

int catalog_bus_method_import(sd_bus_message *m, void *userdata, sd_bus_error *error);
