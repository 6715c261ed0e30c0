/* SPDX-License-Identifier: MIT */
/*
 * Jobs: archive, release, restore, pin and unpin of many files as one
 * org.tierd1.Job object (dbus/org.tierd1.Job.xml), like systemd's jobs:
 * the method returns the object at once, progress is in its properties,
 * and the manager's JobRemoved signal carries the result.
 */
#pragma once

#include "jobs.h"
#include "tierd.h"

#define TIERD_BUS_JOB_PREFIX "/org/tierd1/job"
#define TIERD_BUS_JOB "org.tierd1.Job"
#define BUS_ERROR_NOT_CANCELABLE "org.tierd1.Error.NotCancelable"

/* Takes the n files in refs (moved out: the caller's array is left empty)
 * and queues them; writes the job's object path into *ret_path (malloc'd). */
int bus_job_start(struct tierd *t, const char *operation, file_job_t fn, struct file_ref *refs, size_t n,
                  char **ret_path);
/* A job that is one task of tierd's (an import, a garbage collection)
 * rather than files: its id (0 if it could not be made: the task runs
 * without it). The task reports its progress (phase: static text) and its
 * end; Cancel() calls cancel(userdata), which must end it (NULL: it
 * cannot be canceled). */
uint32_t bus_task_job_start(struct tierd *t, const char *operation, void (*cancel)(void *userdata), void *userdata);
void bus_task_job_progress(struct tierd *t, uint32_t id, const char *phase, uint64_t done, uint64_t total);
void bus_task_job_end(struct tierd *t, uint32_t id, int error, const char *message);
/* The same, with a signal to send just before its JobRemoved (and one to
 * send instead should that fail; both may be NULL). */
void bus_task_job_end_with(struct tierd *t, uint32_t id, int error, const char *message, sd_bus_message *finished,
                           sd_bus_message *finished_small);
/* ListJobs(), on the manager. */
int bus_method_list_jobs(sd_bus_message *m, void *userdata, sd_bus_error *error);
/* Starts what may start: call after the method's reply is queued, so that
 * JobRemoved always follows the reply. */
void bus_jobs_run(struct tierd *t);
/* 1 canceled, 0 no such job, -EOPNOTSUPP a task that cannot be canceled.
 * Files in progress finish; the rest are not started. */
int bus_job_cancel(struct tierd *t, const char *path);
/* Cancels every job (tierd stops). */
void bus_jobs_cancel_all(struct tierd *t);
/* Ends every job at once with JobRemoved "aborted" (tierd stops or hands
 * over): teardown, before the bus goes. */
void bus_jobs_abort_all(struct tierd *t);
/* The named D-Bus error of a file job's -errno (jobs.h). */
const char *bus_job_error_name(int error);
