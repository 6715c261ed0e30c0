/* SPDX-License-Identifier: MIT */
/*
 * Files named by path on org.tierd1.Manager (the *Paths methods and
 * FileStatus), and the array replies the manager's methods share.
 */
#pragma once

#include <systemd/sd-bus.h>

#include "fileops.h"
#include "tierd.h"

#define ERROR_SHUTTING_DOWN "org.tierd1.Error.ShuttingDown"
#define ERROR_INVALID_ARGS "org.tierd1.Error.InvalidArguments"
#define ERROR_TRY_AGAIN "org.tierd1.Error.TryAgain"
#define MAX_PATHS 100000

/* ArchivePaths, ReleasePaths...: checks, then each path walked on a
 * thread, then a job, its path in the reply (later: the call waits). */
int path_bus_file_job(sd_bus_message *m, struct tierd *t, const char *operation, file_job_t fn, sd_bus_error *error);
/* FileStatus, by path: for root and the admin group only. */
int path_bus_method_file_status(sd_bus_message *m, void *userdata, sd_bus_error *error);

/* Who may start a file job, and when (root or the admin group, tierd
 * not stopping): 0, < 0 with error set, or > 0 (not known yet: return
 * it, as bus_check_admin says). */
int bus_file_job_allowed(sd_bus_message *m, struct tierd *t, sd_bus_error *error);
/* A job of refs' files, its path in the reply to m, then it runs: 1, or
 * -errno (nothing started, nothing replied). */
int bus_file_job_reply(sd_bus_message *m, struct tierd *t, const char *operation, file_job_t fn,
                       struct file_ref *refs, size_t n);

/* A reply that is one array: opened here, filled by the caller (r carries
 * the first error), then closed and sent, and unreferenced either way. */
int bus_array_reply_open(sd_bus_message *call, const char *contents, sd_bus_message **reply);
int bus_array_reply_send(sd_bus_message *reply, int r);
/* One file's status into a reply (a(ssssttb)): name, msg (an error, or
 * ""), then st's fields. */
int bus_append_status(sd_bus_message *reply, const char *name, const char *msg, const struct file_status *st);
