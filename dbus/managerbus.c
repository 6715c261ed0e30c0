/* SPDX-License-Identifier: MIT */
/*
 * org.tierd1.Manager, server side (dbus/org.tierd1.Manager.xml). Each handler
 * reads its arguments, checks who is asking, acts, replies.
 */
#include "managerbus.h"

#include <errno.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "callers.h"
#include "catalogbus.h"
#include "containerbus.h"
#include "jobbus.h"
#include "pathbus.h"
#include "statusbus.h"
#include "fileops.h"
#include "tally.h"
#include "usage.h"
#include "reload.h"
#include "tenantbus.h"
#include "tracebus.h"
#include "utf8.h"
#include "log.h"
#include "workers.h"
#include "macro.h"
#include "property.h"

#define ERROR_NO_SUCH_TENANT "org.tierd1.Error.NoSuchTenant"
#define ERROR_INVALID_POLICY "org.tierd1.Error.InvalidPolicy"
#define ERROR_NEEDS_RESTART "org.tierd1.Error.NeedsRestart"
#define ERROR_NO_SUCH_JOB "org.tierd1.Error.NoSuchJob"
#define ERROR_READ_ONLY_POLICY "org.tierd1.Error.ReadOnlyPolicy"
#define SETTINGS_MAX (64 * 1024)

/* The files of a job, by open file (ah): each must be a regular file in
 * a tenant's subvolume, or the call fails with the first that is not, and
 * nothing is done. (By path: pathbus.c.) */
static int read_files(sd_bus_message *m, struct tierd *t, struct file_ref **ret, size_t *ret_n, sd_bus_error *error) {
        struct file_ref *refs = NULL;
        char msg[512] = "";
        size_t n = 0;
        int r = sd_bus_message_enter_container(m, 'a', "h");

        while (r >= 0) {
                int fd;
                if ((r = sd_bus_message_read(m, "h", &fd)) <= 0)
                        break;
                struct file_ref *grown = realloc(refs, (n + 1) * sizeof(*refs));
                if (!grown) {
                        r = -ENOMEM;
                        break;
                }
                refs = grown;
                if (n >= MAX_PATHS) {
                        r = sd_bus_error_setf(error, ERROR_INVALID_ARGS, "at most %d files per call", MAX_PATHS);
                        break;
                }
                /* -EAGAIN: its name is walked by the job, on a thread. */
                r = file_ref_from_fd(t, fd, &refs[n], msg, sizeof(msg));
                if (r == -EAGAIN)
                        r = 0;
                if (r < 0) {
                        _cleanup_free_ char *safe = utf8_escape(msg);
                        r = sd_bus_error_setf(error, bus_job_error_name(r), "file #%zu: %s", n, safe ?: "");
                        break;
                }
                n++;
        }
        if (r >= 0 && n == 0)
                r = sd_bus_error_set(error, ERROR_INVALID_ARGS, "no files given");
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        file_ref_done(&refs[i]);
                free(refs);
                return r;
        }
        *ret = refs;
        *ret_n = n;
        return 0;
}

/* Archive, Release, Restore, Pin, Unpin (their *Paths twins: pathbus.c):
 * checks, a job, its path in the reply, then the job runs. */
static int method_file_job(sd_bus_message *m, struct tierd *t, const char *operation, file_job_t fn,
                           sd_bus_error *error) {
        struct file_ref *refs = NULL;
        size_t n = 0;
        int r;

        if ((r = bus_file_job_allowed(m, t, error)) != 0)
                return r;
        if ((r = read_files(m, t, &refs, &n, error)) < 0)
                return r;
        r = bus_file_job_reply(m, t, operation, fn, refs, n);
        for (size_t i = 0; i < n; i++)
                file_ref_done(&refs[i]);
        free(refs);
        return r;
}

#define FILE_JOB_METHODS(op, fn) \
        static int method_##op(sd_bus_message *m, void *userdata, sd_bus_error *error) { \
                return method_file_job(m, userdata, #op, fn, error); \
        } \
        static int method_##op##_paths(sd_bus_message *m, void *userdata, sd_bus_error *error) { \
                return path_bus_file_job(m, userdata, #op, fn, error); \
        }
FILE_JOB_METHODS(archive, job_archive)
FILE_JOB_METHODS(release, job_release)
FILE_JOB_METHODS(restore, job_restore)
FILE_JOB_METHODS(pin, job_pin)
FILE_JOB_METHODS(unpin, job_unpin)
FILE_JOB_METHODS(rehash, job_rehash)

static int method_cancel_job(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        const char *path;
        int r = sd_bus_message_read(m, "o", &path);

        if (r < 0)
                return r;
        if ((r = bus_check_admin(t, m, error)) != 0)
                return r;
        r = job_bus_cancel(t, path);
        if (r == 0)
                return sd_bus_error_setf(error, ERROR_NO_SUCH_JOB, "no job %s (finished already?)", path);
        if (r < 0)
                return sd_bus_error_setf(error, BUS_ERROR_NOT_CANCELABLE, "job %s cannot be canceled", path);
        return sd_bus_reply_method_return(m, "");
}

/* One tenant's status as a{sv}: keys may be added, and clients skip what
 * they do not know. Everything is counted already (tally.c): O(1). */
static int append_tenant_status(sd_bus_message *reply, struct tenant *tn) {
        const struct tenant_usage *u = tally_read(tn);
        const struct {
                const char *key;
                uint64_t value;
        } counts[] = {
                { "ResidentBytes", u->resident_bytes },
                { "ReleasedBytes", u->released_bytes },
                { "FilesResident", u->files[USAGE_RESIDENT] },
                { "FilesArchived", u->files[USAGE_ARCHIVED] },
                { "FilesPartial", u->files[USAGE_PARTIAL] },
                { "FilesReleased", u->files[USAGE_RELEASED] },
                { "FilesDirty", u->files[USAGE_DIRTY] },
                { "Fills", tn->counters.fills },
                { "FillBytes", tn->counters.fill_bytes },
                { "FillErrors", tn->counters.fill_errors },
                { "Quota", tn->cfg->quota },
                { "UsedBytes", usage_used(tn) },
        };
        int r = sd_bus_message_open_container(reply, 'a', "{sv}");
        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}{sv}{sv}{sv}{sv}{sv}", "Name", "s", tn->cfg->name, "Subvolume", "s",
                                          tn->cfg->subvolume, "Mount", "s", tn->cfg->mount, "Backend", "s",
                                          tn->cfg->backend, "WorkerState", "s", worker_state_to_string(tn->worker.state),
                                          "WorkerPid", "u", (uint32_t)tn->worker.pid);
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(counts); i++)
                r = sd_bus_message_append(reply, "{sv}", counts[i].key, "t", counts[i].value);
        return r >= 0 ? sd_bus_message_close_container(reply) : r;
}

static int method_tenant_status(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        sd_bus_message *reply = NULL;
        int r;
        (void)error;

        r = bus_array_reply_open(m, "a{sv}", &reply);
        for (size_t i = 0; r >= 0 && i < t->n_tenants; i++)
                r = append_tenant_status(reply, &t->tenants[i]);
        return bus_array_reply_send(reply, r);
}

/* For liveness probes: answered by the loop that answers readers, at
 * once, with nothing counted or walked. */
static int method_ping(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const struct tierd *t = userdata;
        (void)error;
        return sd_bus_reply_method_return(m, "u", (uint32_t)t->n_tenants);
}

static int method_list_tenants(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        sd_bus_message *reply = NULL;
        int r;
        (void)error;

        r = bus_array_reply_open(m, "(so)", &reply);
        for (size_t i = 0; r >= 0 && i < t->n_tenants; i++) {
                _cleanup_free_ char *path = tenant_bus_path(&t->tenants[i]);
                r = path ? sd_bus_message_append(reply, "(so)", t->tenants[i].cfg->name, path) : -ENOMEM;
        }
        return bus_array_reply_send(reply, r);
}

static int method_get_tenant(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        _cleanup_free_ char *path = NULL;
        const char *name;
        struct tenant *tn;
        int r = sd_bus_message_read(m, "s", &name);

        if (r < 0)
                return r;
        if (!(tn = tierd_find_tenant(t, name)))
                return sd_bus_error_setf(error, ERROR_NO_SUCH_TENANT, "no tenant named \"%.64s\" in the policy", name);
        if (!(path = tenant_bus_path(tn)))
                return -ENOMEM;
        return sd_bus_reply_method_return(m, "o", path);
}

/* The named error for what tierd_reload_policy / tierd_set_tenant_policy
 * returned. */
static int policy_error(sd_bus_error *error, int r, const char *why) {
        const char *name = r == -EINVAL ? ERROR_INVALID_POLICY
                           : r == -EXDEV ? ERROR_NEEDS_RESTART
                           : r == -ENOENT ? ERROR_NO_SUCH_TENANT
                           : r == -EROFS ? ERROR_READ_ONLY_POLICY
                                         : NULL;
        if (!name)
                return sd_bus_error_set_errnof(error, r, "%s", why ?: strerror(-r));
        return sd_bus_error_set(error, name, why ?: strerror(-r));
}

static void manager_bus_policy_reloaded(struct tierd *t) {
        sd_bus_emit_signal(t->bus, TIERD_BUS_PATH, TIERD_BUS_MANAGER, "PolicyReloaded", "s", t->policy_path);
}

static int method_reload_policy(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        _cleanup_free_ char *why = NULL;
        int r;

        if ((r = bus_check_admin(t, m, error)) != 0)
                return r;
        r = tierd_reload_policy(t, &why);
        if (r < 0)
                return policy_error(error, r, why);
        manager_bus_policy_reloaded(t);
        return sd_bus_reply_method_return(m, "");
}

static int method_set_tenant_policy(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        _cleanup_free_ char *why = NULL;
        const char *name, *settings;
        int r = sd_bus_message_read(m, "ss", &name, &settings);

        if (r < 0)
                return r;
        if (strlen(settings) > SETTINGS_MAX)
                return sd_bus_error_setf(error, ERROR_INVALID_ARGS, "settings longer than %d bytes", SETTINGS_MAX);
        if (!tierd_find_tenant(t, name))
                return sd_bus_error_setf(error, ERROR_NO_SUCH_TENANT, "no tenant named \"%.64s\" in the policy", name);
        if ((r = bus_check_admin(t, m, error)) != 0)
                return r;
        const char *key = policy_patch_root_only_key(settings);
        if (key) {
                sd_bus_error not_root = SD_BUS_ERROR_NULL;
                r = bus_check_root(m, &not_root); /* known: bus_check_admin asked */
                sd_bus_error_free(&not_root);
                if (r > 0)
                        return r;
                if (r < 0)
                        return sd_bus_error_setf(error, ERROR_ACCESS_DENIED,
                                                 "only root may set \"%s\": it says where the tenant's data goes, "
                                                 "which secret it uses, who else sees it or what keeps its "
                                                 "bytes safe", key);
        }
        r = tierd_set_tenant_policy(t, name, settings, &why);
        if (r < 0)
                return policy_error(error, r, why);
        manager_bus_policy_reloaded(t);
        return sd_bus_reply_method_return(m, "");
}

/* A file job's two methods: by fds and by paths. */
#define FILE_JOB_VTABLE(name, paths_name, op) \
        SD_BUS_METHOD_WITH_ARGS(name, SD_BUS_ARGS("ah", files), SD_BUS_RESULT("o", job), method_##op, \
                                SD_BUS_VTABLE_UNPRIVILEGED), \
        SD_BUS_METHOD_WITH_ARGS(paths_name, SD_BUS_ARGS("as", paths), SD_BUS_RESULT("o", job), method_##op##_paths, \
                                SD_BUS_VTABLE_UNPRIVILEGED)

GETTER(get_version) {
        (void)bus, (void)path, (void)interface, (void)property, (void)userdata, (void)error;
        return sd_bus_message_append(reply, "s", TIERD_VERSION);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        FILE_JOB_VTABLE("Archive", "ArchivePaths", archive),
        FILE_JOB_VTABLE("Release", "ReleasePaths", release),
        FILE_JOB_VTABLE("Restore", "RestorePaths", restore),
        FILE_JOB_VTABLE("Pin", "PinPaths", pin),
        FILE_JOB_VTABLE("Unpin", "UnpinPaths", unpin),
        FILE_JOB_VTABLE("Rehash", "RehashPaths", rehash),
        SD_BUS_METHOD_WITH_ARGS("CancelJob", SD_BUS_ARGS("o", job), SD_BUS_NO_RESULT, method_cancel_job,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("FileStatus", SD_BUS_ARGS("as", paths), SD_BUS_RESULT("a(ssssttb)", files),
                                path_bus_method_file_status, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("FileStatusFds", SD_BUS_ARGS("ah", files), SD_BUS_RESULT("a(ssssttb)", files),
                                status_bus_method_file_status_fds, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("TenantStatus", SD_BUS_NO_ARGS, SD_BUS_RESULT("aa{sv}", tenants),
                                method_tenant_status, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Ping", SD_BUS_NO_ARGS, SD_BUS_RESULT("u", tenants), method_ping,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListTenants", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(so)", tenants), method_list_tenants,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetTenant", SD_BUS_ARGS("s", name), SD_BUS_RESULT("o", tenant), method_get_tenant,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("ReloadPolicy", "", "", method_reload_policy, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetTenantPolicy", SD_BUS_ARGS("s", name, "s", settings), SD_BUS_NO_RESULT,
                                method_set_tenant_policy, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ImportTenant", SD_BUS_ARGS("s", tenant, "s", backend, "t", at_usec, "t", flags),
                                SD_BUS_RESULT("s", summary), catalog_bus_method_import, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("CollectGarbage", SD_BUS_ARGS("s", tenant, "b", dry_run), SD_BUS_RESULT("s", summary),
                                catalog_bus_method_collect, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("AuditTenant", SD_BUS_ARGS("s", tenant, "b", repair),
                                SD_BUS_RESULT("s", summary, "a(sss)", findings), catalog_bus_method_audit,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("StartImport", SD_BUS_ARGS("s", tenant, "s", backend, "t", at_usec, "t", flags),
                                SD_BUS_RESULT("o", job), catalog_bus_method_start_import, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("StartCollectGarbage", SD_BUS_ARGS("s", tenant, "b", dry_run), SD_BUS_RESULT("o", job),
                                catalog_bus_method_start_collect, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("StartAudit", SD_BUS_ARGS("s", tenant, "b", repair), SD_BUS_RESULT("o", job),
                                catalog_bus_method_start_audit, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListJobs", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(uosuuu)", jobs), job_bus_method_list,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("AttachContainer",
                                SD_BUS_ARGS("s", id, "s", tenant, "u", pid, "s", rootfs, "s", mount_path, "s",
                                            kubernetes_namespace, "a{sv}", options),
                                SD_BUS_RESULT("o", container), container_bus_method_attach, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("StartTrace", SD_BUS_ARGS("s", tenant, "s", name), SD_BUS_NO_RESULT,
                                trace_bus_method_start, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetTrace", SD_BUS_ARGS("s", tenant, "s", name),
                                SD_BUS_RESULT("u", runs, "t", bytes, "a(sttu)", files), trace_bus_method_get,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("DetachContainer", SD_BUS_ARGS("s", id), SD_BUS_NO_RESULT, container_bus_method_detach,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListContainers", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssuso)", containers),
                                container_bus_method_list, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("PolicyReloaded", SD_BUS_ARGS("s", path), 0),
        SD_BUS_SIGNAL_WITH_ARGS("QuotaPressure",
                                SD_BUS_ARGS("s", tenant, "o", path, "t", used, "t", quota, "t", need), 0),
        SD_BUS_SIGNAL_WITH_ARGS("JobNew", SD_BUS_ARGS("u", id, "o", job, "s", operation), 0),
        SD_BUS_SIGNAL_WITH_ARGS("TaskFinished",
                                SD_BUS_ARGS("u", id, "o", job, "s", operation, "s", result, "s", summary, "a(sss)",
                                            findings), 0),
        SD_BUS_SIGNAL_WITH_ARGS("JobRemoved",
                                SD_BUS_ARGS("u", id, "o", job, "s", operation, "s", result, "u", done, "u", failed,
                                            "a(uss)", errors), 0),
        SD_BUS_SIGNAL_WITH_ARGS("ContainerAttached", SD_BUS_ARGS("s", id, "s", tenant, "o", container), 0),
        SD_BUS_SIGNAL_WITH_ARGS("ContainerDetached", SD_BUS_ARGS("s", id, "s", tenant, "o", container, "s", reason), 0),
        SD_BUS_SIGNAL_WITH_ARGS("WorkerStarted", SD_BUS_ARGS("s", tenant, "o", path, "u", pid), 0),
        SD_BUS_SIGNAL_WITH_ARGS("WorkerExited", SD_BUS_ARGS("s", tenant, "o", path, "u", pid, "s", how, "i", status), 0),
        SD_BUS_VTABLE_END,
};

static int manager_bus_open(struct tierd *t) {
        int r = sd_bus_open_system(&t->bus);
        if (r < 0)
                return log_error_errno(r, "cannot connect to the system bus (DBUS_SYSTEM_BUS_ADDRESS?): %m");
        r = sd_bus_add_object_vtable(t->bus, NULL, TIERD_BUS_PATH, TIERD_BUS_MANAGER, manager_vtable, t);
        if (r < 0)
                return log_error_errno(r, "cannot publish %s: %m", TIERD_BUS_PATH);
        r = tenant_bus_publish(t);
        if (r >= 0)
                r = container_bus_publish(t);
        if (r >= 0)
                r = job_bus_publish(t);
        if (r < 0)
                return r;
        /* A predecessor's connection may take a moment to be dropped by
         * the bus after it died. */
        for (int i = 0; i < 40; i++) {
                r = sd_bus_request_name(t->bus, TIERD_BUS_NAME, 0);
                if (r != -EEXIST)
                        break;
                usleep(50 * 1000);
        }
        if (r < 0)
                return log_error_errno(r, "cannot own %s on the system bus (is another tierd running, or the bus policy "
                                          "contrib/dbus/org.tierd1.conf missing?): %m", TIERD_BUS_NAME);
        r = sd_bus_attach_event(t->bus, t->event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0) /* closed by manager_bus_close, after the stop's last words */
                r = sd_bus_set_close_on_exit(t->bus, false);
        if (r < 0)
                return log_error_errno(r, "sd_bus_attach_event: %m");
        t->face = &bus_face; /* from now on supervisor/ tells us */
        return 0;
}

static void manager_bus_close(struct tierd *t) {
        t->face = NULL;
        access_close();
        callers_close(); /* calls put aside are answered ShuttingDown */
        status_bus_close();
        t->bus = sd_bus_flush_close_unref(t->bus);
}

const struct tierd_face bus_face = {
        .open = manager_bus_open,
        .close = manager_bus_close,
        .policy_reloaded = manager_bus_policy_reloaded,
        .tenant_worker_started = tenant_bus_worker_started,
        .tenant_worker_exited = tenant_bus_worker_exited,
        .tenant_worker_changed = tenant_bus_worker_changed,
        .tenant_quota_pressure = tenant_bus_quota_pressure,
        .container_attached = container_bus_attached,
        .container_detached = container_bus_detached,
        .container_worker_changed = container_bus_worker_changed,
        .batch_added = job_bus_added,
        .batch_changed = job_bus_changed,
        .batch_removed = job_bus_removed,
};
