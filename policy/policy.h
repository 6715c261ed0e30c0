/* SPDX-License-Identifier: MIT */
/*
 * The JSON policy: parse and validate. Pure: no side effects beyond reading
 * the file, so every decision is unit-testable. The schema is documented in
 * README.md ("Policy").
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define POLICY_VERSION 1

struct policy_tenant {
        char *name;
        char *subvolume; /* absolute, normalized */
        char *mount;     /* absolute, normalized: the host view */
        char *backend;   /* URL */
        uint64_t chunk;      /* fill granularity */
        uint64_t readahead;  /* added to sequential reads */
        uint64_t small_file; /* files below this restore whole at first access */
};

struct policy {
        unsigned version;
        struct policy_tenant *tenants;
        size_t n_tenants;
};

/* On failure returns a negative errno and, for a bad policy, *error names the
 * origin (file), the tenant and the key (malloc'd; caller frees). */
int policy_parse(const char *text, size_t len, const char *origin, struct policy **ret, char **error);
int policy_load_file(const char *path, struct policy **ret, char **error);
void policy_free(struct policy *p);
const struct policy_tenant *policy_find_tenant(const struct policy *p, const char *name);
