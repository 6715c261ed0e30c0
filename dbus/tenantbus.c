/* SPDX-License-Identifier: MIT */
/*
 * org.tierd1.Tenant, one object per tenant (dbus/org.tierd1.Tenant.xml).
 * Worker state changes are signalled; counters are read on demand, so a
 * busy node does not flood the system bus.
 */
#include "tenantbus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fileops.h"
#include "tally.h"
#include "log.h"
#include "macro.h"
#include "property.h"
#include "managerbus.h"
#include "usage.h"
#include "workers.h"

char *tenant_bus_path(const struct tenant *tn) {
        char *path = NULL;
        return sd_bus_path_encode(TIERD_BUS_TENANT_PREFIX, tn->cfg->name, &path) < 0 ? NULL : path;
}

static int tenant_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                       sd_bus_error *error) {
        struct tierd *t = userdata;
        _cleanup_free_ char *name = NULL;
        struct tenant *tn;
        (void)bus;
        (void)interface;
        (void)error;

        if (sd_bus_path_decode(path, TIERD_BUS_TENANT_PREFIX, &name) <= 0 || !(tn = tierd_find_tenant(t, name)))
                return 0;
        *found = tn;
        return 1;
}

static int tenant_enumerate(sd_bus *bus, const char *prefix, void *userdata, char ***nodes, sd_bus_error *error) {
        struct tierd *t = userdata;
        char **v = NULL;
        size_t n = 0;
        (void)bus, (void)prefix, (void)error;

        for (size_t i = 0; i < t->n_tenants; i++)
                if (bus_nodes_add(&v, &n, tenant_bus_path(&t->tenants[i])) < 0)
                        return -ENOMEM;
        return bus_nodes_done(v, nodes);
}

GETTER(get_config) {
        const struct tenant *tn = userdata;
        const char *v = strcmp(property, "Name") == 0        ? tn->cfg->name
                        : strcmp(property, "Subvolume") == 0 ? tn->cfg->subvolume
                        : strcmp(property, "Mount") == 0     ? tn->cfg->mount
                                                             : tn->cfg->backend; /* credentials: never */
        (void)bus, (void)path, (void)interface, (void)error;
        return sd_bus_message_append(reply, "s", v);
}

/* Counted off the loop (tally.h): O(1) here. */
GETTER(get_usage) {
        struct tenant *tn = userdata;
        static const char *const names[] = { [USAGE_RESIDENT] = "resident", [USAGE_ARCHIVED] = "archived",
                                             [USAGE_PARTIAL] = "partial", [USAGE_RELEASED] = "released",
                                             [USAGE_DIRTY] = "dirty" };
        const struct tenant_usage *u = tally_read(tn);
        int r;
        (void)bus, (void)path, (void)interface, (void)error;

        if (strcmp(property, "ResidentBytes") == 0)
                return sd_bus_message_append(reply, "t", u->resident_bytes);
        if (strcmp(property, "ReleasedBytes") == 0)
                return sd_bus_message_append(reply, "t", u->released_bytes);
        if (strcmp(property, "ArchivedBytes") == 0)
                return sd_bus_message_append(reply, "t", u->archived_bytes);
        r = sd_bus_message_open_container(reply, 'a', "{st}");
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(names); i++)
                r = sd_bus_message_append(reply, "{st}", names[i], u->files[i]);
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

GETTER(get_quota) {
        const struct tenant *tn = userdata;
        (void)bus, (void)path, (void)interface, (void)error;
        if (strcmp(property, "Quota") == 0)
                return sd_bus_message_append(reply, "t", tn->cfg->quota);
        return sd_bus_message_append(reply, "t", usage_used(tn));
}

GETTER(get_last_error) {
        const struct tenant *tn = userdata;
        (void)bus, (void)path, (void)interface, (void)property, (void)error;
        return sd_bus_message_append(reply, "s", tn->counters.last_error);
}

#define COUNTER(name, field) BUS_U64(name, struct tenant, counters.field, 0)

static const sd_bus_vtable tenant_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Name", "s", get_config, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Subvolume", "s", get_config, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Mount", "s", get_config, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Backend", "s", get_config, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        BUS_WORKER("WorkerState", "s", bus_property_get_worker_state, struct tenant, worker,
                   SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        BUS_PID("WorkerPid", struct tenant, worker.pid, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        BUS_U32("WorkerRestarts", struct tenant, worker.restarts, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        COUNTER("Fills", fills),
        COUNTER("BytesFetched", fill_bytes),
        COUNTER("FillErrors", fill_errors),
        COUNTER("Archives", archives),
        COUNTER("Releases", releases),
        BUS_WORKER("InFlightRequests", "u", bus_property_get_worker_in_flight, struct tenant, worker, 0),
        SD_BUS_PROPERTY("ResidentBytes", "t", get_usage, 0, 0),
        SD_BUS_PROPERTY("ReleasedBytes", "t", get_usage, 0, 0),
        SD_BUS_PROPERTY("ArchivedBytes", "t", get_usage, 0, 0),
        SD_BUS_PROPERTY("FilesByState", "a{st}", get_usage, 0, 0),
        SD_BUS_PROPERTY("LastError", "s", get_last_error, 0, 0),
        SD_BUS_PROPERTY("Quota", "t", get_quota, 0, 0),
        SD_BUS_PROPERTY("UsedBytes", "t", get_quota, 0, 0),
        COUNTER("QuotaReleases", quota_releases),
        COUNTER("QuotaDenials", quota_denials),
        COUNTER("AutoArchives", auto_archives),
        COUNTER("ReadsDenied", reads_denied),
        COUNTER("PrefetchedBytes", prefetched_bytes),
        COUNTER("PrefetchHits", prefetch_hits),
        COUNTER("PrefetchWastedBytes", prefetch_wasted_bytes),
        COUNTER("HydratedFiles", hydrated_files),
        BUS_WAIT_PROPERTIES(struct tenant, counters.wait),
        BUS_U64("WorkerRestartsTotal", struct tenant, worker.restarts_total, 0),
        SD_BUS_VTABLE_END,
};

int tenant_bus_publish(struct tierd *t) {
        int r = sd_bus_add_fallback_vtable(t->bus, NULL, TIERD_BUS_TENANT_PREFIX, TIERD_BUS_TENANT, tenant_vtable,
                                           tenant_find, t);
        if (r >= 0)
                r = sd_bus_add_node_enumerator(t->bus, NULL, TIERD_BUS_TENANT_PREFIX, tenant_enumerate, t);
        if (r >= 0)
                r = sd_bus_add_object_manager(t->bus, NULL, TIERD_BUS_PATH);
        if (r < 0)
                return log_error_errno(r, "cannot publish the tenant objects: %m");
        return 0;
}

void tenant_bus_worker_changed(struct tenant *tn) {
        _cleanup_free_ char *path = NULL;
        if (!tn->t->bus || !(path = tenant_bus_path(tn)))
                return;
        sd_bus_emit_properties_changed(tn->t->bus, path, TIERD_BUS_TENANT, "WorkerState", "WorkerPid", "WorkerRestarts",
                                       NULL);
}

void tenant_bus_worker_started(struct tenant *tn) {
        _cleanup_free_ char *path = NULL;
        if (!tn->t->bus || !(path = tenant_bus_path(tn)))
                return;
        sd_bus_emit_signal(tn->t->bus, TIERD_BUS_PATH, TIERD_BUS_MANAGER, "WorkerStarted", "sou", tn->cfg->name, path,
                           (uint32_t)tn->worker.pid);
        tenant_bus_worker_changed(tn);
}

void tenant_bus_quota_pressure(struct tenant *tn, uint64_t need) {
        _cleanup_free_ char *path = NULL;
        if (!tn->t->bus || !(path = tenant_bus_path(tn)))
                return;
        sd_bus_emit_signal(tn->t->bus, TIERD_BUS_PATH, TIERD_BUS_MANAGER, "QuotaPressure", "sottt", tn->cfg->name, path,
                           usage_used(tn), tn->cfg->quota, need);
}

void tenant_bus_worker_exited(struct tenant *tn, pid_t pid, bool killed, int status) {
        _cleanup_free_ char *path = NULL;
        if (!tn->t->bus || !(path = tenant_bus_path(tn)))
                return;
        sd_bus_emit_signal(tn->t->bus, TIERD_BUS_PATH, TIERD_BUS_MANAGER, "WorkerExited", "sousi", tn->cfg->name, path,
                           (uint32_t)pid, killed ? "signal" : "exit", (int32_t)status);
        tenant_bus_worker_changed(tn);
}
