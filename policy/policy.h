/* SPDX-License-Identifier: MIT */
/*
 * The JSON policy: parse and validate. Pure: no side effects beyond reading
 * the file, so every decision is unit-testable. The schema is documented in
 * README.md ("Policy").
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POLICY_VERSION 1
#define POLICY_DIR_FILE "policy.json" /* the policy in a directory given as the policy path */
#define POLICY_FILE_MAX (4u << 20) /* bytes of a policy, read or parsed */

/* Where an s3:// tenant's keys come from (policy/policyaws.c; the sources:
 * supervisor/workers/awscreds.c). */
enum creds_source {
        CREDS_FROM_FILE,         /* "credentials", a shared-credentials file, its "profile" */
        CREDS_FROM_ENV,          /* tierd's AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN */
        CREDS_FROM_WEB_IDENTITY, /* STS AssumeRoleWithWebIdentity with a token file (IRSA) */
        CREDS_FROM_CONTAINER,    /* AWS_CONTAINER_CREDENTIALS_FULL_URI (EKS Pod Identity, ECS) */
        CREDS_FROM_IMDS,         /* EC2's instance metadata, IMDSv2 */
        CREDS_FROM_CHAIN,        /* the first of these that tierd's environment sets up, as AWS SDKs look */
};

struct policy_aws {
        enum creds_source source;
        char *profile;                 /* of the credentials file; NULL: AWS_PROFILE, else "default" */
        char *role_arn;                /* web_identity; NULL: AWS_ROLE_ARN */
        char *web_identity_token_file; /* web_identity; NULL: AWS_WEB_IDENTITY_TOKEN_FILE */
        char *sts_endpoint;            /* NULL: AWS_ENDPOINT_URL_STS, else STS's regional endpoint */
};
const char *policy_creds_source_name(enum creds_source s);

struct policy_tenant {
        char *name;
        char *subvolume; /* absolute, normalized */
        char *mount;     /* absolute, normalized: the host view */
        /* Containers (supervisor/views/containers.c): which may attach the tenant's view */
        char **namespaces; /* Kubernetes namespaces, NULL-terminated */
        char **containers; /* container id globs for containers outside Kubernetes, NULL-terminated */
        /* "allow_setuid_mounts": the subvolume may be reachable on the host
         * through a mount without nosuid,nodev (supervisor/views/hostmounts.c). */
        bool allow_setuid_mounts;
        char *backend;   /* URL */
        uint64_t chunk;      /* fill granularity */
        uint64_t readahead;  /* added to sequential reads */
        uint64_t small_file; /* files below this restore whole at first access */
        /* Remote stores (s3://, http(s)://) */
        char *endpoint;        /* s3: "http(s)://host[:port]"; NULL: AWS's regional endpoint */
        char *region;          /* s3 */
        char *credentials;     /* s3: AWS shared-credentials file */
        struct policy_aws aws; /* s3: where the keys come from */
        bool virtual_hosted;   /* s3 addressing: bucket in the host name */
        uint64_t connect_timeout_usec, stall_timeout_usec;
        char *ca_file;         /* private CA bundle */
        char *sse;             /* s3: "AES256" or "aws:kms" */
        char *kms_key_id;      /* s3: with "aws:kms" */
        char **headers;        /* http: "Name: value" or "Name: @FILE" lines, NULL-terminated */
        uint64_t multipart_threshold, part_size;
        /* The policy engine (policy/engine.c) */
        uint64_t quota;                 /* local bytes allowed; 0: no quota */
        double high_watermark, low_watermark; /* fractions of quota */
        uint64_t archive_after_usec;    /* 0: no automatic archive */
        uint64_t archive_min_size;      /* smaller files are not archived automatically */
        uint64_t archive_rate;          /* upload bytes per second; 0: unbounded */
        uint64_t prefetch_rate;         /* bytes a second fetched ahead of readers (traces, hydration); 0: unbounded */
        uint64_t restore_rate;          /* bytes a second of readers' fills; 0: unbounded */
        uint64_t trace_window_usec;     /* a trace records first touches this long: supervisor/traces/ */
        char **pin;                     /* globs relative to the subvolume, NULL-terminated */
        bool restore_whole;             /* "restore": "whole" or "open" */
        bool restore_open;              /* "restore": "open": whole before a read-only open returns */
        bool restore_progressive;       /* "restore": "progressive": a file read in part, then whole in the background */
        bool hydrate_pinned;            /* the same for pinned files only (pin globs, tierctl pin) */
        bool verify;                    /* ranged fills checked against the chunk manifest */
        double fill_check;              /* the share of whole restores tierd hashes itself: events/fillwatch.c */
        bool catalog;                   /* keep the tenant's catalog in its store: supervisor/store/catalog.c */
        char *catalog_key;              /* the file of the key that authenticates it (required with catalog) */
        uint64_t catalog_retention_usec; /* its history kept, and the objects it names: supervisor/store/gc.c */
        uint64_t gc_grace_usec;          /* objects younger than this are never collected */
        uint64_t trace_keep_usec;        /* a trace not saved for this long is collected; 0: never */
        uint64_t manifest_cache;        /* the worker's cache of manifest parts, bytes */
};

#define POLICY_WORKER_UIDS_DEFAULT_FIRST 59000u
#define POLICY_WORKER_UIDS_DEFAULT_COUNT 1000u

/* A tiered filesystem tierd mounts itself ("filesystems"), marking it
 * before anything can reach it: supervisor/views/bootmount.c. */
struct policy_filesystem {
        char *source;     /* "/dev/...", "UUID=...", "LABEL=..." or "PARTUUID=..." */
        char *mountpoint; /* absolute, normalized */
        char *type;       /* btrfs, xfs or ext4 */
        char *options;    /* comma-separated, as mount -o; NULL: none */
};

#define POLICY_GUARD_AFTER_DEFAULT_USEC (30 * 1000000ull)

struct policy {
        unsigned version;
        struct policy_filesystem *filesystems;
        size_t n_filesystems;
        uint32_t worker_uid_first, worker_uid_count; /* "worker_uids": one uid and gid per worker */
        char *admin_group; /* "admin_group": its members may change files too; NULL: root only */
        /* "guard_after": how long readers of files not whole wait for an
         * absent tierd before tierd-holder's guard answers them EIO. */
        uint64_t guard_after_usec;
        bool kubernetes; /* "kubernetes": containers are pods whose namespace annotation the CRI wrote */
        bool landlock_optional; /* "require_landlock": false: workers run unfenced where Landlock is missing */
        struct policy_tenant *tenants;
        size_t n_tenants;
};

/* On failure returns a negative errno and, for a bad policy, *error names the
 * origin (file), the tenant and the key (malloc'd; caller frees). */
int policy_parse(const char *text, size_t len, const char *origin, struct policy **ret, char **error);
int policy_load_file(const char *path, struct policy **ret, char **error);
/* The file's text (malloc'd, NUL-terminated), as policy_load_file reads it. */
int policy_read_file(const char *path, char **ret, size_t *ret_len, char **error);
/* A new policy text in which the tenant's keys named in patch (a JSON
 * object; null removes a key) are set; the whole result is validated as a
 * policy. -ENOENT no such tenant, -EINVAL bad patch or result; *error says
 * why (malloc'd). policy/edit.c. */
int policy_edit_tenant(const char *text, size_t len, const char *origin, const char *tenant, const char *patch,
                       char **ret_text, char **error);
/* The first key of patch (SetTenantPolicy's JSON) that only root may set
 * (where data goes, which secret is used, which containers see it), or
 * NULL. policy/edit.c. */
const char *policy_patch_root_only_key(const char *patch);
/* The keys patch sets, "a, b removed" (no value: values may be secrets);
 * malloc'd, NULL without memory. */
char *policy_patch_keys(const char *patch);
void policy_free(struct policy *p);
const struct policy_tenant *policy_find_tenant(const struct policy *p, const char *name);
/* A Kubernetes namespace name: a DNS label (at most 63 of [a-z0-9-], not
 * starting with '-'). What else is named cannot match. */
bool policy_namespace_valid(const char *ns);
/* May a container attach the tenant's view? Where the policy says the
 * runtime is Kubernetes' (kubernetes: its CRI writes the pod namespace
 * annotation, a pod cannot) and k8s_namespace is not empty, its namespace
 * must be in "namespaces"; otherwise the annotation is not trusted (any
 * container can set one under podman or plain runc) and its id must match
 * a glob of "containers". false: *why says what the policy lacks. */
bool policy_container_allowed(const struct policy_tenant *t, bool kubernetes, const char *container_id,
                              const char *k8s_namespace, const char **why);

/* Can b replace a in a running tierd? The same tenants in the same order,
 * each on the same subvolume, view and backend, and the same worker uids:
 * true. Otherwise false, and *why names the first difference (static). */
bool policy_same_places(const struct policy *a, const struct policy *b, const char **why);
/* Do two tenants' workers need the same configuration (endpoint, region,
 * credentials, timeouts, TLS, encryption, headers, upload sizes)? */
bool policy_tenant_worker_equal(const struct policy_tenant *a, const struct policy_tenant *b);
