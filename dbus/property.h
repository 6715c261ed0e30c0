/* SPDX-License-Identifier: MIT */
/* A property getter's signature, as sd-bus calls it. */
#pragma once

#include <systemd/sd-bus.h>

#define GETTER(fn) \
        static int fn(sd_bus *bus, const char *path, const char *interface, const char *property, \
                      sd_bus_message *reply, void *userdata, sd_bus_error *error)
