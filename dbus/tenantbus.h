/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

#define TIERD_BUS_TENANT_PREFIX "/org/tierd1/tenant"
#define TIERD_BUS_TENANT "org.tierd1.Tenant"

/* Publishes one org.tierd1.Tenant object per tenant, and the object manager. */
int tenant_bus_publish(struct tierd *t);
/* The tenant's object path (malloc'd), or NULL. */
char *tenant_bus_path(const struct tenant *tn);
/* Worker state, pid or restart count changed: PropertiesChanged and the
 * manager's WorkerStarted / WorkerExited signals. */
void tenant_bus_worker_started(struct tenant *tn);
void tenant_bus_worker_exited(struct tenant *tn, pid_t pid, bool killed, int status);
void tenant_bus_worker_changed(struct tenant *tn);
/* A fill was denied for the quota: the manager's QuotaPressure signal. */
void tenant_bus_quota_pressure(struct tenant *tn, uint64_t need);
