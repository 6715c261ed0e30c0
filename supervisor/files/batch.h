/* SPDX-License-Identifier: MIT */
/*
 * Batches: one operation (archive, release, restore, pin...) over many
 * files, or one long task of tierd's (an import, a garbage collection),
 * tracked from its start to its end. Batches run in the order they were
 * made; at most BATCH_FILES_RUNNING files at a time over all of them,
 * since each holds an fd and tierd keeps its fds for readers' events.
 *
 * Each batch is shown by the face over supervisor/ (dbus/jobbus.c makes
 * it an org.tierd1.Job), told through t->face: batch_added when it is
 * made, batch_changed when its progress is worth telling, batch_removed
 * just before it goes.
 */
#pragma once

#include "fileops.h"
#include "tierd.h"

struct batch_error {
        uint32_t index; /* of the file in the batch */
        int error;      /* -errno, as a file job reports it (fileops.h) */
        char *message;  /* valid UTF-8 */
};

struct batch {
        struct tierd *t;
        struct batch *next;
        uint32_t id; /* never 0 */
        const char *operation; /* static text */
        file_job_t fn;
        struct file_ref *refs; /* not started yet; started ones move to their item */
        size_t n, started, done, failed, running;
        struct batch_error *errors; /* the first BATCH_ERRORS_MAX; the rest are counted */
        size_t n_errors;
        bool canceled;
        bool running_told; /* the state last told to the face */
        uint64_t told_usec;
        /* A task: one task, not files. */
        bool task, task_ended;
        const char *phase; /* static text */
        uint64_t task_done, task_total; /* its items (n and done count files only) */
        void (*cancel)(void *userdata);
        void *cancel_userdata;
        void *face_data; /* the face's, freed by it in batch_removed */
};

/* Takes the n files in refs (moved out: the caller's array is left empty)
 * and queues them; they start at batch_run. */
int batch_start_files(struct tierd *t, const char *operation, file_job_t fn, struct file_ref *refs, size_t n,
                      struct batch **ret);
/* A task: its id (0 if it could not be made: the task runs without it).
 * The task reports its progress (phase: static text) and its end;
 * batch_cancel calls cancel(userdata), which must end it (NULL: it cannot
 * be canceled). */
uint32_t batch_task_start(struct tierd *t, const char *operation, void (*cancel)(void *userdata), void *userdata);
void batch_task_progress(struct tierd *t, uint32_t id, const char *phase, uint64_t done, uint64_t total);
void batch_task_end(struct tierd *t, uint32_t id, int error, const char *message);

struct batch *batch_find(struct tierd *t, uint32_t id);
/* "running" or "waiting". */
const char *batch_state(const struct batch *b);
/* Files (or a task's items) in all, and done. */
uint64_t batch_total(const struct batch *b);
uint64_t batch_done(const struct batch *b);

/* Starts what may start, from the event loop's next turn: call after the
 * caller's reply is queued, so that batch_removed always follows it. */
void batch_run(struct tierd *t);
/* 1 canceled, 0 no such batch, -EOPNOTSUPP a task that cannot be canceled.
 * Files in progress finish; the rest are not started. */
int batch_cancel(struct tierd *t, uint32_t id);
/* Cancels every batch (tierd stops). */
void batch_cancel_all(struct tierd *t);
/* No batch over whose end is still to be told (the next turn tells it):
 * a stop waits for that, so that its caller hears how its job ended. */
bool batch_ends_told(const struct tierd *t);
/* Ends every batch at once, result "aborted" (tierd stops or hands over):
 * at teardown, while the face is still there. */
void batch_abort_all(struct tierd *t);
