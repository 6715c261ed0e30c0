/* SPDX-License-Identifier: MIT */
/*
 * Containers: AttachContainer places a tenant's view inside a container and
 * starts a worker for it; the container's readers are routed to that worker
 * (by cgroup, or by mount namespace id). DetachContainer, or the death of the
 * container's init, undoes it all.
 */
#pragma once

#include "tierd.h"

struct container_request {
        const char *id;
        const char *tenant;
        pid_t pid;               /* the container's init, host numbering */
        const char *rootfs;      /* its root before pivot_root (the OCI hook's), or "" once it runs */
        const char *mount_path;  /* where the view appears inside, such as /data */
        const char *k8s_namespace; /* the pod's namespace, or "" outside Kubernetes */
        bool read_only;
        const char *trace; /* a trace name (traces/trace.h), or NULL */
};

/* What a predecessor recorded of an attached container (containerstate.c). */
struct container_record {
        uint64_t start_time, mntns_id, view_mnt_id, attached_usec;
        bool idmapped;
};

/* 0 and *ret on success (also when the same container is attached already).
 * -ENOENT no such tenant, -EPERM the policy refuses it, -EEXIST the id is
 * attached to another pid or tenant, -ESRCH no such process, -EINVAL a bad
 * argument, other errors from the kernel; *why says what (static). */
int container_attach(struct tierd *t, const struct container_request *req, struct container **ret, const char **why);
/* Stops its worker (what it had in flight goes to the tenant's host
 * worker: no reader is left waiting), unmounts the view if the container
 * still runs, and frees it. */
void container_detach(struct container *c, const char *reason);
struct container *container_find(struct tierd *t, const char *id);
/* A container a predecessor attached: if its init is the same process in
 * the same mount namespace, it gets a worker again (its view is in place). */
int container_adopt(struct tierd *t, const struct container_request *req, const struct container_record *rec);
/* tierd stops: containers are detached (views removed) unless it hands
 * over, when views and readers stay for the successor. */
void containers_stop_all(struct tierd *t);

/* Which container the thread tid belongs to: its serial, 0 for the host. */
uint64_t container_of_thread(struct tenant *tn, pid_t tid);
/* The attached container of that serial, or NULL (0: the host). */
struct container *container_by_serial(struct tenant *tn, uint64_t serial);
/* The worker that serves serial's readers: the container's, or the host
 * worker if it is gone. */
struct worker *container_worker(struct tenant *tn, uint64_t serial);
void container_count_fill(struct tenant *tn, uint64_t serial, uint64_t bytes, bool ok);
void container_count_wait(struct tenant *tn, uint64_t serial, double seconds);

/* Every container worker of the tenant: new settings, new credentials. */
void containers_restart_workers(struct tenant *tn);
void containers_send_update(struct tenant *tn, unsigned what);
bool containers_idle(struct tierd *t);
/* Every worker tierd runs, one after the other: the tenants' host workers,
 * then the containers'. w NULL: the first; returns NULL after the last.
 *   for (struct worker *w = NULL; (w = worker_next(t, w));) */
struct worker *worker_next(struct tierd *t, struct worker *w);
