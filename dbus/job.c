/* SPDX-License-Identifier: MIT */
/*
 * org.tierd1.Job objects. Jobs run in the order they were made; at most
 * JOB_FILES_RUNNING files at a time over all jobs, since each holds an fd
 * and tierd keeps its fds for readers' events.
 */
#include "job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "utf8.h"

#define JOB_FILES_RUNNING 16
#define JOB_STARTS_PER_TURN 64 /* then the event loop serves readers again */
#define JOB_PROGRESS_EVERY_USEC (250 * 1000ull) /* FilesDone changes: at most this often */
#define JOB_ERRORS_MAX 1000                      /* per job, in JobRemoved; the rest are counted */

struct job_error {
        uint32_t index;
        const char *name;
        char *message;
};

struct bus_job {
        struct tierd *t;
        struct bus_job *next;
        uint32_t id;
        char *path;
        const char *operation;
        file_job_t fn;
        sd_bus_slot *slot;
        struct file_ref *refs; /* not started yet; started ones move to their item */
        size_t n, started, done, failed, running;
        struct job_error *errors;
        size_t n_errors;
        bool canceled;
        bool running_emitted; /* the State last signalled */
        uint64_t progress_usec;
        /* A task job (bus_task_job_start): one task, not files. */
        bool task, task_ended;
        const char *phase; /* static text */
        uint64_t task_done, task_total; /* its items (n and done count files only) */
        void (*cancel)(void *userdata);
        void *cancel_userdata;
        /* Sent just before JobRemoved (after the Start* reply): the
         * task's TaskFinished, and the same without its findings should
         * the first not go. */
        sd_bus_message *finished, *finished_small;
};

/* A file in progress: owns its file_ref, and finds its job by id when done,
 * so a job may go (teardown) while files are still in progress. */
struct job_item {
        struct tierd *t;
        uint32_t job_id;
        uint32_t index;
        struct file_ref ref;
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
        default: return "org.tierd1.Error.Failed";
        }
}

static struct bus_job *job_find(struct tierd *t, uint32_t id) {
        for (struct bus_job *j = t->jobs; j; j = j->next)
                if (j->id == id)
                        return j;
        return NULL;
}

static void job_free(struct bus_job *j) {
        sd_bus_slot_unref(j->slot);
        for (size_t i = j->started; i < j->n; i++)
                file_ref_done(&j->refs[i]);
        free(j->refs);
        for (size_t i = 0; i < j->n_errors; i++)
                free(j->errors[i].message);
        free(j->errors);
        sd_bus_message_unref(j->finished);
        sd_bus_message_unref(j->finished_small);
        free(j->path);
        free(j);
}

static const char *job_state(const struct bus_job *j) {
        return j->running > 0 || j->task ? "running" : "waiting";
}

static void job_emit_progress(struct bus_job *j) {
        uint64_t t_now = 0;
        bool state_changed = (j->running > 0) != j->running_emitted;
        sd_event_now(j->t->event, CLOCK_MONOTONIC, &t_now);
        if (!j->t->bus || (!state_changed && t_now - j->progress_usec < JOB_PROGRESS_EVERY_USEC))
                return;
        j->running_emitted = j->running > 0;
        j->progress_usec = t_now;
        sd_bus_emit_properties_changed(j->t->bus, j->path, TIERD_BUS_JOB, "State", "FilesDone", "FilesFailed",
                                       "FilesTotal", "Phase", NULL);
}

static int job_send_removed(struct bus_job *j, const char *result, bool with_errors) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r = sd_bus_message_new_signal(j->t->bus, &m, TIERD_BUS_PATH, TIERD_BUS_MANAGER, "JobRemoved");
        if (r >= 0)
                r = sd_bus_message_append(m, "uossuu", j->id, j->path, j->operation, result, (uint32_t)j->done,
                                          (uint32_t)j->failed);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(uss)");
        for (size_t i = 0; r >= 0 && with_errors && i < j->n_errors; i++)
                r = sd_bus_message_append(m, "(uss)", j->errors[i].index, j->errors[i].name, j->errors[i].message);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r < 0 ? r : sd_bus_send(j->t->bus, m, NULL);
}

/* Every job ends with a JobRemoved: clients wait for it. result is given
 * when tierd stops under the job ("aborted"). */
static void job_emit_removed(struct bus_job *j, const char *result) {
        if (!j->t->bus)
                return;
        result = result ?: j->canceled ? "canceled" : j->failed ? "failed" : "done";
        if (j->finished) {
                int k = sd_bus_send(j->t->bus, j->finished, NULL);
                if (k < 0 && j->finished_small)
                        k = sd_bus_send(j->t->bus, j->finished_small, NULL);
                if (k < 0)
                        log_error_errno(k, "cannot send TaskFinished for job %u: %m", j->id);
        }
        int r = job_send_removed(j, result, true);
        if (r < 0) /* never lost for the sake of one message */
                r = job_send_removed(j, result, false);
        if (r < 0)
                log_error_errno(r, "cannot send JobRemoved for job %u: %m", j->id);
        sd_bus_emit_object_removed(j->t->bus, j->path);
}

static void job_record_error(struct bus_job *j, uint32_t index, int error, const char *message) {
        j->failed++;
        if (j->n_errors >= JOB_ERRORS_MAX)
                return;
        struct job_error *e = realloc(j->errors, (j->n_errors + 1) * sizeof(*e));
        if (!e)
                return;
        j->errors = e;
        /* Escaped again: a message cut at its buffer's end may end mid-character. */
        e[j->n_errors++] = (struct job_error){ .index = index, .name = bus_job_error_name(error),
                                               .message = utf8_escape(message ?: strerror(-error)) };
        if (!e[j->n_errors - 1].message)
                j->n_errors--;
}

static void jobs_schedule(struct tierd *t);

/* Called from deep inside other modules (a worker's reply, a fill's end):
 * records, and leaves starting more to the event loop. */
static void job_item_done(void *userdata, int error, const char *message) {
        struct job_item *it = userdata;
        struct tierd *t = it->t;
        struct bus_job *j = job_find(t, it->job_id);

        t->job_files_running--;
        if (j) {
                j->running--;
                j->done++;
                if (error < 0)
                        job_record_error(j, it->index, error, message);
        }
        file_ref_done(&it->ref);
        free(it);
        jobs_schedule(t);
}

static void job_start_next(struct bus_job *j) {
        struct tierd *t = j->t;
        size_t i = j->started++;
        struct job_item *it = calloc(1, sizeof(*it));

        if (!it) {
                j->done++;
                job_record_error(j, (uint32_t)i, -ENOMEM, NULL);
                file_ref_done(&j->refs[i]);
                return;
        }
        *it = (struct job_item){ .t = t, .job_id = j->id, .index = (uint32_t)i, .ref = j->refs[i] };
        j->refs[i] = (struct file_ref){};
        j->running++;
        t->job_files_running++;
        int r = j->fn(t, &it->ref, job_item_done, it);
        if (r < 0)
                job_item_done(it, r, NULL);
}

/* From the event loop only: starts files in job order while there is room
 * (at most JOB_STARTS_PER_TURN, then readers' events get their turn), and
 * removes the jobs that are over. */
static int on_jobs_turn(sd_event_source *s, void *userdata) {
        struct tierd *t = userdata;
        unsigned starts = 0;
        bool more = false;
        (void)s;

        t->jobs_pumping = true; /* a file done inside fn() must not re-arm us mid-walk */
        for (struct bus_job *j = t->jobs; j; j = j->next)
                while (!j->canceled && j->started < j->n && t->job_files_running < JOB_FILES_RUNNING) {
                        if (starts++ == JOB_STARTS_PER_TURN) {
                                more = true;
                                break;
                        }
                        job_start_next(j);
                }
        t->jobs_pumping = false;
        for (struct bus_job **p = &t->jobs; *p;) {
                struct bus_job *j = *p;
                if (j->task ? !j->task_ended : j->running > 0 || (j->started < j->n && !j->canceled)) {
                        job_emit_progress(j);
                        p = &j->next;
                        continue;
                }
                *p = j->next;
                log_info("job %u (%s): %zu files, %zu failed%s", j->id, j->operation, j->done, j->failed,
                         j->canceled ? ", canceled" : "");
                job_emit_removed(j, NULL);
                job_free(j);
        }
        if (more)
                jobs_schedule(t);
        tierd_check_idle(t);
        return 0;
}

static void jobs_schedule(struct tierd *t) {
        int r = 0;
        if (t->jobs_pumping || !t->jobs)
                return;
        if (!t->jobs_src)
                r = sd_event_add_defer(t->event, &t->jobs_src, on_jobs_turn, t);
        if (r >= 0)
                r = sd_event_source_set_enabled(t->jobs_src, SD_EVENT_ONESHOT);
        if (r < 0)
                log_error_errno(r, "cannot schedule jobs: %m");
}

#define GETTER(fn) \
        static int fn(sd_bus *bus, const char *path, const char *interface, const char *property, \
                      sd_bus_message *reply, void *userdata, sd_bus_error *error)

GETTER(get_job_property) {
        const struct bus_job *j = userdata;
        (void)bus, (void)path, (void)interface, (void)error;
        if (strcmp(property, "Id") == 0)
                return sd_bus_message_append(reply, "u", j->id);
        if (strcmp(property, "Operation") == 0)
                return sd_bus_message_append(reply, "s", j->operation);
        if (strcmp(property, "State") == 0)
                return sd_bus_message_append(reply, "s", job_state(j));
        if (strcmp(property, "FilesTotal") == 0)
                return sd_bus_message_append(reply, "u", (uint32_t)(j->task ? j->task_total : j->n));
        if (strcmp(property, "FilesDone") == 0)
                return sd_bus_message_append(reply, "u", (uint32_t)(j->task ? j->task_done : j->done));
        if (strcmp(property, "Phase") == 0)
                return sd_bus_message_append(reply, "s", j->phase ?: "");
        return sd_bus_message_append(reply, "u", (uint32_t)j->failed);
}

static int method_job_cancel(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct bus_job *j = userdata;
        int r = bus_check_admin(j->t, m, error);
        if (r < 0)
                return r;
        if (bus_job_cancel(j->t, j->path) < 0)
                return sd_bus_error_setf(error, BUS_ERROR_NOT_CANCELABLE, "job %s cannot be canceled", j->path);
        return sd_bus_reply_method_return(m, "");
}

static const sd_bus_vtable job_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "u", get_job_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Operation", "s", get_job_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("State", "s", get_job_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("FilesTotal", "u", get_job_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("FilesDone", "u", get_job_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("FilesFailed", "u", get_job_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Phase", "s", get_job_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD("Cancel", "", "", method_job_cancel, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

/* A job with its object on the bus, not listed yet. */
static struct bus_job *job_new(struct tierd *t, const char *operation, size_t n) {
        struct bus_job *j = calloc(1, sizeof(*j));
        if (!j || !(j->refs = calloc(n ?: 1, sizeof(struct file_ref)))) {
                free(j);
                return NULL;
        }
        j->t = t;
        j->id = ++t->last_job_id;
        j->operation = operation;
        j->n = n;
        if (asprintf(&j->path, "%s/%u", TIERD_BUS_JOB_PREFIX, j->id) < 0) {
                j->path = NULL;
                job_free(j);
                return NULL;
        }
        if (sd_bus_add_object_vtable(t->bus, &j->slot, j->path, TIERD_BUS_JOB, job_vtable, j) < 0) {
                job_free(j);
                return NULL;
        }
        return j;
}

/* Appended: jobs run in the order they were made. */
static void job_add(struct tierd *t, struct bus_job *j) {
        struct bus_job **p = &t->jobs;
        while (*p)
                p = &(*p)->next;
        *p = j;
        sd_bus_emit_object_added(t->bus, j->path);
        sd_bus_emit_signal(t->bus, TIERD_BUS_PATH, TIERD_BUS_MANAGER, "JobNew", "uos", j->id, j->path, j->operation);
}

int bus_job_start(struct tierd *t, const char *operation, file_job_t fn, struct file_ref *refs, size_t n,
                  char **ret_path) {
        struct bus_job *j = job_new(t, operation, n);

        if (!j)
                return -ENOMEM;
        if (!(*ret_path = strdup(j->path))) {
                job_free(j);
                return -ENOMEM;
        }
        j->fn = fn;
        memcpy(j->refs, refs, n * sizeof(*refs));
        memset(refs, 0, n * sizeof(*refs));
        job_add(t, j);
        return 0;
}

uint32_t bus_task_job_start(struct tierd *t, const char *operation, void (*cancel)(void *userdata), void *userdata) {
        struct bus_job *j = t->bus ? job_new(t, operation, 0) : NULL;
        if (!j)
                return 0; /* the task runs anyway, without its object */
        j->task = true;
        j->cancel = cancel;
        j->cancel_userdata = userdata;
        job_add(t, j);
        return j->id;
}

void bus_task_job_progress(struct tierd *t, uint32_t id, const char *phase, uint64_t done, uint64_t total) {
        struct bus_job *j = job_find(t, id);
        if (!j)
                return;
        bool new_phase = phase != j->phase;
        j->phase = phase;
        j->task_done = done;
        j->task_total = total;
        if (new_phase)
                j->progress_usec = 0; /* a new phase is told at once */
        job_emit_progress(j);
}

void bus_task_job_end_with(struct tierd *t, uint32_t id, int error, const char *message, sd_bus_message *finished,
                           sd_bus_message *finished_small) {
        struct bus_job *j = job_find(t, id);
        if (j && !j->finished) {
                j->finished = sd_bus_message_ref(finished);
                j->finished_small = sd_bus_message_ref(finished_small);
        }
        bus_task_job_end(t, id, error, message);
}

void bus_task_job_end(struct tierd *t, uint32_t id, int error, const char *message) {
        struct bus_job *j = job_find(t, id);
        if (!j)
                return;
        j->task_ended = true;
        if (error == -ECANCELED)
                j->canceled = true;
        else if (error < 0)
                job_record_error(j, 0, error, message);
        jobs_schedule(t);
}

/* ListJobs() -> a(uosuuu): each job's id, object, operation, and its
 * files (or, for a task, items) total, done and failed: what runs and how
 * far, without a call per job. Anyone may ask (like the Job objects). */
int bus_method_list_jobs(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct tierd *t = userdata;
        (void)error;
        int r = sd_bus_message_new_method_return(m, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(uosuuu)");
        for (const struct bus_job *j = t->jobs; r >= 0 && j; j = j->next)
                r = sd_bus_message_append(reply, "(uosuuu)", j->id, j->path, j->operation,
                                          (uint32_t)(j->task ? j->task_total : j->n),
                                          (uint32_t)(j->task ? j->task_done : j->done), (uint32_t)j->failed);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}

void bus_jobs_run(struct tierd *t) {
        jobs_schedule(t);
}

int bus_job_cancel(struct tierd *t, const char *path) {
        for (struct bus_job *j = t->jobs; j; j = j->next)
                if (strcmp(j->path, path) == 0) {
                        if (j->task && !j->cancel)
                                return -EOPNOTSUPP;
                        j->canceled = true;
                        if (j->task && !j->task_ended)
                                j->cancel(j->cancel_userdata); /* it ends the job, now or later */
                        jobs_schedule(t);
                        return 1;
                }
        return 0;
}

void bus_jobs_cancel_all(struct tierd *t) {
        for (struct bus_job *j = t->jobs; j; j = j->next)
                j->canceled = true;
        jobs_schedule(t);
}

void bus_jobs_abort_all(struct tierd *t) {
        while (t->jobs) {
                struct bus_job *j = t->jobs;
                t->jobs = j->next;
                log_info("job %u (%s): aborted after %zu of %zu files: tierd stops", j->id, j->operation, j->done, j->n);
                job_emit_removed(j, "aborted");
                job_free(j);
        }
        t->jobs_src = sd_event_source_unref(t->jobs_src);
}
