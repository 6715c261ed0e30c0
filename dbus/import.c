/* SPDX-License-Identifier: MIT */
/*
 * ImportTenant(s tenant, s backend, t at_usec) -> s summary: makes the tree
 * the tenant's catalog holds (supervisor/catalog.h) as released stubs. The
 * reply comes when it is done: an import of 100,000 files takes seconds.
 */
#include "import.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "catalog.h"
#include "log.h"
#include "macro.h"
#include "tierd.h"

#define ERROR_NO_SUCH_TENANT "org.tierd1.Error.NoSuchTenant"
#define ERROR_INVALID_ARGS "org.tierd1.Error.InvalidArguments"
#define ERROR_NO_CATALOG "org.tierd1.Error.NoCatalog"
#define ERROR_BUSY "org.tierd1.Error.Busy"
#define ERROR_IMPORT_FAILED "org.tierd1.Error.ImportFailed"
#define ERROR_SHUTTING_DOWN "org.tierd1.Error.ShuttingDown"

static void on_imported(void *userdata, int error, const char *message) {
        sd_bus_message *m = userdata;
        int r = error < 0 ? sd_bus_reply_method_errorf(m, error == -EBUSY ? ERROR_BUSY : ERROR_IMPORT_FAILED, "%s",
                                                       message)
                          : sd_bus_reply_method_return(m, "s", message);
        if (r < 0)
                log_debug("ImportTenant: cannot reply (the caller left?): %s", strerror(-r));
        sd_bus_message_unref(m);
}

int catalog_bus_method_import(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct tierd *t = userdata;
        const char *name, *backend;
        struct tenant *tn;
        uint64_t at;
        int r;

        r = sd_bus_message_read(m, "sst", &name, &backend, &at);
        if (r < 0)
                return r;
        if ((r = bus_check_root(m, error)) < 0)
                return r;
        if (t->stopping)
                return sd_bus_error_set(error, ERROR_SHUTTING_DOWN, "tierd is stopping");
        if (!(tn = tierd_find_tenant(t, name)))
                return sd_bus_error_setf(error, ERROR_NO_SUCH_TENANT, "no tenant named '%.64s' in the policy", name);
        /* The stubs name objects of the tenant's own store: the catalog is
         * read from there, and nowhere else. */
        if (strcmp(backend, tn->cfg->backend) != 0)
                return sd_bus_error_setf(error, ERROR_INVALID_ARGS,
                                         "tenant %s keeps its objects in %s, not %.256s: give the tenant that "
                                         "backend in the policy first, then import from it",
                                         tn->cfg->name, tn->cfg->backend, backend);
        if (!tn->cfg->catalog)
                return sd_bus_error_setf(error, ERROR_NO_CATALOG,
                                         "tenant %s keeps no catalog: set \"catalog\": true in its policy first",
                                         tn->cfg->name);
        sd_bus_message_ref(m);
        r = catalog_import(tn, at, on_imported, m);
        if (r < 0) {
                sd_bus_message_unref(m);
                if (r == -EALREADY)
                        return sd_bus_error_setf(error, ERROR_BUSY, "tenant %s: an import is running already",
                                                 tn->cfg->name);
                return sd_bus_error_set_errno(error, r);
        }
        log_info("tenant %s: import from its catalog in %s started", tn->cfg->name, backend);
        return 1; /* the reply comes when it is done */
}
