/* SPDX-License-Identifier: MIT */
/* The OCI hook's input: strict JSON, every field checked for its type. */
#include "ocihook.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANNOTATION_TENANT "tierd.io/tenant"
#define ANNOTATION_MOUNT_PATH "tierd.io/mount-path"
#define ANNOTATION_READ_ONLY "tierd.io/read-only"
#define ANNOTATION_TRACE "tierd.io/trace"
#define DEFAULT_MOUNT_PATH "/data"

static json_object *parse_json(const char *text, size_t len) {
        json_tokener *tok = json_tokener_new();
        json_object *o = NULL;
        if (!tok || len > (size_t)OCI_CONFIG_MAX) {
                json_tokener_free(tok);
                return NULL;
        }
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, text, (int)len);
        if (json_tokener_get_error(tok) != json_tokener_success || !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                o = NULL;
        }
        json_tokener_free(tok);
        return o;
}

/* A string member, or NULL if absent or not a string. */
static const char *get_str(json_object *o, const char *key) {
        json_object *v;
        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

static json_object *get_obj(json_object *o, const char *key) {
        json_object *v;
        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_object))
                return NULL;
        return v;
}

int oci_hook_parse_state(struct oci_hook *h, const char *text, size_t len, const char **why) {
        if (len > OCI_STATE_MAX || !(h->state = parse_json(text, len)))
                return *why = "the container state on stdin is not a JSON object", -EINVAL;
        h->id = get_str(h->state, "id");
        h->bundle = get_str(h->state, "bundle");
        h->status = get_str(h->state, "status");
        if (!h->id || !*h->id || !h->bundle || h->bundle[0] != '/')
                return *why = "the container state lacks \"id\" or an absolute \"bundle\"", -EINVAL;
        return 0;
}

/* The pod's namespace as the runtime wrote it. Two runtimes' keys that
 * disagree mean someone set one of them by hand: refused. */
static int pod_namespace(json_object *ann, const char **ret) {
        const char *crio = get_str(ann, "io.kubernetes.pod.namespace");
        const char *containerd = get_str(ann, "io.kubernetes.cri.sandbox-namespace");
        if (crio && containerd && strcmp(crio, containerd) != 0)
                return -EINVAL;
        *ret = containerd ?: crio ?: "";
        return 0;
}

/* The pod's and the container's names as the runtime wrote them (CRI-O's
 * keys, containerd's); two that disagree: none. */
static const char *pod_key(json_object *ann, const char *crio_key, const char *containerd_key) {
        const char *crio = get_str(ann, crio_key), *containerd = get_str(ann, containerd_key);
        return crio && containerd && strcmp(crio, containerd) != 0 ? NULL : containerd ?: crio;
}

/* Kubernetes' generateName suffixes and pod-template hashes use these. */
static bool all_of(const char *s, size_t n, const char *set) {
        for (size_t i = 0; i < n; i++)
                if (!s[i] || !strchr(set, s[i]))
                        return false;
        return n > 0;
}
#define K8S_RANDOM "bcdfghjklmnpqrstvwxz2456789"
#define DIGITS "0123456789"

int oci_pod_owner(const char *pod, char *out, size_t size) {
        size_t n = strlen(pod);
        const char *dash = memrchr(pod, '-', n);
        size_t last = dash ? (size_t)(pod + n - dash - 1) : 0;

        /* generateName's suffix first: one of digits only (2, 4-9) is no
         * ordinal when a hash comes before it; a StatefulSet's ordinal
         * that looks like a suffix loses the same '-NUMBER' either way. */
        if (dash && last == 5 && all_of(dash + 1, 5, K8S_RANDOM)) {
                n -= 6;
                const char *hash = memrchr(pod, '-', n);
                size_t len = hash ? (size_t)(pod + n - hash - 1) : 0;
                /* A ReplicaSet's pod-template hash, or a CronJob's minutes. */
                if (hash && ((len >= 6 && len <= 10 && all_of(hash + 1, len, K8S_RANDOM)) ||
                             (len >= 8 && all_of(hash + 1, len, DIGITS))))
                        n -= len + 1;
        } else if (dash && all_of(dash + 1, last, DIGITS)) /* a StatefulSet's ordinal */
                n -= last + 1;
        if (n == 63 && !(dash && last == 5) && all_of(pod + 58, 5, K8S_RANDOM)) {
                /* generateName cut the name before its suffix to 58
                 * characters, and its '-' with it: the suffix goes, and what
                 * is left of the hash after the last '-' (the same cut for
                 * every replica). */
                const char *cut = memrchr(pod, '-', 58);
                n = cut ? (size_t)(cut - pod) : 58;
        }
        if (n == 0)
                return -EINVAL;
        if (n >= size)
                return -ENAMETOOLONG;
        memcpy(out, pod, n);
        out[n] = 0;
        return 0;
}

/* One part of a trace name: what tierd takes (traceformat.h), no '/'. */
static bool trace_part_valid(const char *p) {
        size_t n = strlen(p);
        return n > 0 && !strstr(p, "..") &&
               strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") == n;
}

/* A Kubernetes container with no tierd.io/trace: traced by its pod's owner
 * and its own name, so that every replica of a workload shares one trace.
 * A name tierd would refuse (over 200 bytes, or parts Kubernetes never
 * writes: annotations a runtime did not check) gets none: a trace never
 * fails a start. */
static const char *owner_trace(struct oci_hook *h, json_object *ann) {
        const char *pod = pod_key(ann, "io.kubernetes.pod.name", "io.kubernetes.cri.sandbox-name");
        const char *name = pod_key(ann, "io.kubernetes.container.name", "io.kubernetes.cri.container-name");
        char owner[254];

        if (!pod || !name || oci_pod_owner(pod, owner, sizeof(owner)) < 0 || !trace_part_valid(h->k8s_namespace) ||
            !trace_part_valid(owner) || !trace_part_valid(name))
                return NULL;
        int n = snprintf(h->owner_trace, sizeof(h->owner_trace), "k8s/%s/%s/%s", h->k8s_namespace, owner, name);
        return n < 0 || n > 200 ? NULL : h->owner_trace;
}

int oci_hook_parse_config(struct oci_hook *h, const char *text, size_t len, const char *stage_arg, const char **why) {
        json_object *pid_v;

        if (!(h->config = parse_json(text, len)))
                return *why = "the bundle's config.json is not a JSON object", -EINVAL;
        /* The bundle's annotations; the state's are the same set, as the
         * runtime saw them. */
        json_object *ann = get_obj(h->config, "annotations") ?: get_obj(h->state, "annotations");
        if (!(h->tenant = get_str(ann, ANNOTATION_TENANT)))
                return 0; /* not ours */
        /* A pod's sandbox (pause) container carries the pod's annotations
         * too: it reads nothing, and gets no view and no worker. */
        const char *kind = get_str(ann, "io.kubernetes.cri.container-type") ?: get_str(ann, "io.kubernetes.cri-o.ContainerType");
        if (kind && strcmp(kind, "sandbox") == 0)
                return 0;
        h->ours = true;
        h->stage = stage_arg ?: h->status && strcmp(h->status, "stopped") == 0 ? "poststop" : "createRuntime";
        if (strcmp(h->stage, "poststop") == 0)
                return 0;
        if (strcmp(h->stage, "createRuntime") != 0)
                return *why = "unknown hook stage (createRuntime or poststop)", -EINVAL;

        const char *root_path = get_str(get_obj(h->config, "root"), "path");
        if (!root_path || !*root_path)
                return *why = "config.json has no root.path", -EINVAL;
        if (!json_object_object_get_ex(h->state, "pid", &pid_v) || !json_object_is_type(pid_v, json_type_int) ||
            json_object_get_int64(pid_v) <= 1 || json_object_get_int64(pid_v) > INT32_MAX)
                return *why = "the container state has no valid \"pid\"", -EINVAL;
        h->pid = (uint32_t)json_object_get_int64(pid_v);
        if (root_path[0] == '/')
                h->rootfs = strdup(root_path);
        else if (asprintf(&h->rootfs, "%s/%s", h->bundle, root_path) < 0)
                h->rootfs = NULL;
        if (!h->rootfs)
                return -ENOMEM;
        h->mount_path = get_str(ann, ANNOTATION_MOUNT_PATH) ?: DEFAULT_MOUNT_PATH;
        const char *ro = get_str(ann, ANNOTATION_READ_ONLY);
        h->read_only = ro && strcmp(ro, "true") == 0;
        if (ro && !h->read_only && strcmp(ro, "false") != 0)
                return *why = "annotation " ANNOTATION_READ_ONLY " must be \"true\" or \"false\"", -EINVAL;
        if (pod_namespace(ann, &h->k8s_namespace) < 0)
                return *why = "the pod namespace annotations disagree: refused", -EINVAL;
        h->trace = get_str(ann, ANNOTATION_TRACE) ?: owner_trace(h, ann); /* checked by tierd */
        return 0;
}

void oci_hook_done(struct oci_hook *h) {
        if (h->state)
                json_object_put(h->state);
        if (h->config)
                json_object_put(h->config);
        free(h->rootfs);
        *h = (struct oci_hook){};
}
