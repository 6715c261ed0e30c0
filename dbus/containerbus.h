/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-bus.h>

#include "tierd.h"

#define TIERD_BUS_CONTAINER_PREFIX "/org/tierd1/container"
#define TIERD_BUS_CONTAINER "org.tierd1.Container"

/* Publishes one org.tierd1.Container object per attached container. */
int container_bus_publish(struct tierd *t);
/* The container's object path (malloc'd), or NULL. */
char *container_bus_path(const struct container *c);
/* InterfacesAdded and ContainerAttached / InterfacesRemoved and
 * ContainerDetached; worker state changes: PropertiesChanged. */
void container_bus_attached(struct container *c);
void container_bus_detached(struct container *c, const char *reason);
void container_bus_worker_changed(struct container *c);

/* The manager's AttachContainer, DetachContainer and ListContainers. */
int container_bus_method_attach(sd_bus_message *m, void *userdata, sd_bus_error *error);
int container_bus_method_detach(sd_bus_message *m, void *userdata, sd_bus_error *error);
int container_bus_method_list(sd_bus_message *m, void *userdata, sd_bus_error *error);
