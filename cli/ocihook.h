/* SPDX-License-Identifier: MIT */
/*
 * The OCI hook's input, parsed: the container state (stdin) and the bundle's
 * config.json. Pure, so a fuzz target and unit tests drive it with any
 * bytes; cli/container.c does the reading and the D-Bus calls.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OCI_STATE_MAX (1 << 20)
#define OCI_CONFIG_MAX (16 << 20)

struct oci_hook {
        json_object *state, *config; /* owned; the strings below point into them */
        const char *id, *bundle, *status;
        /* From config.json, for a container with tierd.io/tenant: */
        bool ours; /* false: no annotation, or a pod's sandbox: leave it alone */
        const char *tenant, *mount_path, *k8s_namespace, *stage;
        /* Its access trace's name: tierd.io/trace ("": none), else a
         * Kubernetes container's "k8s/NAMESPACE/OWNER/CONTAINER" (owner_trace),
         * else NULL. */
        const char *trace;
        char owner_trace[224];
        char *rootfs; /* malloc'd: root.path, made absolute under the bundle */
        uint32_t pid;
        bool read_only;
};

/* The state: id, an absolute bundle, status. -EINVAL and *why if not. */
int oci_hook_parse_state(struct oci_hook *h, const char *text, size_t len, const char **why);
/* The bundle's config.json, and the stage (stage_arg, or from the state's
 * status: "stopped" is poststop). Not ours: 0 with h->ours false. For
 * createRuntime, also root.path and the pid. -EINVAL and *why if bad. */
int oci_hook_parse_config(struct oci_hook *h, const char *text, size_t len, const char *stage_arg, const char **why);
void oci_hook_done(struct oci_hook *h);

/* The controller a pod's name says made it, as Kubernetes names pods:
 * a Deployment's "NAME-HASH-XXXXX" and a CronJob's "NAME-MINUTES-XXXXX"
 * give NAME; a DaemonSet's, Job's or ReplicaSet's "NAME-XXXXX" and a
 * StatefulSet's "NAME-ORDINAL" give NAME; any other name is its own. (The
 * owner itself is in the API server, which the hook does not ask.) The
 * owner into out (size bytes); -ENAMETOOLONG if it does not fit, -EINVAL
 * if nothing is left. */
int oci_pod_owner(const char *pod, char *out, size_t size);
