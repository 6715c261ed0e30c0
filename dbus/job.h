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

/* Takes the n files in refs (moved out: the caller's array is left empty)
 * and queues them; writes the job's object path into *ret_path (malloc'd). */
int bus_job_start(struct tierd *t, const char *operation, file_job_t fn, struct file_ref *refs, size_t n,
                  char **ret_path);
/* Starts what may start: call after the method's reply is queued, so that
 * JobRemoved always follows the reply. */
void bus_jobs_run(struct tierd *t);
/* 1 canceled, 0 no such job. Files in progress finish; the rest are not
 * started. */
int bus_job_cancel(struct tierd *t, const char *path);
/* Cancels every job (tierd stops). */
void bus_jobs_cancel_all(struct tierd *t);
/* Ends every job at once with JobRemoved "aborted" (tierd stops or hands
 * over): teardown, before the bus goes. */
void bus_jobs_abort_all(struct tierd *t);
/* The named D-Bus error of a file job's -errno (jobs.h). */
const char *bus_job_error_name(int error);
