/* SPDX-License-Identifier: MIT */
/*
 * tierctl archive / release / restore / pin / unpin: the files go to tierd
 * as open file descriptors (so names need not be UTF-8 and tierctl may run
 * in another mount namespace), in jobs of at most FDS_PER_CALL (the system
 * bus's default per-message limit). Each job's result arrives as the
 * manager's JobRemoved signal, subscribed to before the first call.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "tierctl.h"

#define FDS_PER_CALL 16

struct pending_job {
        char *path;
        uint32_t total, done;
        bool removed;
};

struct file_jobs {
        const char *verb;
        char **names; /* argv: what the user typed, for messages */
        struct pending_job *jobs;
        size_t n_jobs, n_removed;
        uint64_t files_total, files_done_removed, files_ok, files_failed;
        bool progress; /* a terminal: draw a bar on stderr */
        char *tierd;   /* tierd's unique bus name: its jobs, and whether it is still there */
        bool tierd_gone;
};

static volatile sig_atomic_t interrupted;

/* The first Ctrl-C cancels; a second one ends tierctl at once. */
static void on_interrupt(int sig) {
        interrupted = 1;
        signal(sig, SIG_DFL);
}

static struct pending_job *find_job(struct file_jobs *fj, const char *path) {
        for (size_t i = 0; i < fj->n_jobs; i++)
                if (!fj->jobs[i].removed && strcmp(fj->jobs[i].path, path) == 0)
                        return &fj->jobs[i];
        return NULL;
}

static void draw_progress(struct file_jobs *fj) {
        uint64_t done = fj->files_done_removed;
        const int width = 30;

        if (!fj->progress)
                return;
        for (size_t i = 0; i < fj->n_jobs; i++)
                if (!fj->jobs[i].removed)
                        done += fj->jobs[i].done;
        int fill = fj->files_total ? (int)(done * (uint64_t)width / fj->files_total) : width;
        fprintf(stderr, "\r%s [%.*s%*s] %llu/%llu files", fj->verb, fill, "##############################",
                width - fill, "", (unsigned long long)done, (unsigned long long)fj->files_total);
        fflush(stderr);
}

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct file_jobs *fj = userdata;
        const char *path, *operation, *result, *name, *message;
        uint32_t id, done, failed, index;
        struct pending_job *j;
        (void)error;

        if (!fj->tierd || strcmp(sd_bus_message_get_sender(m) ?: "", fj->tierd) != 0 ||
            sd_bus_message_read(m, "uossuu", &id, &path, &operation, &result, &done, &failed) < 0 ||
            !(j = find_job(fj, path)))
                return 0;
        j->removed = true;
        fj->n_removed++;
        fj->files_done_removed += done;
        fj->files_ok += done - MIN(done, failed);
        /* Canceled or aborted: the files never started are not done either. */
        fj->files_failed += failed + (j->total - MIN(j->total, done));
        if (fj->progress)
                fputs("\r\033[K", stderr);
        if (sd_bus_message_enter_container(m, 'a', "(uss)") >= 0)
                while (sd_bus_message_read(m, "(uss)", &index, &name, &message) > 0)
                        fprintf(stderr, "tierctl: %s\n", message);
        if (strcmp(result, "canceled") == 0 || strcmp(result, "aborted") == 0)
                fprintf(stderr, "tierctl: job %u %s after %u of %u files\n", id, result, done, j->total);
        draw_progress(fj);
        return 0;
}

/* tierd stopped or was replaced: its jobs' results will never come. */
static int on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct file_jobs *fj = userdata;
        const char *name, *old_owner, *new_owner;
        (void)error;

        if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || strcmp(name, BUS_NAME) != 0 ||
            !fj->tierd || strcmp(old_owner, fj->tierd) != 0)
                return 0;
        fj->tierd_gone = true;
        return 0;
}

int job_progress_read(sd_bus_message *m, const char **phase, uint32_t *done, uint32_t *total) {
        const char *interface, *property;
        if (sd_bus_message_read(m, "s", &interface) < 0 || strcmp(interface, BUS_JOB) != 0 ||
            sd_bus_message_enter_container(m, 'a', "{sv}") < 0)
                return 0;
        while (sd_bus_message_enter_container(m, 'e', "sv") > 0) {
                if (sd_bus_message_read(m, "s", &property) < 0)
                        break;
                if (strcmp(property, "Phase") == 0)
                        sd_bus_message_read(m, "v", "s", phase);
                else if (strcmp(property, "FilesDone") == 0)
                        sd_bus_message_read(m, "v", "u", done);
                else if (strcmp(property, "FilesTotal") == 0)
                        sd_bus_message_read(m, "v", "u", total);
                else
                        sd_bus_message_skip(m, "v");
                sd_bus_message_exit_container(m);
        }
        return 1;
}

static int on_properties_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct file_jobs *fj = userdata;
        struct pending_job *j = find_job(fj, sd_bus_message_get_path(m));
        const char *phase = NULL;
        uint32_t total = j ? j->total : 0;
        (void)error;

        if (!j || job_progress_read(m, &phase, &j->done, &total) <= 0)
                return 0;
        draw_progress(fj);
        return 0;
}

/* One call for fds[0..n); the job path, or the D-Bus error in e. Ctrl-C
 * waits until the reply is in: a job made must be known, to be canceled. */
static int call_job(sd_bus *bus, struct file_jobs *fj, const char *method, const int *fds, size_t n, char **ret_path,
                    sd_bus_error *e) {
        sd_bus_message *m = NULL, *reply = NULL;
        const char *path;
        sigset_t block, saved;
        int r = sd_bus_message_new_method_call(bus, &m, BUS_NAME, BUS_PATH, BUS_MANAGER, method);

        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "h");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = sd_bus_message_append(m, "h", fds[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigprocmask(SIG_BLOCK, &block, &saved);
        if (r >= 0)
                r = sd_bus_call(bus, m, 0, e, &reply);
        sigprocmask(SIG_SETMASK, &saved, NULL);
        if (r >= 0 && !fj->tierd && !(fj->tierd = strdup(sd_bus_message_get_sender(reply) ?: "")))
                r = -ENOMEM;
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &path);
        if (r >= 0 && !(*ret_path = strdup(path)))
                r = -ENOMEM;
        sd_bus_message_unref(m);
        sd_bus_message_unref(reply);
        return r;
}

static int add_job(struct file_jobs *fj, char *path, size_t total) {
        struct pending_job *grown = realloc(fj->jobs, (fj->n_jobs + 1) * sizeof(*grown));
        if (!grown) {
                free(path);
                return -ENOMEM;
        }
        fj->jobs = grown;
        fj->jobs[fj->n_jobs++] = (struct pending_job){ .path = path, .total = (uint32_t)total };
        return 0;
}

/* Sends one batch; if tierd refuses it for one file (outside every tenant,
 * not a regular file), each file goes alone, so the others are done.
 * Returns < 0 (-EACCES: access denied) when nothing more should be sent. */
static int submit(sd_bus *bus, struct file_jobs *fj, const char *method, const int *fds, const int *idx, size_t n) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        char *path = NULL;
        int r = call_job(bus, fj, method, fds, n, &path, &e);
        bool denied = sd_bus_error_has_name(&e, ERROR_ACCESS_DENIED);
        /* tierd refused the batch for one of its files: the others may go. */
        bool one_bad = sd_bus_error_has_names(&e, "org.tierd1.Error.NoSuchFile", "org.tierd1.Error.NotInTenant",
                                              "org.tierd1.Error.NotRegularFile");

        if (r >= 0) {
                fj->files_total += n;
                return add_job(fj, path, n);
        }
        if (one_bad) {
                if (n == 1) {
                        const char *why = e.message ?: strerror(-r);
                        /* "file #0: " names the fd by its place: we have the name. */
                        if (strncmp(why, "file #0: ", 9) == 0)
                                why += 9;
                        fprintf(stderr, "tierctl: %s: %s\n", fj->names[idx[0]], why);
                        sd_bus_error_free(&e);
                        fj->files_failed++;
                        return 0;
                }
                sd_bus_error_free(&e);
                for (size_t i = 0; i < n; i++)
                        if ((r = submit(bus, fj, method, &fds[i], &idx[i], 1)) < 0)
                                return r;
                return 0;
        }
        call_failed(method, &e, r);
        sd_bus_error_free(&e);
        fj->files_failed += n;
        return denied ? -EACCES : r;
}

/* Every path, opened O_PATH and sent by fd, FDS_PER_CALL to a call. */
static int submit_paths(sd_bus *bus, struct file_jobs *fj, const char *method, int argc, char **argv) {
        int fds[FDS_PER_CALL], idx[FDS_PER_CALL], r = 0;
        size_t n = 0;

        for (int i = 0; i <= argc && r >= 0 && !interrupted; i++) {
                if (i < argc) {
                        /* O_PATH: no read access needed, nothing is opened for
                         * real; no symlink followed: a link in a tenant does
                         * not lead a verb to another tenant's file. */
                        int fd = open_path_no_symlinks(argv[i]);
                        struct stat st;
                        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                                fprintf(stderr, "tierctl: %s: %s\n", argv[i],
                                        fd < 0 ? path_error(fd) : "not a regular file");
                                if (fd >= 0)
                                        close(fd);
                                fj->files_failed++;
                                continue;
                        }
                        fds[n] = fd;
                        idx[n++] = i;
                }
                if (n > 0 && (n == FDS_PER_CALL || i == argc)) {
                        r = submit(bus, fj, method, fds, idx, n);
                        for (size_t k = 0; k < n; k++)
                                close(fds[k]);
                        n = 0;
                }
        }
        for (size_t k = 0; k < n; k++)
                close(fds[k]);
        return r;
}

/* Until every job is removed (or tierd is gone); Ctrl-C cancels them
 * (files in progress finish). EXIT_OK, or the exit status of a bus error. */
static int wait_jobs(sd_bus *bus, struct file_jobs *fj) {
        bool canceling = false;
        int ret = EXIT_OK;
        while (fj->n_removed < fj->n_jobs && !fj->tierd_gone) {
                if (interrupted && !canceling) {
                        canceling = true;
                        for (size_t k = 0; k < fj->n_jobs; k++)
                                if (!fj->jobs[k].removed)
                                        sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_MANAGER, "CancelJob", NULL,
                                                           NULL, "o", fj->jobs[k].path);
                }
                int r = sd_bus_process(bus, NULL);
                if (r < 0) {
                        ret = call_failed("reading the bus", NULL, r);
                        break;
                }
                /* Bounded: a Ctrl-C between the check above and here is seen. */
                if (r == 0 && (r = sd_bus_wait(bus, 200 * 1000)) < 0 && r != -EINTR) {
                        ret = call_failed("waiting on the bus", NULL, r);
                        break;
                }
        }
        if (fj->tierd_gone) {
                uint64_t unknown = 0;
                for (size_t k = 0; k < fj->n_jobs; k++)
                        if (!fj->jobs[k].removed)
                                unknown += fj->jobs[k].total;
                fprintf(stderr, "%stierctl: tierd stopped or restarted: the result of %llu files is unknown; run the "
                                "command again\n", fj->progress ? "\r\033[K" : "", (unsigned long long)unknown);
                fj->files_failed += unknown;
        }
        return ret;
}

int verb_file_job(sd_bus *bus, const char *method, const char *verb, int argc, char **argv) {
        struct file_jobs fj = { .verb = verb, .names = argv, .progress = isatty(STDERR_FILENO) };
        int r, ret = EXIT_OK;

        if (argc == 0) {
                fprintf(stderr, "tierctl: %s needs at least one PATH\n", verb);
                return EXIT_USAGE;
        }
        r = sd_bus_match_signal(bus, NULL, BUS_NAME, BUS_PATH, BUS_MANAGER, "JobRemoved", on_job_removed, &fj);
        if (r >= 0 && fj.progress)
                r = sd_bus_match_signal(bus, NULL, BUS_NAME, NULL, "org.freedesktop.DBus.Properties",
                                        "PropertiesChanged", on_properties_changed, &fj);
        if (r >= 0)
                r = sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                        "NameOwnerChanged", on_name_owner_changed, &fj);
        if (r < 0)
                return call_failed("AddMatch", NULL, r);
        signal(SIGINT, on_interrupt);

        r = submit_paths(bus, &fj, method, argc, argv);
        if (r < 0)
                ret = r == -EACCES ? EXIT_DENIED : EXIT_FAILED;
        r = wait_jobs(bus, &fj);
        if (r != EXIT_OK)
                ret = r;
        if (fj.progress)
                fprintf(stderr, "\r\033[K%s: %llu files done, %llu failed\n", verb, (unsigned long long)fj.files_ok,
                        (unsigned long long)fj.files_failed);
        for (size_t k = 0; k < fj.n_jobs; k++)
                free(fj.jobs[k].path);
        free(fj.jobs);
        free(fj.tierd);
        if (ret == EXIT_OK && (fj.files_failed > 0 || interrupted))
                ret = EXIT_FAILED;
        return ret;
}
