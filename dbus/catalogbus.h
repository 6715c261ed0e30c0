/* SPDX-License-Identifier: MIT */
/*
 * The manager's catalog methods: ImportTenant (a tenant's tree made again
 * from its catalog), CollectGarbage (its store's unreferenced objects
 * deleted) and AuditTenant (stubs, catalog and store compared). Each
 * replies when it is done, and shows its progress as a Job meanwhile; the
 * Start* forms reply at once with the Job, and TaskFinished tells the end.
 */
#pragma once

#include <systemd/sd-bus.h>

int catalog_bus_method_import(sd_bus_message *m, void *userdata, sd_bus_error *error);
int catalog_bus_method_collect(sd_bus_message *m, void *userdata, sd_bus_error *error);
int catalog_bus_method_audit(sd_bus_message *m, void *userdata, sd_bus_error *error);
int catalog_bus_method_start_import(sd_bus_message *m, void *userdata, sd_bus_error *error);
int catalog_bus_method_start_collect(sd_bus_message *m, void *userdata, sd_bus_error *error);
int catalog_bus_method_start_audit(sd_bus_message *m, void *userdata, sd_bus_error *error);
