/* SPDX-License-Identifier: MIT */
/*
 * tierd: reads the policy, watches each tiered filesystem, places the tenant
 * views, starts a worker per tenant and serves D-Bus. Foreground, logs to
 * stderr. SIGTERM: finish in-flight fills, answer them, stop the workers,
 * remove the views, exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dispatch.h"
#include "fsgroup.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
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
        return true;
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

static int on_terminate(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct tierd *t = userdata;
        (void)s;
        if (t->stopping)
                return 0;
        log_info("signal %u: finishing in-flight fills, then exiting", si->ssi_signo);
        t->stopping = true;
        sd_event_add_time_relative(t->event, &t->stop_src, CLOCK_MONOTONIC, STOP_TIMEOUT_USEC, 0, on_stop_timeout, t);
        tierd_check_idle(t);
        return 0;
}

/* Every event needs an fd: an event the kernel cannot give one reaches the
 * reader as EPERM. Raise the limit as far as we may. */
static void raise_fd_limit(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        log_warning("cannot raise RLIMIT_NOFILE: %m");
        }
}

static int find_worker_binary(struct tierd *t) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        const char *env = NULL;

        if (n < 0)
                return -errno;
        self[n] = 0;
        if (asprintf(&t->worker_path, "%s/tierd-worker", dirname(self)) < 0)
                return -ENOMEM;
        if (access(t->worker_path, X_OK) == 0)
                return 0;
        free(t->worker_path);
        t->worker_path = NULL;
        env = "/usr/libexec/tierd/tierd-worker";
        if (access(env, X_OK) < 0)
                return log_error_errno(ENOENT, "tierd-worker not found next to tierd or in /usr/libexec/tierd");
        t->worker_path = strdup(env);
        return t->worker_path ? 0 : -ENOMEM;
}

static struct tiered_fs *fs_for(struct tierd *t, const char *mountpoint, const char *fstype) {
        for (size_t i = 0; i < t->n_fss; i++)
                if (strcmp(t->fss[i].mountpoint, mountpoint) == 0)
                        return &t->fss[i];
        struct tiered_fs *fs = &t->fss[t->n_fss++];
        *fs = (struct tiered_fs){ .t = t, .tree_fd = -1, .root_fd = -1, .pre_fd = -1, .notif_fd = -1,
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
        t->fss = calloc(p->n_tenants ?: 1, sizeof(*t->fss));
        if (!t->tenants || !t->fss)
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

static int run(struct tierd *t) {
        int r;

        r = setup_tenants(t);
        if (r < 0)
                return r;
        /* Mark every filesystem before any view exists: nothing can reach a
         * stub through a view before tierd serves it. */
        for (size_t i = 0; i < t->n_fss; i++) {
                r = fsgroup_open(&t->fss[i]);
                if (r < 0)
                        return r;
                r = fsgroup_attach(&t->fss[i]);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < t->n_tenants; i++) {
                struct tenant *tn = &t->tenants[i];
                tn->subvol_fd = openat(tn->fs->tree_fd, tn->subvol_rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (tn->subvol_fd < 0)
                        return log_error_errno(errno, "tenant %s: cannot open %s on the private mount: %m",
                                               tn->cfg->name, tn->subvol_rel);
                r = worker_start(&tn->worker);
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
        log_info("serving %zu tenant(s) on %zu filesystem(s)", t->n_tenants, t->n_fss);
        return sd_event_loop(t->event);
}

static void teardown(struct tierd *t) {
        t->bus = sd_bus_flush_close_unref(t->bus);
        for (size_t i = 0; i < t->n_tenants; i++)
                view_remove(&t->tenants[i]);
        for (size_t i = 0; i < t->n_tenants; i++) {
                worker_stop(&t->tenants[i].worker);
                safe_close(t->tenants[i].subvol_fd);
                safe_close(t->tenants[i].store_fd);
                free(t->tenants[i].subvol_rel);
                explicit_bzero(&t->tenants[i].cred, sizeof(t->tenants[i].cred));
                explicit_bzero(t->tenants[i].headers, sizeof(t->tenants[i].headers));
        }
        dispatch_fail_all(t);
        for (size_t i = 0; i < t->n_fss; i++) {
                fsgroup_close(&t->fss[i]);
                free(t->fss[i].mountpoint);
                free(t->fss[i].fstype);
        }
        free(t->fss);
        free(t->tenants);
        t->stop_src = sd_event_source_unref(t->stop_src);
        t->secrets_src = sd_event_source_unref(t->secrets_src);
        t->event = sd_event_unref(t->event);
        policy_free(t->policy);
        free(t->worker_path);
}

static void usage(void) {
        fprintf(stderr, "Usage: tierd --policy FILE [--debug]\n"
                        "Serves the tenants of FILE (JSON, see README.md): watches their filesystems,\n"
                        "places their views and restores released files on first access.\n");
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "policy", required_argument, NULL, 'p' },
                { "debug", no_argument, NULL, 'd' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct tierd t = {};
        _cleanup_free_ char *error = NULL;
        sigset_t mask;
        int c, r;

        log_set_ident("tierd");
        while ((c = getopt_long(argc, argv, "p:dh", options, NULL)) >= 0)
                switch (c) {
                case 'p': t.policy_path = optarg; break;
                case 'd': log_set_level(LOG_LVL_DEBUG); break;
                case 'h': usage(); return EXIT_SUCCESS;
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
        if (geteuid() != 0) {
                log_error("tierd must run as root (fanotify pre-content groups need CAP_SYS_ADMIN)");
                return EXIT_FAILURE;
        }
        raise_fd_limit();
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
        if (r >= 0)
                r = find_worker_binary(&t);
        if (r >= 0)
                r = run(&t);
        teardown(&t);
        if (r < 0) {
                log_error_errno(r, "exiting: %m");
                return EXIT_FAILURE;
        }
        log_info("stopped");
        return EXIT_SUCCESS;
}
