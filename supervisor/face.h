/* SPDX-License-Identifier: MIT */
/*
 * What supervisor/ tells the face over it. dbus/ is that face
 * (dbus/managerbus.c, bus_face): it sets t->face when it opens and turns
 * each call into a signal or a changed property. cmd/tierd.c, the only
 * file that names both, hands it to tierd_main. supervisor/ never names dbus/, so the
 * arrows between folders go down only, and it runs the same with no face
 * at all (t->face NULL: before the bus is open, or in a unit test).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct tierd;
struct tenant;
struct container;
struct batch;

struct tierd_face {
        /* Called by tierd_main once tierd serves (it sets t->face), and at
         * its stop, after the batches are told (it clears t->face). */
        int (*open)(struct tierd *t);
        void (*close)(struct tierd *t);
        void (*policy_reloaded)(struct tierd *t);
        void (*tenant_worker_started)(struct tenant *tn);
        void (*tenant_worker_exited)(struct tenant *tn, pid_t pid, bool killed, int status);
        void (*tenant_worker_changed)(struct tenant *tn);
        /* A write needs need bytes more than the tenant's quota leaves. */
        void (*tenant_quota_pressure)(struct tenant *tn, uint64_t need);
        void (*container_attached)(struct container *c);
        void (*container_detached)(struct container *c, const char *reason);
        void (*container_worker_changed)(struct container *c);
        /* batch.h: made; its progress worth telling; about to go, with
         * result "done", "failed", "canceled" or "aborted". */
        void (*batch_added)(struct batch *b);
        void (*batch_changed)(struct batch *b);
        void (*batch_removed)(struct batch *b, const char *result);
};

/* Tells the face, if there is one: FACE_TELL(t, tenant_worker_changed, tn). */
#define FACE_TELL(t, hook, ...) \
        do { \
                const struct tierd_face *face_ = (t)->face; \
                if (face_ && face_->hook) \
                        face_->hook(__VA_ARGS__); \
        } while (0)
