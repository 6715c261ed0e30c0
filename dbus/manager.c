/* SPDX-License-Identifier: MIT */
/*
 * org.tierd1.Manager, server side (dbus/org.tierd1.Manager.xml). Each handler
 * reads its arguments, checks who is asking, acts, replies.
 */
#include "manager.h"

#include <errno.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "jobs.h"
#include "reload.h"
#include "tenant.h"
#include "log.h"
#include "workers.h"
#include "macro.h"

#define ERROR_SHUTTING_DOWN "org.tierd1.Error.ShuttingDown"
#define ERROR_NO_SUCH_TENANT "org.tierd1.Error.NoSuchTenant"
#define ERROR_INVALID_POLICY "org.tierd1.Error.InvalidPolicy"
#define ERROR_NEEDS_RESTART "org.tierd1.Error.NeedsRestart"
#define ERROR_INVALID_ARGS "org.tierd1.Error.InvalidArguments"
#define MAX_PATHS 100000
#define MAX_PATH_LEN 4096

static int read_paths(sd_bus_message *m, char ***ret, sd_bus_error *error) {
        char **paths = NULL;
        int r = sd_bus_message_read_strv(m, &paths);
        if (r < 0)
                return r;
        size_t n = 0;
        for (; paths[n]; n++)
                if (strlen(paths[n]) > MAX_PATH_LEN || paths[n][0] != '/') {
                        r = sd_bus_error_setf(error, ERROR_INVALID_ARGS, "path #%zu is not an absolute path of at most %d bytes",
                                              n, MAX_PATH_LEN);
                        goto fail;
                }
        if (n > MAX_PATHS) {
                r = sd_bus_error_setf(error, ERROR_INVALID_ARGS, "at most %d paths per call", MAX_PATHS);
                goto fail;
        }
        *ret = paths;
        return (int)n;
fail:
        for (size_t i = 0; paths[i]; i++)
                free(paths[i]);
        free(paths);
        return r;
}

static void strv_free(char **v) {
        if (!v)
                return;
        for (size_t i = 0; v[i]; i++)
                free(v[i]);
        free(v);
}

/* A reply that is one array: opened here, filled by the caller (r carries
 * the first error), then closed and sent, and unreferenced either way. */
static int array_reply_open(sd_bus_message *call, const char *contents, sd_bus_message **reply) {
        int r = sd_bus_message_new_method_return(call, reply);
        return r < 0 ? r : sd_bus_message_open_container(*reply, 'a', contents);
}

static int array_reply_send(sd_bus_message *reply, int r) {
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 1;
}

typedef int (*async_job_t)(struct tierd *t, const char *path, job_done_t done, void *userdata);

/* One method call over many paths, answered when the last one is done. At
 * most BATCH_RUNNING paths at a time: each holds an fd, and tierd keeps its
 * fds for readers' events. */
#define BATCH_RUNNING 16

struct batch {
        struct tierd *t;
        async_job_t job;
        sd_bus_message *call;
        char **paths;
        char **errors;
        size_t n, next, running;
        bool starting; /* in batch_continue(): completions do not recurse */
};

struct batch_item {
        struct batch *b;
        size_t i;
};

static void batch_free(struct batch *b) {
        sd_bus_message_unref(b->call);
        strv_free(b->paths);
        for (size_t i = 0; i < b->n; i++)
                free(b->errors[i]);
        free(b->errors);
        free(b);
}

static void batch_reply(struct batch *b) {
        sd_bus_message *reply = NULL;
        int r = array_reply_open(b->call, "(ss)", &reply);
        for (size_t i = 0; r >= 0 && i < b->n; i++)
                r = sd_bus_message_append(reply, "(ss)", b->paths[i], b->errors[i] ? b->errors[i] : "");
        r = array_reply_send(reply, r);
        if (r < 0)
                log_error_errno(r, "cannot send a reply: %m");
        batch_free(b);
}

static void batch_continue(struct batch *b);

static void batch_item_done(void *userdata, int error, const char *message) {
        struct batch_item *it = userdata;
        struct batch *b = it->b;
        if (error < 0 && !(b->errors[it->i] = strdup(message ? message : strerror(-error))))
                b->errors[it->i] = NULL;
        if (error < 0 && !b->errors[it->i])
                b->errors[it->i] = strdup("failed");
        free(it);
        b->running--;
        if (!b->starting)
                batch_continue(b);
}

/* Starts paths while fewer than BATCH_RUNNING run; replies after the last.
 * A job may finish inside job(). */
static void batch_continue(struct batch *b) {
        b->starting = true;
        while (b->running < BATCH_RUNNING && b->next < b->n) {
                size_t i = b->next++;
                struct batch_item *it = calloc(1, sizeof(*it));
                if (!it) {
                        b->errors[i] = strdup("out of memory");
                        continue;
                }
                *it = (struct batch_item){ .b = b, .i = i };
                b->running++;
                int r = b->job(b->t, b->paths[i], batch_item_done, it);
                if (r < 0)
                        batch_item_done(it, r, NULL);
        }
        b->starting = false;
        if (b->running == 0 && b->next == b->n)
                batch_reply(b);
}

static int method_batch(sd_bus_message *m, struct tierd *t, async_job_t job, sd_bus_error *error) {
        struct batch *b;
        char **paths = NULL;
        int r, n;

        if ((r = bus_check_admin(t, m, error)) < 0)
                return r;
        if (t->stopping)
                return sd_bus_error_set(error, ERROR_SHUTTING_DOWN, "tierd is shutting down");
        if ((n = read_paths(m, &paths, error)) < 0)
                return n;
        b = calloc(1, sizeof(*b));
        if (!b || !(b->errors = calloc((size_t)n + 1, sizeof(char *)))) {
                free(b);
                strv_free(paths);
                return -ENOMEM;
        }
        *b = (struct batch){ .t = t, .job = job, .call = sd_bus_message_ref(m), .paths = paths, .errors = b->errors,
                             .n = (size_t)n };
        batch_continue(b);
        return 1;
}

static int method_archive_paths(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return method_batch(m, userdata, job_archive, error);
}

static int method_restore_paths(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return method_batch(m, userdata, job_restore, error);
}

static int method_release_paths(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return method_batch(m, userdata, job_release, error);
}

static int method_file_status(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        sd_bus_message *reply = NULL;
        char **paths = NULL;
        int r, n;

        if ((n = read_paths(m, &paths, error)) < 0)
                return n;
        r = array_reply_open(m, "(sssstt)", &reply);
        for (int i = 0; r >= 0 && i < n; i++) {
                struct file_status st = { .tenant = "", .state = "" };
                char msg[512] = "";
                job_file_status(t, paths[i], &st, msg, sizeof(msg));
                r = sd_bus_message_append(reply, "(sssstt)", paths[i], msg, st.tenant, st.state, st.size, st.resident);
        }
        strv_free(paths);
        return array_reply_send(reply, r);
}

static int method_tenant_status(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        sd_bus_message *reply = NULL;
        int r;
        (void)error;

        r = array_reply_open(m, "(sssssutttttttttt)", &reply);
        for (size_t i = 0; r >= 0 && i < t->n_tenants; i++) {
                struct tenant *tn = &t->tenants[i];
                struct tenant_usage u;
                job_tenant_usage(tn, &u);
                r = sd_bus_message_append(reply, "(sssssutttttttttt)", tn->cfg->name, tn->cfg->subvolume, tn->cfg->mount,
                                          tn->cfg->backend, worker_state_to_string(tn->worker.state),
                                          (uint32_t)tn->worker.pid, u.resident_bytes, u.released_bytes,
                                          u.files[USAGE_RESIDENT], u.files[USAGE_ARCHIVED], u.files[USAGE_PARTIAL],
                                          u.files[USAGE_RELEASED], u.files[USAGE_DIRTY], tn->counters.fills,
                                          tn->counters.fill_bytes, tn->counters.fill_errors);
        }
        return array_reply_send(reply, r);
}

static int method_list_tenants(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        sd_bus_message *reply = NULL;
        int r;
        (void)error;

        r = array_reply_open(m, "(so)", &reply);
        for (size_t i = 0; r >= 0 && i < t->n_tenants; i++) {
                _cleanup_free_ char *path = tenant_bus_path(&t->tenants[i]);
                r = path ? sd_bus_message_append(reply, "(so)", t->tenants[i].cfg->name, path) : -ENOMEM;
        }
        return array_reply_send(reply, r);
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

static int method_reload_policy(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        _cleanup_free_ char *why = NULL;
        int r;

        if ((r = bus_check_admin(t, m, error)) < 0)
                return r;
        r = tierd_reload_policy(t, &why);
        if (r == -EINVAL)
                return sd_bus_error_set(error, ERROR_INVALID_POLICY, why ?: "invalid policy");
        if (r == -EXDEV)
                return sd_bus_error_set(error, ERROR_NEEDS_RESTART, why ?: "needs a restart");
        if (r < 0)
                return r;
        sd_bus_emit_signal(t->bus, TIERD_BUS_PATH, TIERD_BUS_MANAGER, "PolicyReloaded", "s", t->policy_path);
        return sd_bus_reply_method_return(m, "");
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("ArchivePaths", SD_BUS_ARGS("as", paths), SD_BUS_RESULT("a(ss)", results),
                                method_archive_paths, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ReleasePaths", SD_BUS_ARGS("as", paths), SD_BUS_RESULT("a(ss)", results),
                                method_release_paths, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RestorePaths", SD_BUS_ARGS("as", paths), SD_BUS_RESULT("a(ss)", results),
                                method_restore_paths, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("FileStatus", SD_BUS_ARGS("as", paths), SD_BUS_RESULT("a(sssstt)", files),
                                method_file_status, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("TenantStatus", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(sssssutttttttttt)", tenants),
                                method_tenant_status, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListTenants", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(so)", tenants), method_list_tenants,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetTenant", SD_BUS_ARGS("s", name), SD_BUS_RESULT("o", tenant), method_get_tenant,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("ReloadPolicy", "", "", method_reload_policy, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("PolicyReloaded", SD_BUS_ARGS("s", path), 0),
        SD_BUS_SIGNAL_WITH_ARGS("WorkerStarted", SD_BUS_ARGS("s", tenant, "o", path, "u", pid), 0),
        SD_BUS_SIGNAL_WITH_ARGS("WorkerExited", SD_BUS_ARGS("s", tenant, "o", path, "u", pid, "s", how, "i", status), 0),
        SD_BUS_VTABLE_END,
};

int manager_bus_open(struct tierd *t) {
        int r = sd_bus_open_system(&t->bus);
        if (r < 0)
                return log_error_errno(r, "cannot connect to the system bus (DBUS_SYSTEM_BUS_ADDRESS?): %m");
        r = sd_bus_add_object_vtable(t->bus, NULL, TIERD_BUS_PATH, TIERD_BUS_MANAGER, manager_vtable, t);
        if (r < 0)
                return log_error_errno(r, "cannot publish %s: %m", TIERD_BUS_PATH);
        r = tenant_bus_publish(t);
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
        if (r < 0)
                return log_error_errno(r, "sd_bus_attach_event: %m");
        return 0;
}
