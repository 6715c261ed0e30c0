/* SPDX-License-Identifier: MIT */
/*
 * Questions asked of a parsed policy: a tenant by name, whether a reload
 * keeps every place where it is (or needs a restart), whether a tenant's
 * worker must start again, and whether a container may attach.
 */
#include "policy.h"

#include <fnmatch.h>
#include <string.h>

const struct policy_tenant *policy_find_tenant(const struct policy *p, const char *name) {
        for (size_t i = 0; i < p->n_tenants; i++)
                if (strcmp(p->tenants[i].name, name) == 0)
                        return &p->tenants[i];
        return NULL;
}

static bool str_equal(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

bool policy_same_places(const struct policy *a, const struct policy *b, const char **why) {
        if (a->n_tenants != b->n_tenants) {
                *why = "tenants were added or removed";
                return false;
        }
        if (a->worker_uid_first != b->worker_uid_first || a->worker_uid_count != b->worker_uid_count) {
                *why = "worker_uids changed";
                return false;
        }
        bool same_fs = a->n_filesystems == b->n_filesystems;
        for (size_t i = 0; same_fs && i < a->n_filesystems; i++) {
                const struct policy_filesystem *x = &a->filesystems[i], *y = &b->filesystems[i];
                same_fs = strcmp(x->source, y->source) == 0 && strcmp(x->mountpoint, y->mountpoint) == 0 &&
                          strcmp(x->type, y->type) == 0 && str_equal(x->options, y->options);
        }
        if (!same_fs) {
                *why = "filesystems changed";
                return false;
        }
        for (size_t i = 0; i < a->n_tenants; i++) {
                const struct policy_tenant *x = &a->tenants[i], *y = &b->tenants[i];
                if (strcmp(x->name, y->name) != 0) {
                        *why = "tenants were renamed or reordered";
                        return false;
                }
                if (strcmp(x->subvolume, y->subvolume) != 0 || strcmp(x->mount, y->mount) != 0 ||
                    strcmp(x->backend, y->backend) != 0) {
                        *why = "a tenant's subvolume, mount or backend changed";
                        return false;
                }
        }
        return true;
}

bool policy_tenant_worker_equal(const struct policy_tenant *a, const struct policy_tenant *b) {
        size_t i = 0;
        if (!str_equal(a->endpoint, b->endpoint) || !str_equal(a->region, b->region) ||
            !str_equal(a->credentials, b->credentials) || a->virtual_hosted != b->virtual_hosted ||
            a->connect_timeout_usec != b->connect_timeout_usec || a->stall_timeout_usec != b->stall_timeout_usec ||
            !str_equal(a->ca_file, b->ca_file) || !str_equal(a->sse, b->sse) || !str_equal(a->kms_key_id, b->kms_key_id) ||
            a->multipart_threshold != b->multipart_threshold || a->part_size != b->part_size ||
            a->manifest_cache != b->manifest_cache || a->aws.source != b->aws.source ||
            !str_equal(a->aws.profile, b->aws.profile) || !str_equal(a->aws.role_arn, b->aws.role_arn) ||
            !str_equal(a->aws.web_identity_token_file, b->aws.web_identity_token_file) ||
            !str_equal(a->aws.sts_endpoint, b->aws.sts_endpoint))
                return false;
        for (; a->headers && b->headers && a->headers[i] && b->headers[i]; i++)
                if (strcmp(a->headers[i], b->headers[i]) != 0)
                        return false;
        return (!a->headers || !a->headers[i]) && (!b->headers || !b->headers[i]);
}

bool policy_namespace_valid(const char *ns) {
        size_t n = strlen(ns);
        return n > 0 && n <= 63 && strspn(ns, "abcdefghijklmnopqrstuvwxyz0123456789-") == n && ns[0] != '-';
}

bool policy_container_allowed(const struct policy_tenant *t, bool kubernetes, const char *container_id,
                              const char *k8s_namespace, const char **why) {
        if (kubernetes && k8s_namespace && *k8s_namespace) {
                for (char **n = t->namespaces; n && *n; n++)
                        if (strcmp(*n, k8s_namespace) == 0)
                                return true;
                *why = "the pod's Kubernetes namespace is not in the tenant's \"namespaces\"";
                return false;
        }
        for (char **g = t->containers; g && *g; g++)
                if (fnmatch(*g, container_id, 0) == 0)
                        return true;
        *why = kubernetes || !k8s_namespace || !*k8s_namespace
                       ? "the container has no Kubernetes namespace and its id matches none of the tenant's \"containers\""
                       : "its id matches none of the tenant's \"containers\" (a pod namespace annotation counts only "
                         "where the policy says \"kubernetes\": true: any container can write one elsewhere)";
        return false;
}
