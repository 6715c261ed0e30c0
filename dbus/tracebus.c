/* SPDX-License-Identifier: MIT */
/*
 * Access traces on the bus (supervisor/traces/):
 * StartTrace(s tenant, s name): the tenant's host readers get the trace
 * fetched ahead of them, and their first touches for its trace_window are
 * recorded and merged into it (containers: AttachContainer's Trace option).
 * GetTrace(s tenant, s name) -> (u runs, t bytes, a(sttu) files): the
 * trace as stored; per file its path, bytes, ranges, and the runs that
 * touched it most. Root only: a trace names the tenant's files.
 */
#include "tracebus.h"

#include <errno.h>
#include <string.h>

#include "access.h"
#include "log.h"
#include "macro.h"
#include "prefetch.h"
#include "trace.h"
#include "traceformat.h"

#define ERROR_NO_SUCH_TENANT "org.tierd1.Error.NoSuchTenant"
#define ERROR_NO_SUCH_TRACE "org.tierd1.Error.NoSuchTrace"
#define ERROR_INVALID_ARGS "org.tierd1.Error.InvalidArguments"
#define ERROR_BUSY "org.tierd1.Error.Busy"
#define ERROR_TRACE_REFUSED "org.tierd1.Error.TraceRefused"

static int read_args(sd_bus_message *m, struct tierd *t, struct tenant **tn, const char **name, sd_bus_error *error) {
        const char *tenant;
        int r = sd_bus_message_read(m, "ss", &tenant, name);
        if (r < 0)
                return r;
        if ((r = bus_check_root(m, error)) != 0)
                return r;
        if (!(*tn = tierd_find_tenant(t, tenant)))
                return sd_bus_error_setf(error, ERROR_NO_SUCH_TENANT, "no tenant \"%.64s\"", tenant);
        if (!trace_name_valid(*name))
                return sd_bus_error_set(error, ERROR_INVALID_ARGS, TRACE_NAME_RULE);
        return 0;
}

int trace_bus_method_start(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tenant *tn;
        const char *name;
        int r = read_args(m, userdata, &tn, &name, error);

        if (r != 0)
                return r;
        if (tn->recording || tn->prefetch)
                return sd_bus_error_setf(error, ERROR_BUSY, "tenant %s: a host trace is running already",
                                         tn->cfg->name);
        if ((r = prefetch_start(tn, NULL, name)) == -EOPNOTSUPP)
                return sd_bus_error_setf(error, SD_BUS_ERROR_NOT_SUPPORTED,
                                         "tenant %s: traces are off (its trace_window is 0)", tn->cfg->name);
        if (r < 0)
                return sd_bus_error_set_errnof(error, -r, "cannot fetch trace %s ahead: %m", name);
        if ((r = trace_record_start(tn, NULL, name)) < 0) {
                if (tn->prefetch)
                        prefetch_cancel(tn->prefetch);
                return sd_bus_error_set_errnof(error, -r, "cannot record trace %s: %m", name);
        }
        return sd_bus_reply_method_return(m, NULL);
}

static int append_files(sd_bus_message *reply, const struct trace *t) {
        int r = sd_bus_message_open_container(reply, 'a', "(sttu)");
        for (size_t i = 0; r >= 0 && i < t->n_files; i++) {
                const struct trace_file *f = &t->files[i];
                uint64_t bytes = 0;
                uint32_t seen = 0;
                for (size_t j = 0; j < f->n; j++) {
                        bytes += f->r[j].end - f->r[j].start;
                        seen = MAX(seen, f->r[j].seen);
                }
                r = sd_bus_message_append(reply, "(sttu)", f->path, bytes, (uint64_t)f->n, seen);
        }
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static void on_read(void *userdata, int error, const char *why, const struct trace *t) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = userdata, *reply = NULL;
        int r;

        if (error == -ENOENT)
                r = sd_bus_reply_method_errorf(m, ERROR_NO_SUCH_TRACE, "no trace of that name is stored yet");
        else if (error == -EINVAL)
                r = sd_bus_reply_method_errorf(m, ERROR_TRACE_REFUSED, "the stored trace is refused: %s", why);
        else if (error < 0)
                r = sd_bus_reply_method_errnof(m, -error, "cannot read the trace: %m");
        else if ((r = sd_bus_message_new_method_return(m, &reply)) >= 0 &&
                 (r = sd_bus_message_append(reply, "ut", t->runs, trace_bytes(t))) >= 0 &&
                 (r = append_files(reply, t)) >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0)
                log_debug("GetTrace: cannot reply (the caller left?): %s", strerror(-r));
}

int trace_bus_method_get(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tenant *tn;
        const char *name;
        int r = read_args(m, userdata, &tn, &name, error);

        if (r != 0)
                return r;
        sd_bus_message_ref(m);
        if ((r = trace_read(tn, name, on_read, m)) < 0) {
                sd_bus_message_unref(m);
                return sd_bus_error_set_errnof(error, -r, "cannot read trace %s: %m", name);
        }
        return 1;
}
