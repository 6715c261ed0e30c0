/* SPDX-License-Identifier: MIT */
/*
 * tierd's life: reads the policy, watches each tiered filesystem, places
 * the tenant views, starts a worker per tenant, opens its face (D-Bus) and
 * serves until a signal.
 * SIGTERM with an fd store (systemd's, or tierd-holder): hand over at once,
 * leaving events pending and views in place for the next tierd.
 * SIGINT, or SIGTERM without a store: stop for good: finish in-flight
 * fills, answer them, stop the workers, remove the views, exit 0.
 */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "bootmount.h"
#include "containerstate.h"
#include "contentcheck.h"
#include "dispatch.h"
#include "hydrate.h"
#include "settle.h"
#include "setup.h"
#include "fsgroup.h"
#include "audit.h"
#include "awsfetch.h"
#include "gc.h"
#include "handover.h"
#include "holder-proto.h"
#include "inflight.h"
#include "inodework.h"
#include "journallog.h"
#include "keeper.h"
#include "loopnice.h"
#include "log.h"
#include "macro.h"
#include "namer.h"
#include "offthread.h"
#include "autoarchive.h"
#include "batch.h"
#include "catalog.h"
#include "catalogwatch.h"
#include "quota.h"
#include "remotecheck.h"
#include "tally.h"
#include "usage.h"
#include "usegroup.h"
#include "prefetch.h"
#include "trace.h"
#include "policywatch.h"
#include "sdstatus.h"
#include "awscreds.h"
#include "resolver.h"
#include "secrets.h"
#include "views.h"
#include "workers.h"

#define STOP_TIMEOUT_USEC (30 * 1000 * 1000ull)

struct tenant *tierd_find_tenant(struct tierd *t, const char *name) {
        for (size_t i = 0; i < t->n_tenants; i++)
                if (strcmp(t->tenants[i].cfg->name, name) == 0)
                        return &t->tenants[i];
        return NULL;
}

/* Nothing left that a stop should let finish: fills, tierd's own requests
 * to the workers, the telling of jobs' ends, D-Bus calls by path whose
 * walks are not over (each is answered: a job's with ShuttingDown),
 * imports (each ends at its next step, told), and trace saves (between
 * two of their requests one may be merging on a thread, or waiting for
 * the name's lock). */
static bool tierd_idle(struct tierd *t) {
        if (!dispatch_idle(t) || !batch_ends_told(t) || t->path_calls > 0 || t->status_calls > 0)
                return false;
        for (size_t i = 0; i < t->n_tenants; i++)
                if (!worker_idle(&t->tenants[i].worker) || t->tenants[i].saving || catalog_import_pending(&t->tenants[i]))
                        return false;
        return containers_idle(t);
}

static int on_idle_check(sd_event_source *s, void *userdata) {
        struct tierd *t = userdata;
        (void)s;
        if (tierd_idle(t))
                sd_event_exit(t->event, 0);
        return 0;
}

/* Looked at from the loop, once the callback at hand is over: what it
 * does after (a stop that goes on to cancel a collection, whose end is
 * then still to be told) counts. sd_event_exit cannot be taken back. */
void tierd_check_idle(struct tierd *t) {
        if (t->stopping && tierd_defer_once(t->event, &t->idle_src, on_idle_check, t) < 0 && tierd_idle(t))
                sd_event_exit(t->event, 0);
}

static int on_stop_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        struct tierd *t = userdata;
        (void)s;
        (void)usec;
        log_error("in-flight fills and store requests did not finish in time: fills answered EIO");
        dispatch_fail_all(t);
        return sd_event_exit(t->event, 0);
}

/* Leaves every event read and not answered pending, recorded in the
 * in-flight record, for the next tierd; readers wait, none is answered. */
static void hand_over(struct tierd *t) {
        unsigned pending = t->fds_in_flight;
        log_info("SIGTERM: handing over to the next tierd (%u fds in flight stay pending)", pending);
        sd_notify(false, "STOPPING=1");
        t->handing_over = true;
        for (size_t i = 0; i < t->n_fss; i++)
                sd_event_source_set_enabled(t->fss[i].pre_src, SD_EVENT_OFF);
        sd_event_exit(t->event, 0);
}

static int on_terminate(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct tierd *t = userdata;
        (void)s;
        if (si->ssi_signo == SIGTERM && t->store.kind != FDSTORE_NONE) {
                hand_over(t);
                return 0;
        }
        if (t->stopping)
                return 0;
        log_info("signal %u: finishing in-flight fills, then exiting", si->ssi_signo);
        t->stopping = true;
        batch_cancel_all(t); /* files in progress finish; queued ones are not started */
        prefetch_stop_all(t); /* the same for traces fetched ahead */
        for (size_t i = 0; i < t->n_tenants; i++) {
                hydrate_stop(&t->tenants[i]); /* and files fetched whole after a read */
                trace_saves_stop(&t->tenants[i]); /* and runs waiting for another node's save */
                gc_stop(&t->tenants[i]);    /* a collection or an audit deletes and reads no more: */
                audit_stop(&t->tenants[i]); /* their callers are told now, the bus still up */
                catalog_import_stop(&t->tenants[i]); /* an import's tree made no further */
                pathwarm_stop(&t->tenants[i]);       /* and callers' paths walked no further */
                dispatch_quota_retry(&t->tenants[i]); /* readers restore_rate parked go now */
        }
        sd_event_add_time_relative(t->event, &t->stop_src, CLOCK_MONOTONIC, STOP_TIMEOUT_USEC, 0, on_stop_timeout, t);
        tierd_check_idle(t);
        return 0;
}

/* Every event needs an fd: an event the kernel cannot give one reaches the
 * reader as EPERM. Raise the limit as far as we may. */
static unsigned raise_fd_limit(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 1024;
        if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        log_warning("cannot raise RLIMIT_NOFILE: %m");
                getrlimit(RLIMIT_NOFILE, &rl);
        }
        return rl.rlim_cur > (1u << 24) ? 1u << 24 : (unsigned)rl.rlim_cur;
}

/* What tierd may spend on events and fill fds: the limit, less what it
 * holds for itself now and headroom for D-Bus jobs and worker restarts. */
static void set_fd_budget(struct tierd *t) {
        unsigned open_now = 0, reserve = 64 + 4 * (unsigned)t->n_tenants;
        _cleanup_closedir_ DIR *d = opendir("/proc/self/fd");
        for (struct dirent *de; d && (de = readdir(d));)
                open_now += de->d_name[0] != '.';
        open_now -= MIN(open_now, t->n_orphans); /* placeholders: counted as they are served */
        t->fd_budget = t->nofile > open_now + reserve + 8 ? t->nofile - open_now - reserve : 8;
        log_debug("fd budget for events and fills: %u (RLIMIT_NOFILE %u)", t->fd_budget, t->nofile);
}

/* tierd-worker and tierd-holder: next to tierd (the build), or installed
 * (make install: LIBEXECDIR). */
static char *find_helper_binary(const char *name) {
        char self[PATH_MAX], *path = NULL;
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

        if (n >= 0) {
                self[n] = 0;
                if (asprintf(&path, "%s/%s", dirname(self), name) < 0)
                        return NULL;
                if (access(path, X_OK) == 0)
                        return path;
                free(path);
        }
        if (asprintf(&path, "%s/%s", TIERD_LIBEXECDIR, name) < 0)
                return NULL;
        if (access(path, X_OK) == 0)
                return path;
        log_error("%s not found next to tierd or in %s", name, TIERD_LIBEXECDIR);
        free(path);
        return NULL;
}

/* Daemons must not hand out fds 0-2: stdio written there would land in a
 * file, and event fd numbers below 3 would clash with stdio on takeover. */
static void ensure_stdio(void) {
        for (int fd = 0; fd < 3; fd++)
                if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
                        _exit(EXIT_FAILURE);
}

static int run(struct tierd *t, const struct tierd_face *face) {
        int r;

        if ((r = tierd_setup(t)) < 0)
                return r;
        r = keeper_start(t);
        if (r < 0)
                return r;
        set_fd_budget(t);
        /* The predecessor's readers first, then new events. */
        handover_replay(t);
        for (size_t i = 0; i < t->n_fss; i++) {
                r = fsgroup_attach(&t->fss[i]);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < t->n_tenants; i++) {
                r = view_place(&t->tenants[i]);
                if (r < 0)
                        return r;
        }
        r = face ? face->open(t) : 0;
        if (r < 0)
                return r;
        r = secrets_watch_start(t);
        if (r < 0)
                return r;
        r = policy_watch_start(t);
        if (r < 0)
                return r;
        /* Catalogs last: their first snapshot walks the tenants' trees, and
         * what changes from now on is heard. */
        for (size_t i = 0; i < t->n_fss; i++)
                if ((r = catalogwatch_open(&t->fss[i])) < 0)
                        return r;
        for (size_t i = 0; i < t->n_tenants; i++)
                if ((r = catalog_start(&t->tenants[i])) < 0)
                        return log_error_errno(r, "tenant %s: cannot start its catalog: %m", t->tenants[i].cfg->name);
        log_info("serving %zu tenant(s) on %zu filesystem(s)", t->n_tenants, t->n_fss);
        /* Under systemd: ready, and sd-event pings the watchdog. The
         * holder's guard now waits guard_after from our death, not from a
         * start that failed. */
        sd_notify(false, "READY=1");
        if ((r = sdstatus_start(t)) < 0)
                return r;
        fdstore_ready(&t->store);
        sd_event_set_watchdog(t->event, true);
        loop_nice_raise();
        return sd_event_loop(t->event);
}

static void teardown(struct tierd *t, const struct tierd_face *face) {
        policy_watch_stop(t);
        batch_abort_all(t);
        /* Before the bus goes: DetachContainer's signals still reach it. */
        containers_stop_all(t);
        if (face)
                face->close(t);
        for (size_t i = 0; i < t->n_tenants && !t->handing_over; i++)
                view_remove(&t->tenants[i]);
        for (size_t i = 0; i < t->n_tenants; i++) {
                /* Before its worker: a request in flight ends with it. */
                gc_stop(&t->tenants[i]);
                audit_stop(&t->tenants[i]);
                catalog_stop(&t->tenants[i]);
                if (t->handing_over)
                        worker_abandon(&t->tenants[i].worker);
                else
                        worker_stop(&t->tenants[i].worker);
                /* Its fills' put-backs and records end, and with them the
                 * fills (their done() runs now, but at a handover). */
                inode_work_stop(&t->tenants[i]);
                if (t->tenants[i].recording)
                        trace_record_drop(t->tenants[i].recording);
                if (t->tenants[i].prefetch)
                        prefetch_cancel(t->tenants[i].prefetch);
                hydrate_stop(&t->tenants[i]);
                quota_stop(&t->tenants[i]);
                restore_pace_stop(&t->tenants[i]);
                usage_save(&t->tenants[i]);
                autoarchive_stop(&t->tenants[i]);
                usage_free(&t->tenants[i]);
                namer_free(&t->tenants[i]);
                pathwarm_free(&t->tenants[i]);
                tally_stop(&t->tenants[i]);
                content_checks_stop(&t->tenants[i]);
                remote_check_free(&t->tenants[i]);
                safe_close(t->tenants[i].subvol_fd);
                safe_close(t->tenants[i].store_fd);
                free(t->tenants[i].subvol_rel);
                awscreds_stop(&t->tenants[i]);
                explicit_bzero(&t->tenants[i].cred, sizeof(t->tenants[i].cred));
                explicit_bzero(t->tenants[i].headers, sizeof(t->tenants[i].headers));
        }
        if (t->handing_over)
                settle_end_all(t, 0); /* left pending, in the in-flight record */
        else {
                dispatch_fail_all(t);
                if (t->stopping)
                        handover_stop_for_good(t);
        }
        /* Every tenant's inode work ended with it: nothing more comes. */
        inode_work_close(t);
        /* A clean exit leaves a complete in-flight record: no keeper needed. */
        keeper_stop(t);
        for (size_t i = 0; i < t->n_fss; i++) {
                /* What tierd mounts goes before its marks: never readable unserved. */
                if (t->stopping && t->fss[i].boot_owned)
                        bootmount_remove(t->fss[i].mountpoint);
                safe_close(t->fss[i].mnt_fd);
                usegroup_close(&t->fss[i]);
                catalogwatch_close(&t->fss[i]);
                fsgroup_close(&t->fss[i]);
                free(t->fss[i].mountpoint);
                free(t->fss[i].fstype);
        }
        free(t->fss);
        resolver_stop(t);
        free(t->tenants);
        t->stop_src = sd_event_source_unref(t->stop_src);
        t->idle_src = sd_event_source_disable_unref(t->idle_src);
        t->secrets_src = sd_event_source_unref(t->secrets_src);
        t->status_src = sd_event_source_unref(t->status_src);
        t->event = sd_event_unref(t->event);
        policy_free(t->policy);
        free(t->worker_path);
        inflight_free(t->inflight);
        fdstore_done(&t->store);
}

static void usage(void) {
        fprintf(stderr, "Usage: tierd --policy FILE [--holder SOCKET | --no-holder] [--debug]\n"
                        "       tierd --check-policy FILE   validate FILE and exit (0 valid, 1 not)\n"
                        "       tierd --version\n"
                        "Files' last uses (for quotas) are kept in --state-dir (default " STATE_DIR_DEFAULT ").\n"
                        "Serves the tenants of FILE (JSON, see README.md): watches their filesystems,\n"
                        "places their views and restores released files on first access.\n"
                        "Its fanotify groups are kept across restarts by systemd's fd store (under\n"
                        "systemd) or by tierd-holder on SOCKET (default " HOLDER_DEFAULT_SOCKET ",\n"
                        "started when none listens).\n");
}

/* The command line into t, *holder and *check_only: -1 to go on, else
 * the exit status (--help, --version, a wrong option). */
static int parse_args(int argc, char **argv, struct tierd *t, const char **holder, bool *check_only) {
        static const struct option options[] = {
                { "policy", required_argument, NULL, 'p' },
                { "debug", no_argument, NULL, 'd' },
                { "holder", required_argument, NULL, 'H' },
                { "state-dir", required_argument, NULL, 'S' },
                { "no-holder", no_argument, NULL, 'N' },
                { "check-policy", required_argument, NULL, 'C' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "p:dh", options, NULL)) >= 0)
                switch (c) {
                case 'p': t->policy_path = optarg; break;
                case 'd': log_set_level(LOG_LVL_DEBUG); break;
                case 'H': *holder = optarg; break;
                case 'S': t->state_dir = optarg; break;
                case 'N': *holder = NULL; break;
                case 'C': t->policy_path = optarg; *check_only = true; break;
                case 'h': usage(); return EXIT_SUCCESS;
                case 'V': puts("tierd " TIERD_VERSION); return EXIT_SUCCESS;
                default: usage(); return 2;
                }
        if (!t->policy_path || optind != argc) {
                usage();
                return 2;
        }
        return -1;
}

/* Said, and returned for main's exit. A walk or a hash still at work on a
 * thread of its own would meet the process's exit handlers (OpenSSL's
 * among them) freeing what it uses: such an exit skips them. */
static int exit_status(const struct tierd *t, int r) {
        int status = r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        if (r < 0)
                log_error_errno(r, "exiting: %m");
        else
                log_info(t->handing_over ? "handed over" : "stopped");
        if (offthread_running() > 0 || inode_work_left(t)) {
                log_info("%u background threads still at work%s: exiting without them", offthread_running(),
                         inode_work_left(t) ? ", and inode work left blocked" : "");
                fflush(NULL);
                _exit(status);
        }
        return status;
}

int tierd_main(int argc, char **argv, const struct tierd_face *face) {
        struct tierd t = { .keeper_pidfd = -1, .policy_inotify_fd = -1, .state_dir = STATE_DIR_DEFAULT };
        _cleanup_free_ char *error = NULL, *holder_binary = NULL;
        const char *holder = HOLDER_DEFAULT_SOCKET;
        bool check_only = false;
        sigset_t mask;
        int r;

        log_set_ident("tierd");
        journallog_start();
        if ((r = parse_args(argc, argv, &t, &holder, &check_only)) >= 0)
                return r;
        r = policy_load_file(t.policy_path, &t.policy, &error);
        if (r < 0) {
                log_error("invalid policy: %s", error ? error : strerror(-r));
                return EXIT_FAILURE;
        }
        if (check_only) {
                log_info("%s: a valid policy with %zu tenants", t.policy_path, t.policy->n_tenants);
                policy_free(t.policy);
                return EXIT_SUCCESS;
        }
        if (geteuid() != 0) {
                log_error("tierd must run as root (fanotify pre-content groups need CAP_SYS_ADMIN)");
                return EXIT_FAILURE;
        }
        ensure_stdio();
        t.nofile = raise_fd_limit();
        /* Under systemd too: a final stop hands the groups to a holder. */
        if (holder && !(holder_binary = find_helper_binary("tierd-holder")) && !systemd_fd_store_usable())
                return EXIT_FAILURE;
        /* Before tierd opens anything that lives: the predecessor's events
         * keep their fd numbers. */
        r = handover_begin(&t, holder, holder_binary);
        if (r < 0) {
                log_error_errno(r, "cannot take over from the previous tierd: %m");
                fdstore_done(&t.store);
                return EXIT_FAILURE;
        }
        signal(SIGPIPE, SIG_IGN);
        /* After the handover (it may open a file, which must not take a
         * number an event of the predecessor's keeps), before any thread. */
        if (awsfetch_init() < 0)
                log_error("cannot set up libcurl: AWS credentials cannot be fetched");
        /* A lease break sends its holder SIGIO, fatal by default: tierd
         * never opens a file it leases, but must not die if it ever did. */
        signal(SIGIO, SIG_IGN);
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        r = sd_event_default(&t.event);
        if (r >= 0)
                r = sd_event_add_signal(t.event, NULL, SIGTERM, on_terminate, &t);
        if (r >= 0)
                r = sd_event_add_signal(t.event, NULL, SIGINT, on_terminate, &t);
        if (r >= 0)
                r = inode_work_open(&t);
        if (r >= 0 && !(t.worker_path = find_helper_binary("tierd-worker")))
                r = -ENOENT;
        if (r >= 0)
                r = run(&t, face);
        /* A first start that failed leaves nothing in the store (and lets
         * a holder it started exit); one that took over keeps it all for
         * the next try: readers wait rather than read zeros. */
        if (r < 0 && t.store.n_inherited == 0)
                t.stopping = true;
        teardown(&t, face);
        return exit_status(&t, r);
}
