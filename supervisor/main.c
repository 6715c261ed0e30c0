/* SPDX-License-Identifier: MIT */
/*
 * tierd: reads the policy, watches each tiered filesystem, places the tenant
 * views, starts a worker per tenant and serves D-Bus. Foreground, logs to
 * stderr.
 * SIGTERM with an fd store (systemd's, or tierd-holder): hand over at once,
 * leaving events pending and views in place for the next tierd.
 * SIGINT, or SIGTERM without a store: stop for good: finish in-flight
 * fills, answer them, stop the workers, remove the views, exit 0.
 */
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
#include "containers.h"
#include "containerstate.h"
#include "contentcheck.h"
#include "dispatch.h"
#include "settle.h"
#include "fsgroup.h"
#include "audit.h"
#include "gc.h"
#include "handover.h"
#include "hostmounts.h"
#include "holder-proto.h"
#include "journal.h"
#include "journallog.h"
#include "keeper.h"
#include "loopnice.h"
#include "log.h"
#include "macro.h"
#include "autoarchive.h"
#include "job.h"
#include "catalog.h"
#include "catalogwatch.h"
#include "quota.h"
#include "remotecheck.h"
#include "tally.h"
#include "usage.h"
#include "usegroup.h"
#include "policywatch.h"
#include "manager.h"
#include "sdstatus.h"
#include "resolver.h"
#include "secrets.h"
#include "url.h"
#include "views.h"
#include "workers.h"

#define STOP_TIMEOUT_USEC (30 * 1000 * 1000ull)

struct tenant *tierd_find_tenant(struct tierd *t, const char *name) {
        for (size_t i = 0; i < t->n_tenants; i++)
                if (strcmp(t->tenants[i].cfg->name, name) == 0)
                        return &t->tenants[i];
        return NULL;
}

static bool tierd_idle(struct tierd *t) {
        if (!dispatch_idle(t))
                return false;
        for (size_t i = 0; i < t->n_tenants; i++)
                if (!worker_idle(&t->tenants[i].worker))
                        return false;
        return containers_idle(t);
}

void tierd_check_idle(struct tierd *t) {
        if (t->stopping && tierd_idle(t))
                sd_event_exit(t->event, 0);
}

static int on_stop_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        struct tierd *t = userdata;
        (void)s;
        (void)usec;
        log_error("in-flight fills did not finish in time: answering them EIO");
        dispatch_fail_all(t);
        return sd_event_exit(t->event, 0);
}

/* Leaves every event read and not answered pending, recorded in the
 * journal, for the next tierd; readers wait, none is answered. */
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
        bus_jobs_cancel_all(t); /* files in progress finish; queued ones are not started */
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

static struct tiered_fs *fs_for(struct tierd *t, const char *mountpoint, const char *fstype) {
        for (size_t i = 0; i < t->n_fss; i++)
                if (t->fss[i].mountpoint && strcmp(t->fss[i].mountpoint, mountpoint) == 0)
                        return &t->fss[i];
        struct tiered_fs *fs = &t->fss[t->n_fss++];
        *fs = (struct tiered_fs){ .t = t, .mnt_fd = -1, .tree_fd = -1, .root_fd = -1, .pre_fd = -1, .notif_fd = -1, .use_fd = -1,
                                   .catalog_fd = -1,
                                  .mountpoint = strdup(mountpoint), .fstype = strdup(fstype) };
        return fs;
}

/* Gives a store directory and what is in it to uid (and the gid of the same
 * number), without following links. Cheap when it is already theirs. */
static int chown_tree(int dir_fd, uid_t uid) {
        struct stat st;
        if (fstatat(dir_fd, "", &st, AT_EMPTY_PATH) < 0)
                return -errno;
        if (st.st_uid == uid && st.st_gid == uid)
                return 0;
        if (fchownat(dir_fd, "", uid, uid, AT_EMPTY_PATH) < 0)
                return -errno;
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        for (struct dirent *de; (de = readdir(d));) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (de->d_type == DT_DIR) {
                        _cleanup_close_ int sub = openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        int r = sub >= 0 ? chown_tree(sub, uid) : -errno;
                        if (r < 0)
                                return r;
                } else if (fchownat(dirfd(d), de->d_name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
        }
        return 0;
}

static int open_store(struct tenant *tn) {
        struct backend_url url;
        const char *err;
        int r = backend_url_parse(tn->cfg->backend, &url, &err);
        if (r < 0)
                return log_error_errno(r, "tenant %s: backend %s: %s", tn->cfg->name, tn->cfg->backend, err);
        if (url.kind == BACKEND_FILE) {
                /* Made by tierd, handed to the worker as its only directory. */
                if (mkdir(url.path, 0700) < 0 && errno != EEXIST)
                        r = log_error_errno(errno, "tenant %s: cannot create store %s: %m", tn->cfg->name, url.path);
                else if ((tn->store_fd = open(url.path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
                        r = log_error_errno(errno, "tenant %s: cannot open store %s: %m", tn->cfg->name, url.path);
                /* The worker runs as its own uid: the store is its. */
                else if ((r = chown_tree(tn->store_fd, tn->worker_uid)) < 0)
                        log_error_errno(r, "tenant %s: cannot give store %s to uid %u: %m", tn->cfg->name, url.path,
                                        (unsigned)tn->worker_uid);
        }
        backend_url_done(&url);
        return r;
}

/* Locate each tenant's filesystem and subvolume; open its store. */
static int setup_tenants(struct tierd *t) {
        struct policy *p = t->policy;
        int r;

        t->tenants = calloc(p->n_tenants ?: 1, sizeof(*t->tenants));
        if (!t->tenants)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_tenants; i++) {
                struct tenant *tn = &t->tenants[t->n_tenants++];
                _cleanup_free_ char *mp = NULL, *type = NULL, *real = NULL;
                *tn = (struct tenant){ .t = t, .cfg = &p->tenants[i], .subvol_fd = -1, .store_fd = -1,
                                       .worker = { .sock = -1, .state = WORKER_STOPPED } };
                tn->worker.tenant = tn;
                tn->worker_uid = p->worker_uid_first + (uid_t)i;
                real = realpath(tn->cfg->subvolume, NULL);
                if (!real)
                        return log_error_errno(errno, "tenant %s: subvolume %s: %m", tn->cfg->name, tn->cfg->subvolume);
                if (strcmp(real, tn->cfg->subvolume) != 0)
                        return log_error_errno(EINVAL, "tenant %s: subvolume %s resolves to %s: give the real path",
                                               tn->cfg->name, tn->cfg->subvolume, real);
                _cleanup_free_ char *why = NULL;
                r = hostmounts_check(p, tn->cfg, &why);
                if (r < 0)
                        return log_error_errno(r, "%s", why ?: "out of memory");
                r = fsgroup_locate(real, &mp, &type, &tn->subvol_rel);
                if (r < 0)
                        return log_error_errno(r, "tenant %s: cannot find the filesystem of %s: %m", tn->cfg->name, real);
                tn->fs = fs_for(t, mp, type);
                if (!tn->fs->mountpoint || !tn->fs->fstype)
                        return -ENOMEM;
                r = open_store(tn);
                if (r < 0)
                        return r;
                r = tenant_secrets_load(tn);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The policy's "filesystems" not mounted yet: mounted detached, marked,
 * and only then moved into place. */
static int mount_filesystems(struct tierd *t) {
        for (size_t i = 0; i < t->policy->n_filesystems; i++) {
                const struct policy_filesystem *pf = &t->policy->filesystems[i];
                const char *why = NULL;
                int mnt, r = bootmount_open(pf, &mnt, &why);
                if (r < 0)
                        return log_error_errno(r, "filesystem %s at %s: %s: %m", pf->source, pf->mountpoint, why);
                if (r > 0)
                        continue; /* mounted already: located with the tenants */
                struct tiered_fs *fs = fs_for(t, pf->mountpoint, pf->type);
                if (!fs->mountpoint || !fs->fstype) {
                        close(mnt);
                        return -ENOMEM;
                }
                fs->mnt_fd = mnt;
                fs->boot_owned = true;
                if ((r = fsgroup_open(fs)) < 0 || (r = bootmount_attach(fs->mnt_fd, fs->mountpoint)) < 0)
                        return r;
                fs->mnt_fd = safe_close(fs->mnt_fd);
        }
        return 0;
}

static bool policy_mounts(const struct policy *p, const char *mountpoint) {
        for (size_t i = 0; i < p->n_filesystems; i++)
                if (strcmp(p->filesystems[i].mountpoint, mountpoint) == 0)
                        return true;
        return false;
}

/* Each tenant's subvolume through the private mount, its tallies and its
 * worker. */
static int start_tenants(struct tierd *t) {
        for (size_t i = 0; i < t->n_tenants; i++) {
                struct tenant *tn = &t->tenants[i];
                if (!tn->fs)
                        return -EINVAL; /* setup_tenants gave every tenant its filesystem */
                tn->subvol_fd = openat(tn->fs->tree_fd, tn->subvol_rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (tn->subvol_fd < 0)
                        return log_error_errno(errno, "tenant %s: cannot open %s on the private mount: %m",
                                               tn->cfg->name, tn->subvol_rel);
                tally_start(tn);
                int r = worker_start(&tn->worker);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int run(struct tierd *t) {
        int r;

        t->fss = calloc(t->policy->n_tenants + t->policy->n_filesystems + 1, sizeof(*t->fss));
        if (!t->fss)
                return -ENOMEM;
        r = mount_filesystems(t);
        if (r >= 0)
                r = setup_tenants(t);
        if (r < 0)
                return r;
        /* Mounted already and taken over: a predecessor mounted it. One the
         * admin mounted stays the admin's. */
        for (size_t i = 0; i < t->n_fss; i++)
                if (t->store.n_inherited > 0 && policy_mounts(t->policy, t->fss[i].mountpoint))
                        t->fss[i].boot_owned = true;
        /* Mark every filesystem before any view exists: nothing can reach a
         * stub through a view before tierd serves it. */
        for (size_t i = 0; i < t->n_fss; i++) {
                if (t->fss[i].pre_fd >= 0)
                        continue; /* mounted by tierd: marked already */
                r = fsgroup_open(&t->fss[i]);
                if (r < 0)
                        return r;
        }
        /* Stores' addresses are looked up on threads: the workers' requests
         * wait for the first answers, the loop does not. */
        if ((r = resolver_start(t)) < 0)
                return r;
        if ((r = start_tenants(t)) < 0)
                return r;
        /* Containers a predecessor attached get their own workers back. */
        containers_adopt(t);
        /* Quotas and background archive need the file tables: the use
         * group first, so no write between the scan and it goes unheard. */
        for (size_t i = 0; i < t->n_tenants; i++) {
                struct tenant *tn = &t->tenants[i];
                if (!tn->cfg->quota && !tn->cfg->archive_after_usec)
                        continue;
                if ((r = usegroup_open(tn->fs)) < 0 || (r = usage_scan(tn)) < 0)
                        return r;
                autoarchive_update(tn);
        }
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
        r = manager_bus_open(t);
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

static void teardown(struct tierd *t) {
        policy_watch_stop(t);
        bus_jobs_abort_all(t);
        /* Before the bus goes: DetachContainer's signals still reach it. */
        containers_stop_all(t);
        t->bus = sd_bus_flush_close_unref(t->bus);
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
                quota_stop(&t->tenants[i]);
                usage_save(&t->tenants[i]);
                autoarchive_stop(&t->tenants[i]);
                usage_free(&t->tenants[i]);
                tally_stop(&t->tenants[i]);
                content_checks_stop(&t->tenants[i]);
                remote_check_free(&t->tenants[i]);
                safe_close(t->tenants[i].subvol_fd);
                safe_close(t->tenants[i].store_fd);
                free(t->tenants[i].subvol_rel);
                explicit_bzero(&t->tenants[i].cred, sizeof(t->tenants[i].cred));
                explicit_bzero(t->tenants[i].headers, sizeof(t->tenants[i].headers));
        }
        if (t->handing_over)
                settle_end_all(t, 0); /* left pending, in the journal */
        else {
                dispatch_fail_all(t);
                if (t->stopping)
                        handover_stop_for_good(t);
        }
        /* A clean exit leaves a complete journal: no keeper needed. */
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
        t->secrets_src = sd_event_source_unref(t->secrets_src);
        t->status_src = sd_event_source_unref(t->status_src);
        t->event = sd_event_unref(t->event);
        policy_free(t->policy);
        free(t->worker_path);
        journal_free(t->journal);
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

int main(int argc, char **argv) {
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
        struct tierd t = { .keeper_pidfd = -1, .policy_inotify_fd = -1, .state_dir = STATE_DIR_DEFAULT };
        _cleanup_free_ char *error = NULL, *holder_binary = NULL;
        const char *holder = HOLDER_DEFAULT_SOCKET;
        bool check_only = false;
        sigset_t mask;
        int c, r;

        log_set_ident("tierd");
        journallog_start();
        while ((c = getopt_long(argc, argv, "p:dh", options, NULL)) >= 0)
                switch (c) {
                case 'p': t.policy_path = optarg; break;
                case 'd': log_set_level(LOG_LVL_DEBUG); break;
                case 'H': holder = optarg; break;
                case 'S': t.state_dir = optarg; break;
                case 'N': holder = NULL; break;
                case 'C': t.policy_path = optarg; check_only = true; break;
                case 'h': usage(); return EXIT_SUCCESS;
                case 'V': puts("tierd " TIERD_VERSION); return EXIT_SUCCESS;
                default: usage(); return 2;
                }
        if (!t.policy_path || optind != argc) {
                usage();
                return 2;
        }
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
        if (r >= 0 && !(t.worker_path = find_helper_binary("tierd-worker")))
                r = -ENOENT;
        if (r >= 0)
                r = run(&t);
        /* A first start that failed leaves nothing in the store (and lets
         * a holder it started exit); one that took over keeps it all for
         * the next try: readers wait rather than read zeros. */
        if (r < 0 && t.store.n_inherited == 0)
                t.stopping = true;
        teardown(&t);
        if (r < 0) {
                log_error_errno(r, "exiting: %m");
                return EXIT_FAILURE;
        }
        log_info(t.handing_over ? "handed over" : "stopped");
        return EXIT_SUCCESS;
}
