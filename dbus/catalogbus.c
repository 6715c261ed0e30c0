/* SPDX-License-Identifier: MIT */
/*
 * ImportTenant(s tenant, s backend, t at_usec, t flags) -> s summary: makes
 * the tree the tenant's catalog holds (supervisor/store/catalog.h) as released
 * stubs; flags 1: files keep their setuid and setgid bits.
 * CollectGarbage(s tenant, b dry_run) -> s summary: deletes what nothing
 * refers to in the tenant's store (supervisor/store/gc.h).
 * AuditTenant(s tenant, b repair) -> (s summary, a(sss) findings): stubs,
 * catalog and store compared (supervisor/store/audit.h).
 * The replies come when they are done (an import of 100,000 files takes
 * seconds); meanwhile a Job object shows how far each is.
 * StartImport, StartCollectGarbage and StartAudit take the same arguments
 * and reply at once with the Job (a D-Bus call need not wait for hours);
 * the manager's TaskFinished(u id, o job, s operation, s result, s summary,
 * a(sss) findings), sent to the caller alone (findings name the tenant's
 * files), then says how it ended, just before its JobRemoved.
 */
#include "catalogbus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "catalog.h"
#include "audit.h"
#include "gc.h"
#include "jobbus.h"
#include "log.h"
#include "macro.h"
#include "managerbus.h"
#include "tierd.h"

#define ERROR_NO_SUCH_TENANT "org.tierd1.Error.NoSuchTenant"
#define ERROR_INVALID_ARGS "org.tierd1.Error.InvalidArguments"
#define ERROR_NO_CATALOG "org.tierd1.Error.NoCatalog"
#define ERROR_BUSY "org.tierd1.Error.Busy"
#define ERROR_IMPORT_FAILED "org.tierd1.Error.ImportFailed"
#define ERROR_SHUTTING_DOWN "org.tierd1.Error.ShuttingDown"
#define ERROR_GC_FAILED "org.tierd1.Error.CollectFailed"
#define ERROR_AUDIT_FAILED "org.tierd1.Error.AuditFailed"

static void reply_when_done(sd_bus_message *m, int error, const char *message, const char *failed) {
        int r = error < 0 ? sd_bus_reply_method_errorf(m, error == -EBUSY ? ERROR_BUSY : failed, "%s", message)
                          : sd_bus_reply_method_return(m, "s", message);
        if (r < 0)
                log_debug("%s: cannot reply (the caller left?): %s", sd_bus_message_get_member(m), strerror(-r));
}

/* An import's, a collection's or an audit's call: its reply waits (or,
 * detached, went at once with the job), and its job shows the progress. */
struct task_call {
        struct tierd *t;
        struct tenant *tn;
        sd_bus_message *m;
        uint32_t job;
        const char *failed;    /* the error name of a failure */
        const char *operation; /* its job's */
        bool detached;         /* Start*: the end is told by TaskFinished */
};

/* AuditTenant's findings, in its reply and in TaskFinished. */
static int append_findings(sd_bus_message *m, const struct audit_finding *f, size_t n) {
        int r = sd_bus_message_open_container(m, 'a', "(sss)");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = sd_bus_message_append(m, "(sss)", f[i].kind, f[i].name, f[i].detail);
        return r < 0 ? r : sd_bus_message_close_container(m);
}

/* A task's job, by its object path. */
/* A detached task's TaskFinished, for its caller only (the findings name
 * files of the tenant's): n findings, or none. */
static sd_bus_message *task_finished_new(struct task_call *c, int error, const char *message,
                                         const struct audit_finding *f, size_t n) {
        sd_bus_message *s = NULL;
        char path[64];
        int r;

        job_bus_path(c->job, path);
        r = sd_bus_message_new_signal(c->t->bus, &s, TIERD_BUS_PATH, TIERD_BUS_MANAGER, "TaskFinished");
        if (r >= 0)
                r = sd_bus_message_set_destination(s, sd_bus_message_get_sender(c->m));
        if (r >= 0)
                r = sd_bus_message_append(s, "uosss", c->job, path, c->operation,
                                          error == -ECANCELED ? "canceled" : error < 0 ? "failed" : "done", message);
        if (r >= 0)
                r = append_findings(s, f, n);
        if (r < 0)
                s = sd_bus_message_unref(s);
        return s;
}

/* Its end: the job sends TaskFinished just before JobRemoved, so both
 * follow the Start* reply even when the task ended before it. */
static void task_finished(struct task_call *c, int error, const char *message, const struct audit_finding *f,
                          size_t n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *full = NULL, *small = NULL;
        if (c->t->bus) {
                full = task_finished_new(c, error, message, f, n);
                small = n ? task_finished_new(c, error, message, NULL, 0) : NULL;
                if (!full && !small)
                        log_error("cannot make TaskFinished for job %u: its caller will not hear how it ended", c->job);
        }
        job_bus_task_end_with(c->t, c->job, error, message, full ?: small, full ? small : NULL);
}

static struct task_call *task_call_new(struct tierd *t, struct tenant *tn, sd_bus_message *m, const char *failed,
                                       const char *operation, bool detached) {
        struct task_call *c = calloc(1, sizeof(*c));
        if (c)
                *c = (struct task_call){ .t = t, .tn = tn, .m = sd_bus_message_ref(m), .failed = failed,
                                         .operation = operation, .detached = detached };
        return c;
}

/* A Start* method's reply: the job, which may have ended already (its
 * TaskFinished and JobRemoved then follow this reply). */
static int reply_job(sd_bus_message *m, uint32_t job) {
        char path[64];
        job_bus_path(job, path);
        return sd_bus_reply_method_return(m, "o", path);
}

static void task_call_free(struct task_call *c) {
        sd_bus_message_unref(c->m);
        free(c);
}

static void on_task_done(void *userdata, int error, const char *message) {
        struct task_call *c = userdata;
        if (c->detached)
                task_finished(c, error, message, NULL, 0);
        else {
                batch_task_end(c->t, c->job, error, message);
                reply_when_done(c->m, error, message, c->failed);
        }
        task_call_free(c);
}

static void on_task_progress(void *userdata, const char *phase, uint64_t done, uint64_t total) {
        struct task_call *c = userdata;
        batch_task_progress(c->t, c->job, phase, done, total);
}

static void on_collect_cancel(void *userdata) {
        struct task_call *c = userdata;
        gc_stop(c->tn);
}

/* The checks both methods start with: root, not stopping, a tenant. NULL
 * and *r (a negative errno) with error set if not. */
static struct tenant *find_tenant_for_root(sd_bus_message *m, struct tierd *t, const char *name, int *r,
                                           sd_bus_error *error) {
        struct tenant *tn = NULL;
        if ((*r = bus_check_root(m, error)) != 0)
                return NULL;
        if (t->stopping)
                *r = sd_bus_error_set(error, ERROR_SHUTTING_DOWN, "tierd is stopping");
        else if (!(tn = tierd_find_tenant(t, name)))
                *r = sd_bus_error_setf(error, ERROR_NO_SUCH_TENANT, "no tenant named '%.64s' in the policy", name);
        if (!tn && *r >= 0)
                *r = -EINVAL;
        return tn;
}

static int import_call(sd_bus_message *m, struct tierd *t, bool detached, sd_bus_error *error) {
        const char *name, *backend;
        struct tenant *tn;
        uint64_t at, flags;
        int r;

        r = sd_bus_message_read(m, "sstt", &name, &backend, &at, &flags);
        if (r < 0)
                return r;
        if (flags & ~CATALOG_IMPORT_FLAGS)
                return sd_bus_error_setf(error, ERROR_INVALID_ARGS, "unknown import flags 0x%llx (known: 0x%llx)",
                                         (unsigned long long)flags, (unsigned long long)CATALOG_IMPORT_FLAGS);
        if (!(tn = find_tenant_for_root(m, t, name, &r, error)))
                return r;
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
        struct task_call *c = task_call_new(t, tn, m, ERROR_IMPORT_FAILED, "import", detached);
        if (!c)
                return -ENOMEM;
        /* First: the import may end before catalog_import returns. No
         * caller can stop it half way (CancelJob); a stop of tierd ends
         * it, and the next start imports again. */
        uint32_t job = c->job = batch_task_start(t, "import", NULL, c);
        if (detached && !job) { /* its end could not be told */
                task_call_free(c);
                return -ENOMEM;
        }
        r = catalog_import(tn, at, flags, on_task_done, on_task_progress, c);
        if (r < 0) {
                batch_task_end(t, c->job, r, "refused");
                task_call_free(c);
                if (r == -EALREADY || r == -EBUSY)
                        return sd_bus_error_setf(error, ERROR_BUSY, "tenant %s: %s", tn->cfg->name,
                                                 r == -EBUSY ? "a garbage collection is running"
                                                             : "an import is running already");
                return sd_bus_error_set_errno(error, r);
        }
        log_info("tenant %s: import from its catalog in %s started", tn->cfg->name, backend);
        /* The reply comes when it is done, or now with the job. */
        return detached ? reply_job(m, job) : 1;
}

int catalog_bus_method_import(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return import_call(m, userdata, false, error);
}

int catalog_bus_method_start_import(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return import_call(m, userdata, true, error);
}

/* CollectGarbage's and AuditTenant's first steps: the tenant, a root
 * caller, a catalog; the call and its job. NULL with *r and error set if
 * not. */
static struct task_call *task_call_begin(sd_bus_message *m, struct tierd *t, const char *name, const char *failed,
                                         const char *operation, bool detached, void (*cancel)(void *userdata),
                                         int *r, sd_bus_error *error) {
        struct tenant *tn = find_tenant_for_root(m, t, name, r, error);
        struct task_call *c;

        if (!tn)
                return NULL;
        if (!tn->cfg->catalog) {
                *r = sd_bus_error_setf(error, ERROR_NO_CATALOG,
                                       "tenant %s keeps no catalog: set \"catalog\": true in its policy first (what "
                                       "the catalog names is what is kept)",
                                       tn->cfg->name);
                return NULL;
        }
        if (!(c = task_call_new(t, tn, m, failed, operation, detached))) {
                *r = -ENOMEM;
                return NULL;
        }
        c->job = batch_task_start(t, operation, cancel, c);
        if (detached && !c->job) { /* its end could not be told */
                task_call_free(c);
                *r = -ENOMEM;
                return NULL;
        }
        return c;
}

/* The task did not start: its job ends, the caller is told why. */
static int task_call_refused(struct task_call *c, int r, const char *why, sd_bus_error *error) {
        const char *tenant = c->tn->cfg->name;
        batch_task_end(c->t, c->job, r, why ?: strerror(-r));
        r = sd_bus_error_setf(error, r == -EBUSY ? ERROR_BUSY : c->failed, "tenant %s: %s", tenant,
                              why ?: strerror(-r));
        task_call_free(c);
        return r;
}

static int collect_call(sd_bus_message *m, struct tierd *t, bool detached, sd_bus_error *error) {
        const char *name, *why = NULL;
        struct task_call *c;
        int dry_run, r;

        r = sd_bus_message_read(m, "sb", &name, &dry_run);
        if (r < 0)
                return r;
        if (!(c = task_call_begin(m, t, name, ERROR_GC_FAILED, dry_run ? "gc-dry-run" : "gc", detached,
                                  on_collect_cancel, &r, error)))
                return r;
        uint32_t job = c->job;
        r = gc_start(c->tn, dry_run, on_task_done, on_task_progress, c, &why);
        if (r < 0)
                return task_call_refused(c, r, why, error);
        return detached ? reply_job(m, job) : 1;
}

int catalog_bus_method_collect(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return collect_call(m, userdata, false, error);
}

int catalog_bus_method_start_collect(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return collect_call(m, userdata, true, error);
}

static void on_audited(void *userdata, int error, const char *message, const struct audit_finding *f, size_t n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct task_call *c = userdata;
        int r;

        if (c->detached) {
                task_finished(c, error, message, f, n);
                task_call_free(c);
                return;
        }
        batch_task_end(c->t, c->job, error, message);
        if (error < 0) { /* it could not run */
                reply_when_done(c->m, error, message, c->failed);
                task_call_free(c);
                return;
        }
        r = sd_bus_message_new_method_return(c->m, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "s", message);
        if (r >= 0)
                r = append_findings(reply, f, n);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0)
                log_debug("AuditTenant: cannot reply (the caller left?): %s", strerror(-r));
        task_call_free(c);
}

static int audit_call(sd_bus_message *m, struct tierd *t, bool detached, sd_bus_error *error) {
        const char *name, *why = NULL;
        struct task_call *c;
        int repair, r;

        r = sd_bus_message_read(m, "sb", &name, &repair);
        if (r < 0)
                return r;
        if (!(c = task_call_begin(m, t, name, ERROR_AUDIT_FAILED, repair ? "audit-repair" : "audit", detached, NULL,
                                  &r, error)))
                return r;
        uint32_t job = c->job;
        r = audit_start(c->tn, repair, on_audited, on_task_progress, c, &why);
        if (r < 0)
                return task_call_refused(c, r, why, error);
        return detached ? reply_job(m, job) : 1;
}

int catalog_bus_method_audit(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return audit_call(m, userdata, false, error);
}

int catalog_bus_method_start_audit(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return audit_call(m, userdata, true, error);
}
