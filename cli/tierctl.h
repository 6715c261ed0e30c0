/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#define BUS_NAME "org.tierd1"
#define BUS_PATH "/org/tierd1"
#define BUS_MANAGER "org.tierd1.Manager"
#define BUS_TENANT "org.tierd1.Tenant"
#define BUS_JOB "org.tierd1.Job"
#define ERROR_ACCESS_DENIED "org.tierd1.Error.AccessDenied"

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_DENIED = 3 };

/* PATH opened O_PATH following no symlink on the way (openat2
 * RESOLVE_NO_SYMLINKS): a link in a tenant cannot make a verb act on a file
 * elsewhere. -errno (-ELOOP: a symlink); the fd otherwise. */
int open_path_no_symlinks(const char *path);
/* The message for open_path_no_symlinks' error. */
const char *path_error(int r);

/* Prints why a call failed; the exit code it deserves. */
int call_failed(const char *what, const sd_bus_error *e, int r);
/* Calls METHOD on tierd's manager (reply: NULL, or where the reply goes);
 * EXIT_OK, or what call_failed said after printing why. */
int call_manager(sd_bus *bus, const char *what, sd_bus_message **reply, const char *method, const char *types, ...);

/* 1536 -> "1.5K", as ls -h prints sizes; JSON printed on one line, and
 * freed by _cleanup_(json_putp): cli/status.c. */
struct json_object;
const char *human_size(uint64_t v, char buf[16]);
void json_print(struct json_object *o);
/* A new object, appended to the array list: NULL when out of memory. */
struct json_object *json_array_new_object(struct json_object *list);
void json_putp(struct json_object **o);
/* tierctl find, tierctl du: cli/find.c. */
int verb_find(sd_bus *bus, int argc, char **argv);
int verb_du(sd_bus *bus, int argc, char **argv);
/* tierctl status [--json] [PATH...]: cli/status.c. */
int status_files(sd_bus *bus, int n, char **argv, bool json);
int status_tenants(sd_bus *bus, bool json);
/* tierctl archive/release/restore/pin/unpin PATH...: method is the
 * manager's fd variant ("Archive"...). */
int verb_file_job(sd_bus *bus, const char *method, const char *verb, int argc, char **argv);
/* A job's PropertiesChanged read into phase (NULL if it did not change),
 * done and total (left as they are if they did not): 1, or 0 if m is
 * about another interface. cli/jobs.c. */
int job_progress_read(sd_bus_message *m, const char **phase, uint32_t *done, uint32_t *total);
/* tierctl tenant set NAME KEY=VALUE...: argv starts after "tenant". */
int verb_tenant(sd_bus *bus, int argc, char **argv);
/* tierctl gc NAME [--dry-run]: argv starts after "gc". */
int verb_gc(sd_bus *bus, int argc, char **argv);
/* tierctl audit NAME [--repair]: argv starts after "audit". */
int verb_audit(sd_bus *bus, int argc, char **argv);
/* tierctl metrics: every counter in the Prometheus text format. */
int verb_metrics(sd_bus *bus, int argc, char **argv);
/* tierctl oci-hook [STAGE]: the OCI runtime hook (state JSON on stdin);
 * connects to the bus only for containers with a tierd.io/tenant
 * annotation. cli/container.c. */
int verb_oci_hook(sd_bus *bus, int argc, char **argv);
/* tierctl release-groups [--holder SOCKET] MOUNTPOINT...: cli/groups.c. */
int verb_release_groups(sd_bus *bus, int argc, char **argv);
/* tierctl container attach|detach|list: argv starts after "container". */
int verb_container(sd_bus *bus, int argc, char **argv);
/* tierctl trace start|show (cli/trace.c): argv starts after "trace". */
int verb_trace(sd_bus *bus, int argc, char **argv);
/* tierctl monitor: tierd's signals as they come, until interrupted. */
int verb_monitor(sd_bus *bus, int argc, char **argv);
/* tierctl jobs, tierctl cancel JOB: cli/joblist.c. */
int verb_jobs(sd_bus *bus, int argc, char **argv);
int verb_cancel(sd_bus *bus, int argc, char **argv);
/* For a verb that takes no arguments: EXIT_OK, or EXIT_USAGE said. */
int verb_no_args(const char *verb, int argc);

/* Sends call (a Start* method: replies with a Job) and waits for the job's
 * TaskFinished: EXIT_OK with the signal in *ret_finished (read up to its
 * findings) and its result and summary; else an exit code, said on stderr.
 * Ctrl-C cancels the job if it can be. */
int task_run(sd_bus *bus, const char *verb, sd_bus_message *call, sd_bus_message **ret_finished,
             const char **ret_result, const char **ret_summary);
