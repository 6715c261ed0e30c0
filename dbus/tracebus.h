/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-bus.h>

int trace_bus_method_start(sd_bus_message *m, void *userdata, sd_bus_error *error);
int trace_bus_method_get(sd_bus_message *m, void *userdata, sd_bus_error *error);
