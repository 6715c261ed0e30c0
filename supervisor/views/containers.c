/* SPDX-License-Identifier: MIT */
/*
 * Containers: a tenant's view inside a container's mount namespace and a
 * worker of its own for the container's readers. A crash of that worker
 * touches no other container; its work goes to a replacement like any
 * worker's, and to the tenant's host worker when the container goes.
 */
#include "containers.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "containerstate.h"
#include "face.h"
#include "log.h"
#include "prefetch.h"
#include "trace.h"
#include "traceformat.h"
#include "macro.h"
#include "mount-uapi.h"
#include "nsmount.h"
#include "workers.h"

#define CONTAINER_ID_MAX 128
#define MOUNT_PATH_MAX 1024

static uint64_t now(clockid_t clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* The "0::" line of /proc/PID/cgroup: the cgroup v2 path. */
static int read_cgroup(pid_t pid, char *buf, size_t size) {
        char p[64], text[4096];
        snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, text, sizeof(text) - 1);
        if (n < 0)
                return -errno;
        text[n] = 0;
        for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, "0::", 3) == 0) {
                        size_t len = strcspn(line + 3, "\n");
                        if (len >= size)
                                return -ENAMETOOLONG;
                        memcpy(buf, line + 3, len);
                        buf[len] = 0;
                        return 0;
                }
        return -ENOENT;
}

static bool cgroup_under(const char *cg, const char *base) {
        size_t n = strlen(base);
        return strncmp(cg, base, n) == 0 && (cg[n] == '/' || cg[n] == 0);
}

static bool same_namespace(pid_t pid, const char *type) {
        char p[64], self[64];
        struct stat a, b;
        snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)pid, type);
        snprintf(self, sizeof(self), "/proc/self/ns/%s", type);
        return stat(p, &a) == 0 && stat(self, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

static bool process_alive(int pidfd) { return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0; }

static int process_start_time(pid_t pid, uint64_t *ret) {
        char p[64], text[1024];
        snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
        if (n <= 0)
                return -ESRCH;
        text[n] = 0;
        /* After the command's closing parenthesis: field 3 onward; the
         * start time is field 22. */
        char *q = strrchr(text, ')');
        for (int field = 2; q && field < 22; field++)
                q = strchr(q + 1, ' ');
        if (!q || sscanf(q + 1, "%" SCNu64, ret) != 1)
                return -EIO;
        return 0;
}

static bool id_valid(const char *id) {
        size_t n = strlen(id);
        if (n == 0 || n > CONTAINER_ID_MAX || id[0] == '.')
                return false;
        for (const char *p = id; *p; p++)
                if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') && !(*p >= '0' && *p <= '9') &&
                    !strchr("_.+-", *p))
                        return false;
        return true;
}

/* Absolute, normalized, not "/": no "." or ".." components, no "//". */
static bool mount_path_valid(const char *p) {
        size_t n = strlen(p);
        if (p[0] != '/' || n < 2 || n > MOUNT_PATH_MAX || p[n - 1] == '/')
                return false;
        for (const char *c = p; *c; c++) {
                if ((unsigned char)*c < 0x20)
                        return false;
                if (c[0] == '/' && (c[1] == '/' || (c[1] == '.' && (c[2] == '/' || c[2] == 0)) ||
                                    (c[1] == '.' && c[2] == '.' && (c[3] == '/' || c[3] == 0))))
                        return false;
        }
        return true;
}

static int check_request(const struct container_request *req, const char **why) {
        if (!id_valid(req->id))
                return *why = "the container id must have 1 to 128 letters, digits, '_', '.', '+' or '-' (not first '.')",
                       -EINVAL;
        if (req->pid <= 1)
                return *why = "the container's pid must be above 1", -EINVAL;
        if (!mount_path_valid(req->mount_path))
                return *why = "the mount path must be absolute and normalized (no '.', '..' or '//'), not '/'",
                       -EINVAL;
        static const char *const kernel_trees[] = { "/proc", "/sys", "/dev" };
        for (size_t i = 0; i < ARRAY_SIZE(kernel_trees); i++) {
                size_t n = strlen(kernel_trees[i]);
                if (strncmp(req->mount_path, kernel_trees[i], n) == 0 && (req->mount_path[n] == '/' || !req->mount_path[n]))
                        return *why = "the mount path must not be under /proc, /sys or /dev", -EINVAL;
        }
        if (req->rootfs[0] && (req->rootfs[0] != '/' || strlen(req->rootfs) >= 4096))
                return *why = "the rootfs must be an absolute path, or empty for a running container's root",
                       -EINVAL;
        if (req->trace && *req->trace && !trace_name_valid(req->trace))
                return *why = TRACE_NAME_RULE, -EINVAL;
        /* A pod namespace is a DNS label, as the policy's "namespaces" are. */
        size_t ns_len = strlen(req->k8s_namespace);
        if (ns_len && !policy_namespace_valid(req->k8s_namespace))
                return *why = "the pod namespace is not a Kubernetes namespace name", -EINVAL;
        /* The names the OCI hook gives pods: a pod of one namespace must not
         * write runs into (or be fetched ahead with) another's. */
        if (req->trace && strncmp(req->trace, "k8s/", 4) == 0 &&
            (!ns_len || strncmp(req->trace + 4, req->k8s_namespace, ns_len) != 0 || req->trace[4 + ns_len] != '/'))
                return *why = "trace names k8s/NAMESPACE/... are those of NAMESPACE's pods, and this container's pod "
                              "namespace is another (or none)",
                       -EINVAL;
        return 0;
}

struct container *container_find(struct tierd *t, const char *id) {
        for (struct container *c = t->containers; c; c = c->next)
                if (strcmp(c->id, id) == 0)
                        return c;
        return NULL;
}

static int on_container_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        (void)s, (void)fd, (void)revents;
        container_detach(userdata, "its init exited");
        return 0;
}

static void container_free(struct container *c) {
        if (!c)
                return;
        if (c->recording)
                trace_record_drop(c->recording);
        if (c->prefetch)
                prefetch_cancel(c->prefetch);
        c->exit_src = sd_event_source_disable_unref(c->exit_src);
        safe_close(c->pidfd);
        safe_close(c->mntns_fd);
        free(c->id);
        free(c->rootfs);
        free(c->mount_path);
        free(c->k8s_namespace);
        free(c->cgroup);
        free(c);
}

/* What identifies the container's processes: its cgroup when it has its
 * own (a process that unshares its mount namespace keeps it), and its
 * mount namespace id. */
static int container_identify(struct container *c, const char **why) {
        char p[64], cg[1024], own[1024];

        snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)c->pid);
        if ((c->pidfd = pidfd_open(c->pid, 0)) < 0)
                return *why = "no such process", -ESRCH;
        if ((c->mntns_fd = open(p, O_RDONLY | O_CLOEXEC)) < 0 || ioctl(c->mntns_fd, NS_GET_MNTNS_ID, &c->mntns_id) < 0)
                return *why = "cannot open the process's mount namespace", -errno;
        /* Opened after the pidfd: if the process still lives, the namespace
         * was its, not a successor's with the same pid. */
        if (!process_alive(c->pidfd))
                return *why = "the process exited", -ESRCH;
        if (process_start_time(c->pid, &c->start_time) < 0)
                return *why = "the process exited", -ESRCH;
        if (same_namespace(c->pid, "mnt"))
                return *why = "the process shares tierd's mount namespace: not a container", -EINVAL;
        if (read_cgroup(c->pid, cg, sizeof(cg)) == 0 && read_cgroup(getpid(), own, sizeof(own)) == 0 &&
            strcmp(cg, "/") != 0 && strcmp(cg, own) != 0 && !(c->cgroup = strdup(cg)))
                return -ENOMEM;
        /* Everything above was read by pid: still the same process? */
        if (!process_alive(c->pidfd))
                return *why = "the process exited", -ESRCH;
        return 0;
}

static int container_place_view(struct container *c, const char **why) {
        struct tenant *tn = c->tenant;
        char p[64];
        /* The filesystem's own atime mode: tierd's mount, cloned here, is noatime. */
        struct nsmount_options o = { .read_only = c->read_only, .userns_fd = -1, .atime = tn->fs->atime_attr };

        /* A user-namespace container sees owners through its mapping: an
         * idmapped clone shows them as they are on disk. */
        if (!same_namespace(c->pid, "user")) {
                snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)c->pid);
                if ((o.userns_fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
                        return *why = "cannot open the container's user namespace", -errno;
                if (!process_alive(c->pidfd)) {
                        close(o.userns_fd);
                        return *why = "the process exited", -ESRCH;
                }
                c->idmapped = true;
        }
        /* From tierd's private mount: nothing mounted over the host's path
         * of the subvolume is cloned. */
        int clone = nsmount_clone(tn->subvol_fd, tn->cfg->subvolume, &o, &c->view_mnt_id);
        safe_close(o.userns_fd);
        if (clone < 0)
                return *why = "cannot clone the tenant's subvolume mount", clone;
        int r = nsmount_place(clone, c->mntns_fd, c->rootfs, c->mount_path, why);
        close(clone);
        return r;
}

static struct container *container_new(struct tenant *tn, const struct container_request *req) {
        struct container *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        *c = (struct container){ .tenant = tn, .pid = req->pid, .pidfd = -1, .mntns_fd = -1, .read_only = req->read_only,
                                 .id = strdup(req->id), .rootfs = strdup(req->rootfs),
                                 .mount_path = strdup(req->mount_path), .k8s_namespace = strdup(req->k8s_namespace),
                                 .worker = { .tenant = tn, .sock = -1, .state = WORKER_STOPPED } };
        c->worker.container = c;
        if (!c->id || !c->rootfs || !c->mount_path || !c->k8s_namespace) {
                container_free(c);
                return NULL;
        }
        return c;
}

/* Its worker and the watch on its init; then it is served. */
static int container_serve(struct container *c, const char **why) {
        struct tierd *t = c->tenant->t;
        int r = worker_start(&c->worker);
        if (r < 0)
                return *why = "cannot start the container's worker", r;
        r = sd_event_add_io(t->event, &c->exit_src, c->pidfd, EPOLLIN, on_container_exit, c);
        if (r < 0) {
                worker_stop(&c->worker);
                return *why = "cannot watch the container's init", r;
        }
        /* A cgroup shared with another container (a runtime's own, on a
         * hybrid host) tells neither apart: both go by mount namespace. */
        for (struct container *o = t->containers; c->cgroup && o; o = o->next)
                if (o->cgroup && strcmp(o->cgroup, c->cgroup) == 0) {
                        log_info("containers %s and %s share cgroup %s: told apart by mount namespace", o->id, c->id,
                                 c->cgroup);
                        o->cgroup = mfree(o->cgroup);
                        c->cgroup = mfree(c->cgroup);
                }
        c->serial = ++t->last_container_serial;
        c->next = t->containers;
        t->containers = c;
        c->tenant->n_containers++;
        return 0;
}

/* Its trace fetched ahead of its readers, and this run recorded: neither
 * stops the container (logged). */
static void container_trace(struct container *c, const char *name) {
        int r = prefetch_start(c->tenant, c, name);
        if (r == -EOPNOTSUPP) {
                log_info("container %s: trace %s: none, the tenant's traces are off (trace_window 0)", c->id, name);
                return;
        }
        if (r < 0)
                log_error_errno(r, "container %s: trace %s: cannot fetch it ahead: %m", c->id, name);
        if ((r = trace_record_start(c->tenant, c, name)) < 0)
                log_error_errno(r, "container %s: trace %s: cannot record it: %m", c->id, name);
}

int container_attach(struct tierd *t, const struct container_request *req, struct container **ret, const char **why) {
        uint64_t start = now(CLOCK_MONOTONIC);
        struct container *c, *old;
        struct tenant *tn;
        int r;

        if ((r = check_request(req, why)) < 0)
                return r;
        if (!(tn = tierd_find_tenant(t, req->tenant)))
                return *why = "no such tenant in the policy", -ENOENT;
        if (!policy_container_allowed(tn->cfg, t->policy->kubernetes, req->id, req->k8s_namespace, why)) {
                log_warning("container %s (pod namespace '%s'): refused the view of tenant %s: %s", req->id,
                            req->k8s_namespace, tn->cfg->name, *why);
                return -EPERM;
        }
        if ((old = container_find(t, req->id))) {
                if (old->pid == req->pid && old->tenant == tn && strcmp(old->mount_path, req->mount_path) == 0 &&
                    old->read_only == req->read_only) {
                        *ret = old; /* the hook ran twice: nothing more to do */
                        return 0;
                }
                return *why = "a container with this id is attached already (another pid, tenant, mount path or mode)",
                       -EEXIST;
        }
        if (!(c = container_new(tn, req)))
                return -ENOMEM;
        if ((r = container_identify(c, why)) < 0)
                ;
        else if ((r = container_place_view(c, why)) < 0)
                log_error_errno(r, "container %s: tenant %s's view at %s: %s: %m", c->id, tn->cfg->name, c->mount_path,
                                *why ?: "failed");
        else if ((r = container_serve(c, why)) < 0)
                nsmount_remove(c->mntns_fd, c->rootfs, c->mount_path, c->view_mnt_id);
        if (r < 0) {
                container_free(c);
                return r;
        }
        c->attached_usec = now(CLOCK_REALTIME);
        c->attach_took_usec = now(CLOCK_MONOTONIC) - start;
        /* Kept in the state directory: a tierd that takes over serves it too. */
        container_state_save(c);
        log_info("container %s (pid %d%s%s): tenant %s's view at %s%s, worker %d, routed by %s (%.1f ms)", c->id,
                 (int)c->pid, c->k8s_namespace[0] ? ", pod namespace " : "", c->k8s_namespace, tn->cfg->name,
                 c->mount_path, c->idmapped ? " (idmapped)" : "", (int)c->worker.pid,
                 c->cgroup ? "cgroup" : "mount namespace", (double)c->attach_took_usec / 1000.0);
        FACE_TELL(c->tenant->t, container_attached, c);
        if (req->trace && *req->trace)
                container_trace(c, req->trace);
        *ret = c;
        return 0;
}

int container_adopt(struct tierd *t, const struct container_request *req, const struct container_record *rec) {
        const char *why = NULL;
        struct container *c;
        struct tenant *tn = tierd_find_tenant(t, req->tenant);
        int r;

        if (!tn || check_request(req, &why) < 0 || container_find(t, req->id)) {
                log_warning("container %s: its record names no tenant of this policy or is invalid: not adopted",
                            req->id);
                return -EINVAL;
        }
        if (!(c = container_new(tn, req)))
                return -ENOMEM;
        /* The same process (its start time) in the same mount namespace:
         * not a successor that was given the same pid. */
        r = container_identify(c, &why);
        if (r >= 0 && (c->start_time != rec->start_time || c->mntns_id != rec->mntns_id))
                r = -ESRCH, why = "the process is not the one attached";
        bool same = r >= 0;
        c->view_mnt_id = rec->view_mnt_id;
        if (same && !policy_container_allowed(tn->cfg, t->policy->kubernetes, req->id, req->k8s_namespace, &why))
                r = -EPERM;
        if (r >= 0) {
                c->idmapped = rec->idmapped;
                c->attached_usec = rec->attached_usec;
                r = container_serve(c, &why);
        }
        if (r < 0) {
                log_warning("container %s: not adopted (%s)%s", req->id, why ?: strerror(-r),
                            same ? ": its view is removed" : "");
                /* No view stays that no tierd serves. */
                if (same)
                        nsmount_remove(c->mntns_fd, c->rootfs, c->mount_path, c->view_mnt_id);
                container_free(c);
                return r;
        }
        log_info("container %s (pid %d): adopted from the previous tierd, tenant %s, worker %d", c->id, (int)c->pid,
                 tn->cfg->name, (int)c->worker.pid);
        return 0;
}

void container_detach(struct container *c, const char *reason) {
        struct tierd *t = c->tenant->t;

        for (struct container **p = &t->containers; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        c->tenant->n_containers--;
        c->exit_src = sd_event_source_disable_unref(c->exit_src);
        /* A container still running keeps no view of a tenant it left. */
        if (process_alive(c->pidfd)) {
                int r = nsmount_remove(c->mntns_fd, c->rootfs, c->mount_path, c->view_mnt_id);
                if (r < 0)
                        log_error_errno(r, "container %s: cannot unmount the view at %s: %m", c->id, c->mount_path);
        }
        if (c->recording)
                trace_record_end(c->recording, "container gone");
        /* Its readers' fills finish on the host worker: none waits forever. */
        worker_hand_over(&c->worker, &c->tenant->worker);
        container_state_forget(t, c->id);
        log_info("container %s: detached from tenant %s (%s)", c->id, c->tenant->cfg->name, reason);
        FACE_TELL(c->tenant->t, container_detached, c, reason);
        container_free(c);
        tierd_check_idle(t);
}

void containers_stop_all(struct tierd *t) {
        while (t->containers) {
                struct container *c = t->containers;
                if (t->stopping) {
                        container_detach(c, "tierd stopped");
                        continue;
                }
                /* A handover, or a start that failed after taking over:
                 * the view and the record stay (readers may be in it), the
                 * worker's events stay pending for the next tierd. */
                t->containers = c->next;
                c->tenant->n_containers--;
                worker_abandon(&c->worker);
                container_free(c);
        }
}

uint64_t container_of_thread(struct tenant *tn, pid_t tid) {
        char cg[1024];
        uint64_t mntns = 0;

        if (!tn->n_containers || tid <= 0)
                return 0;
        struct container *best = NULL;
        if (read_cgroup(tid, cg, sizeof(cg)) == 0)
                /* The deepest: a container's cgroup may hold another's. */
                for (struct container *c = tn->t->containers; c; c = c->next)
                        if (c->tenant == tn && c->cgroup && cgroup_under(cg, c->cgroup) &&
                            (!best || strlen(c->cgroup) > strlen(best->cgroup)))
                                best = c;
        if (best)
                return best->serial;
        for (struct container *c = tn->t->containers; c; c = c->next) {
                if (c->tenant != tn)
                        continue;
                if (!mntns && !(mntns = nsmount_mntns_id(tid)))
                        return 0;
                if (mntns == c->mntns_id)
                        return c->serial;
        }
        return 0;
}

struct container *container_by_serial(struct tenant *tn, uint64_t serial) {
        for (struct container *c = serial ? tn->t->containers : NULL; c; c = c->next)
                if (c->serial == serial)
                        return c->tenant == tn ? c : NULL;
        return NULL;
}

struct worker *container_worker(struct tenant *tn, uint64_t serial) {
        struct container *c = container_by_serial(tn, serial);
        /* A worker that crash-looped into "failed" takes no new work. */
        return c && c->worker.state != WORKER_FAILED ? &c->worker : &tn->worker;
}

void container_count_fill(struct tenant *tn, uint64_t serial, uint64_t bytes, bool ok) {
        struct container *c = container_by_serial(tn, serial);
        if (!c)
                return;
        if (ok) {
                c->fills++;
                c->fill_bytes += bytes;
        } else
                c->fill_errors++;
}

void container_count_wait(struct tenant *tn, uint64_t serial, double seconds) {
        struct container *c = container_by_serial(tn, serial);
        if (c)
                wait_histogram_add(&c->wait, seconds);
}

void containers_restart_workers(struct tenant *tn) {
        for (struct container *c = tn->t->containers; c; c = c->next)
                if (c->tenant == tn)
                        worker_restart_planned(&c->worker);
}

void containers_send_update(struct tenant *tn, unsigned what) {
        for (struct container *c = tn->t->containers; c; c = c->next)
                if (c->tenant == tn)
                        worker_send_update(&c->worker, what);
}

struct worker *worker_next(struct tierd *t, struct worker *w) {
        size_t i = !w ? 0 : w->container ? t->n_tenants : (size_t)(w->tenant - t->tenants) + 1;
        if (i < t->n_tenants)
                return &t->tenants[i].worker;
        struct container *c = !w || !w->container ? t->containers : w->container->next;
        return c ? &c->worker : NULL;
}

bool containers_idle(struct tierd *t) {
        for (struct container *c = t->containers; c; c = c->next)
                if (!worker_idle(&c->worker))
                        return false;
        return true;
}
