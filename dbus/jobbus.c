/* SPDX-License-Identifier: MIT */
/*
 * org.tierd1.Job objects: one per batch, found by its id in the path (a
 * fallback vtable, as tenants and containers are), so an object lives
 * exactly as long as its batch is listed.
 */
#include "jobbus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "log.h"
#include "macro.h"
#include "managerbus.h"
#include "property.h"

/* What the face keeps of a batch: a task's TaskFinished, and the same
 * without its findings should the first not go. */
struct job_face {
        sd_bus_message *finished, *finished_small;
};

const char *bus_job_error_name(int error) {
        switch (error) {
        case -ENOENT: return "org.tierd1.Error.NoSuchFile";
        case -EXDEV: return "org.tierd1.Error.NotInTenant";
        case -EINVAL: return "org.tierd1.Error.NotRegularFile";
        case -ENODATA: return "org.tierd1.Error.NotArchived";
        case -EPINNED: return "org.tierd1.Error.Pinned";
        case -EBUSY: return "org.tierd1.Error.Busy";
        case -ECANCELED: return "org.tierd1.Error.Canceled";
        case -EAGAIN: return "org.tierd1.Error.TryAgain";
        default: return "org.tierd1.Error.Failed";
        }
}

void job_bus_path(uint32_t id, char path[static 64]) {
        snprintf(path, 64, "%s/%u", TIERD_BUS_JOB_PREFIX, id);
}

/* The batch at path: only as job_bus_path writes it (no leading zero). */
static struct batch *job_from_path(struct tierd *t, const char *path) {
        size_t n = strlen(TIERD_BUS_JOB_PREFIX);
        char *end;

        if (strncmp(path, TIERD_BUS_JOB_PREFIX "/", n + 1) != 0 || path[n + 1] < '1' || path[n + 1] > '9')
                return NULL;
        errno = 0;
        unsigned long id = strtoul(path + n + 1, &end, 10);
        if (errno || *end || id > UINT32_MAX)
                return NULL;
        return batch_find(t, (uint32_t)id);
}

static int job_find_object(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                           sd_bus_error *error) {
        struct batch *b = job_from_path(userdata, path);
        (void)bus, (void)interface, (void)error;
        if (!b)
                return 0;
        *found = b;
        return 1;
}

static int job_enumerate(sd_bus *bus, const char *prefix, void *userdata, char ***nodes, sd_bus_error *error) {
        struct tierd *t = userdata;
        char **v = NULL;
        size_t n = 0;
        (void)bus, (void)prefix, (void)error;

        for (struct batch *b = t->batches; b; b = b->next) {
                char path[64];
                job_bus_path(b->id, path);
                if (bus_nodes_add(&v, &n, strdup(path)) < 0)
                        return -ENOMEM;
        }
        return bus_nodes_done(v, nodes);
}

GETTER(get_state) {
        (void)bus, (void)path, (void)interface, (void)property, (void)error;
        return sd_bus_message_append(reply, "s", batch_state(userdata));
}

/* Files, or a long task's steps (batch_total, batch_done). */
GETTER(get_count) {
        const struct batch *b = userdata;
        uint64_t n = strcmp(property, "FilesTotal") == 0 ? batch_total(b) : strcmp(property, "FilesDone") == 0 ? batch_done(b) : b->failed;
        (void)bus, (void)path, (void)interface, (void)error;
        return sd_bus_message_append(reply, "u", (uint32_t)MIN(n, (uint64_t)UINT32_MAX));
}

static int method_job_cancel(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct batch *b = userdata;
        char path[64];
        int r = bus_check_admin(b->t, m, error);
        if (r != 0)
                return r;
        job_bus_path(b->id, path);
        if (batch_cancel(b->t, b->id) < 0)
                return sd_bus_error_setf(error, BUS_ERROR_NOT_CANCELABLE, "job %s cannot be canceled", path);
        return sd_bus_reply_method_return(m, "");
}

static const sd_bus_vtable job_vtable[] = {
        SD_BUS_VTABLE_START(0),
        BUS_U32("Id", struct batch, id, SD_BUS_VTABLE_PROPERTY_CONST),
        BUS_STRING("Operation", struct batch, operation, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("State", "s", get_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("FilesTotal", "u", get_count, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("FilesDone", "u", get_count, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("FilesFailed", "u", get_count, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        BUS_STRING("Phase", struct batch, phase, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD("Cancel", "", "", method_job_cancel, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

int job_bus_publish(struct tierd *t) {
        int r = sd_bus_add_fallback_vtable(t->bus, NULL, TIERD_BUS_JOB_PREFIX, TIERD_BUS_JOB, job_vtable,
                                           job_find_object, t);
        if (r >= 0)
                r = sd_bus_add_node_enumerator(t->bus, NULL, TIERD_BUS_JOB_PREFIX, job_enumerate, t);
        if (r < 0)
                return log_error_errno(r, "cannot publish the job objects: %m");
        return 0;
}

void job_bus_added(struct batch *b) {
        char path[64];
        job_bus_path(b->id, path);
        sd_bus_emit_object_added(b->t->bus, path);
        sd_bus_emit_signal(b->t->bus, TIERD_BUS_PATH, TIERD_BUS_MANAGER, "JobNew", "uos", b->id, path, b->operation);
}

void job_bus_changed(struct batch *b) {
        char path[64];
        job_bus_path(b->id, path);
        sd_bus_emit_properties_changed(b->t->bus, path, TIERD_BUS_JOB, "State", "FilesDone", "FilesFailed",
                                       "FilesTotal", "Phase", NULL);
}

static int job_send_removed(struct batch *b, const char *path, const char *result, bool with_errors) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r = sd_bus_message_new_signal(b->t->bus, &m, TIERD_BUS_PATH, TIERD_BUS_MANAGER, "JobRemoved");
        if (r >= 0)
                r = sd_bus_message_append(m, "uossuu", b->id, path, b->operation, result, (uint32_t)b->done,
                                          (uint32_t)b->failed);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(uss)");
        for (size_t i = 0; r >= 0 && with_errors && i < b->n_errors; i++)
                r = sd_bus_message_append(m, "(uss)", b->errors[i].index, bus_job_error_name(b->errors[i].error),
                                          b->errors[i].message);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r < 0 ? r : sd_bus_send(b->t->bus, m, NULL);
}

/* Every job ends with a JobRemoved: clients wait for it. A task's
 * TaskFinished goes just before. */
void job_bus_removed(struct batch *b, const char *result) {
        struct job_face *f = TAKE_PTR(b->face_data);
        char path[64];

        job_bus_path(b->id, path);
        if (f && f->finished) {
                int k = sd_bus_send(b->t->bus, f->finished, NULL);
                if (k < 0 && f->finished_small)
                        k = sd_bus_send(b->t->bus, f->finished_small, NULL);
                if (k < 0)
                        log_error_errno(k, "cannot send TaskFinished for job %u: %m", b->id);
        }
        if (f) {
                sd_bus_message_unref(f->finished);
                sd_bus_message_unref(f->finished_small);
                free(f);
        }
        int r = job_send_removed(b, path, result, true);
        if (r < 0) /* never lost for the sake of one message */
                r = job_send_removed(b, path, result, false);
        if (r < 0)
                log_error_errno(r, "cannot send JobRemoved for job %u: %m", b->id);
        sd_bus_emit_object_removed(b->t->bus, path);
}

void job_bus_task_end_with(struct tierd *t, uint32_t id, int error, const char *message, sd_bus_message *finished,
                           sd_bus_message *finished_small) {
        struct batch *b = batch_find(t, id);
        if (b && !b->face_data && finished && (b->face_data = calloc(1, sizeof(struct job_face)))) {
                struct job_face *f = b->face_data;
                f->finished = sd_bus_message_ref(finished);
                f->finished_small = sd_bus_message_ref(finished_small);
        }
        batch_task_end(t, id, error, message);
}

int job_bus_cancel(struct tierd *t, const char *path) {
        struct batch *b = job_from_path(t, path);
        return b ? batch_cancel(t, b->id) : 0;
}

/* ListJobs() -> a(uosuuu): each job's id, object, operation, and its
 * files (or, for a task, items) total, done and failed: what runs and how
 * far, without a call per job. Anyone may ask (like the Job objects). */
int job_bus_method_list(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct tierd *t = userdata;
        (void)error;
        int r = sd_bus_message_new_method_return(m, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(uosuuu)");
        for (const struct batch *b = t->batches; r >= 0 && b; b = b->next) {
                char path[64];
                job_bus_path(b->id, path);
                r = sd_bus_message_append(reply, "(uosuuu)", b->id, path, b->operation, (uint32_t)batch_total(b),
                                          (uint32_t)batch_done(b), (uint32_t)b->failed);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}
