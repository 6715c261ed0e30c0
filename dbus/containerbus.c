/* SPDX-License-Identifier: MIT */
/*
 * org.tierd1.Container, one object per attached container
 * (dbus/org.tierd1.Container.xml), and the manager's AttachContainer,
 * DetachContainer and ListContainers. The OCI hook (tierctl oci-hook) is
 * the usual caller.
 */
#include "containerbus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "containers.h"
#include "log.h"
#include "macro.h"
#include "property.h"
#include "managerbus.h"
#include "workers.h"

#define ERROR_NO_SUCH_TENANT "org.tierd1.Error.NoSuchTenant"
#define ERROR_INVALID_ARGS "org.tierd1.Error.InvalidArguments"
#define ERROR_CONTAINER_REFUSED "org.tierd1.Error.ContainerRefused"
#define ERROR_CONTAINER_EXISTS "org.tierd1.Error.ContainerExists"
#define ERROR_NO_SUCH_CONTAINER "org.tierd1.Error.NoSuchContainer"
#define ERROR_NO_SUCH_PROCESS "org.tierd1.Error.NoSuchProcess"
#define ERROR_ATTACH_FAILED "org.tierd1.Error.AttachFailed"
#define ERROR_SHUTTING_DOWN "org.tierd1.Error.ShuttingDown"

char *container_bus_path(const struct container *c) {
        char *path = NULL;
        return sd_bus_path_encode(TIERD_BUS_CONTAINER_PREFIX, c->id, &path) < 0 ? NULL : path;
}

static int container_find_object(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                                 sd_bus_error *error) {
        _cleanup_free_ char *id = NULL;
        struct container *c;
        (void)bus, (void)interface, (void)error;

        if (sd_bus_path_decode(path, TIERD_BUS_CONTAINER_PREFIX, &id) <= 0 || !(c = container_find(userdata, id)))
                return 0;
        *found = c;
        return 1;
}

static int container_enumerate(sd_bus *bus, const char *prefix, void *userdata, char ***nodes, sd_bus_error *error) {
        struct tierd *t = userdata;
        char **v = NULL;
        size_t n = 0;
        (void)bus, (void)prefix, (void)error;

        for (struct container *c = t->containers; c; c = c->next)
                if (bus_nodes_add(&v, &n, container_bus_path(c)) < 0)
                        return -ENOMEM;
        return bus_nodes_done(v, nodes);
}

GETTER(get_tenant) {
        const struct container *c = userdata;
        (void)bus, (void)path, (void)interface, (void)property, (void)error;
        return sd_bus_message_append(reply, "s", c->tenant->cfg->name);
}

#define C_CONST SD_BUS_VTABLE_PROPERTY_CONST
#define C_EMITS SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE

static const sd_bus_vtable container_vtable[] = {
        SD_BUS_VTABLE_START(0),
        BUS_STRING("Id", struct container, id, C_CONST),
        SD_BUS_PROPERTY("Tenant", "s", get_tenant, 0, C_CONST),
        BUS_PID("Pid", struct container, pid, C_CONST),
        BUS_U64("MountNamespaceId", struct container, mntns_id, C_CONST),
        BUS_STRING("Cgroup", struct container, cgroup, C_CONST),
        BUS_STRING("MountPath", struct container, mount_path, C_CONST),
        BUS_STRING("Rootfs", struct container, rootfs, C_CONST),
        BUS_STRING("KubernetesNamespace", struct container, k8s_namespace, C_CONST),
        BUS_BOOL("ReadOnly", struct container, read_only, C_CONST),
        BUS_BOOL("Idmapped", struct container, idmapped, C_CONST),
        BUS_U64("AttachedAt", struct container, attached_usec, C_CONST),
        BUS_U64("AttachMicroseconds", struct container, attach_took_usec, C_CONST),
        BUS_WORKER("WorkerState", "s", bus_property_get_worker_state, struct container, worker, C_EMITS),
        BUS_PID("WorkerPid", struct container, worker.pid, C_EMITS),
        BUS_U32("WorkerRestarts", struct container, worker.restarts, C_EMITS),
        BUS_WORKER("InFlightRequests", "u", bus_property_get_worker_in_flight, struct container, worker, 0),
        BUS_U64("Fills", struct container, fills, 0),
        BUS_U64("BytesFetched", struct container, fill_bytes, 0),
        BUS_U64("FillErrors", struct container, fill_errors, 0),
        BUS_U64("PrefetchedBytes", struct container, prefetched_bytes, 0),
        BUS_U64("PrefetchHits", struct container, prefetch_hits, 0),
        BUS_U64("PrefetchWastedBytes", struct container, prefetch_wasted_bytes, 0),
        BUS_U64("WorkerRestartsTotal", struct container, worker.restarts_total, 0),
        BUS_WAIT_PROPERTIES(struct container, wait),
        SD_BUS_VTABLE_END,
};

int container_bus_publish(struct tierd *t) {
        int r = sd_bus_add_fallback_vtable(t->bus, NULL, TIERD_BUS_CONTAINER_PREFIX, TIERD_BUS_CONTAINER,
                                           container_vtable, container_find_object, t);
        if (r >= 0)
                r = sd_bus_add_node_enumerator(t->bus, NULL, TIERD_BUS_CONTAINER_PREFIX, container_enumerate, t);
        if (r < 0)
                return log_error_errno(r, "cannot publish the container objects: %m");
        return 0;
}

void container_bus_attached(struct container *c) {
        sd_bus *bus = c->tenant->t->bus;
        _cleanup_free_ char *path = NULL;
        if (!bus || !(path = container_bus_path(c)))
                return;
        sd_bus_emit_object_added(bus, path);
        sd_bus_emit_signal(bus, TIERD_BUS_PATH, TIERD_BUS_MANAGER, "ContainerAttached", "sso", c->id,
                           c->tenant->cfg->name, path);
}

void container_bus_detached(struct container *c, const char *reason) {
        sd_bus *bus = c->tenant->t->bus;
        _cleanup_free_ char *path = NULL;
        if (!bus || !(path = container_bus_path(c)))
                return;
        sd_bus_emit_object_removed(bus, path);
        sd_bus_emit_signal(bus, TIERD_BUS_PATH, TIERD_BUS_MANAGER, "ContainerDetached", "ssos", c->id,
                           c->tenant->cfg->name, path, reason);
}

void container_bus_worker_changed(struct container *c) {
        sd_bus *bus = c->tenant->t->bus;
        _cleanup_free_ char *path = NULL;
        /* Not before it is published: its first worker starts in attach. */
        if (!bus || !c->serial || !(path = container_bus_path(c)))
                return;
        sd_bus_emit_properties_changed(bus, path, TIERD_BUS_CONTAINER, "WorkerState", "WorkerPid", "WorkerRestarts",
                                       NULL);
}

/* Options: "ReadOnly" (b). Anything else is refused, not ignored. */
static int read_options(sd_bus_message *m, struct container_request *req, sd_bus_error *error) {
        int r = sd_bus_message_enter_container(m, 'a', "{sv}");
        while (r >= 0) {
                const char *key;
                if ((r = sd_bus_message_enter_container(m, 'e', "sv")) <= 0)
                        break;
                if ((r = sd_bus_message_read(m, "s", &key)) < 0)
                        return r;
                if (strcmp(key, "ReadOnly") == 0) {
                        int v;
                        if ((r = sd_bus_message_read(m, "v", "b", &v)) < 0)
                                return sd_bus_error_setf(error, ERROR_INVALID_ARGS, "option ReadOnly must be a boolean");
                        req->read_only = v;
                } else if (strcmp(key, "Trace") == 0) {
                        if ((r = sd_bus_message_read(m, "v", "s", &req->trace)) < 0)
                                return sd_bus_error_setf(error, ERROR_INVALID_ARGS, "option Trace must be a string");
                } else
                        return sd_bus_error_setf(error, ERROR_INVALID_ARGS, "unknown option \"%.64s\"", key);
                r = sd_bus_message_exit_container(m);
        }
        return r < 0 ? r : sd_bus_message_exit_container(m);
}

static const char *attach_error_name(int r) {
        switch (r) {
        case -ENOENT: return ERROR_NO_SUCH_TENANT;
        case -EPERM: return ERROR_CONTAINER_REFUSED;
        case -EEXIST: return ERROR_CONTAINER_EXISTS;
        case -ESRCH: return ERROR_NO_SUCH_PROCESS;
        case -EINVAL: return ERROR_INVALID_ARGS;
        default: return ERROR_ATTACH_FAILED;
        }
}

int container_bus_method_attach(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        struct container_request req = {};
        _cleanup_free_ char *path = NULL;
        struct container *c;
        const char *why = NULL;
        uint32_t pid;
        int r;

        r = sd_bus_message_read(m, "ssusss", &req.id, &req.tenant, &pid, &req.rootfs, &req.mount_path,
                                &req.k8s_namespace);
        if (r < 0)
                return r;
        if ((r = read_options(m, &req, error)) < 0)
                return r;
        req.pid = (pid_t)pid;
        if ((r = bus_check_root(m, error)) != 0)
                return r;
        if (t->stopping)
                return sd_bus_error_set(error, ERROR_SHUTTING_DOWN, "tierd is stopping");
        r = container_attach(t, &req, &c, &why);
        if (r < 0) {
                const char *name = attach_error_name(r);
                bool cause = strcmp(name, ERROR_ATTACH_FAILED) == 0 && why; /* the step, then the kernel's word */
                return sd_bus_error_setf(error, name, "container %.128s, tenant %.64s: %s%s%s", req.id, req.tenant,
                                         why ?: strerror(-r), cause ? ": " : "", cause ? strerror(-r) : "");
        }
        if (!(path = container_bus_path(c)))
                return -ENOMEM;
        return sd_bus_reply_method_return(m, "o", path);
}

int container_bus_method_detach(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        struct container *c;
        const char *id;
        int r = sd_bus_message_read(m, "s", &id);

        if (r < 0)
                return r;
        if ((r = bus_check_root(m, error)) != 0)
                return r;
        if (!(c = container_find(t, id)))
                return sd_bus_error_setf(error, ERROR_NO_SUCH_CONTAINER, "no container \"%.128s\" is attached", id);
        container_detach(c, "DetachContainer");
        return sd_bus_reply_method_return(m, "");
}

int container_bus_method_list(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r = sd_bus_message_new_method_return(m, &reply);
        (void)error;

        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(ssuso)");
        for (struct container *c = t->containers; r >= 0 && c; c = c->next) {
                _cleanup_free_ char *path = container_bus_path(c);
                r = path ? sd_bus_message_append(reply, "(ssuso)", c->id, c->tenant->cfg->name, (uint32_t)c->pid,
                                                 c->mount_path, path)
                         : -ENOMEM;
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}
