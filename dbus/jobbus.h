/* SPDX-License-Identifier: MIT */
/*
 * org.tierd1.Job objects (dbus/org.tierd1.Job.xml): each batch of
 * supervisor/files/batch.c, like systemd's jobs: the method that makes one
 * returns the object at once, progress is in its properties, and the
 * manager's JobRemoved signal carries the result.
 */
#pragma once

#include <systemd/sd-bus.h>

#include "batch.h"
#include "tierd.h"

#define TIERD_BUS_JOB_PREFIX "/org/tierd1/job"
#define TIERD_BUS_JOB "org.tierd1.Job"
#define BUS_ERROR_NOT_CANCELABLE "org.tierd1.Error.NotCancelable"

int job_bus_publish(struct tierd *t);
/* The object of batch id, into path. */
void job_bus_path(uint32_t id, char path[static 64]);
/* The face's hooks (face.h). */
void job_bus_added(struct batch *b);
void job_bus_changed(struct batch *b);
void job_bus_removed(struct batch *b, const char *result);
/* Ends task id (batch_task_end) with a signal to send just before its
 * JobRemoved (and one to send instead should that fail; both may be
 * NULL), so that both follow the Start* reply even when the task ended
 * before it. */
void job_bus_task_end_with(struct tierd *t, uint32_t id, int error, const char *message, sd_bus_message *finished,
                           sd_bus_message *finished_small);
/* CancelJob(o) and Job.Cancel(): 1 canceled, 0 no such job, -EOPNOTSUPP
 * a task that cannot be canceled. */
int job_bus_cancel(struct tierd *t, const char *path);
/* ListJobs(), on the manager. */
int job_bus_method_list(sd_bus_message *m, void *userdata, sd_bus_error *error);
/* The named D-Bus error of a file job's -errno (fileops.h). */
const char *bus_job_error_name(int error);
