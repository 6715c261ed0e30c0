/* SPDX-License-Identifier: MIT */
/*
 * The policy's value readers and checks (policyvalue.c), shared by
 * policy.c only. Each get_* returns 1 when the key is there and valid, 0
 * when absent, or -EINVAL with the message in the context; each check_*
 * returns 0 or -EINVAL likewise.
 */
#pragma once

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct parse_ctx {
        const char *origin;
        char **error;
};

/* Writes "origin: tenant 'T': key 'K': what" for the caller. */
void policy_say(struct parse_ctx *c, const char *tenant, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* The same, as -EINVAL: a macro, so that the caller (and its reader and
 * static analysis) sees every failure return a negative value. */
#define policy_fail(c, tenant, key, ...) (policy_say((c), (tenant), (key), __VA_ARGS__), -EINVAL)
/* Every key of o is one of keys. */
int policy_check_keys(struct parse_ctx *c, json_object *o, const char *tenant, const char *const *keys, size_t n);
int policy_get_string(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, const char **ret);
/* Sizes are strings with units ("1M") or plain non-negative integers. */
int policy_get_size(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, uint64_t *ret);
int policy_check_abs_path(struct parse_ctx *c, const char *tenant, const char *key, const char *p);
/* a is b or beneath it (false when either is NULL). */
bool policy_path_is_under(const char *a, const char *b);
int policy_get_bool(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, bool *ret);
int policy_get_fraction(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, double *ret);
/* The same, or 0 (an integer 0: off). */
int policy_get_fraction_or_zero(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, double *ret);
/* An array of non-empty strings without control characters; absolute
 * (leading '/') entries are refused when relative_only. */
int policy_check_string_list(struct parse_ctx *c, const char *tenant, const char *key, json_object *a, const char *example,
                             bool relative_only);
/* Kubernetes namespaces are DNS labels: what else is named cannot match. */
int policy_check_namespaces(struct parse_ctx *c, const char *tenant, json_object *a);
int policy_get_duration(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, uint64_t *ret);
/* The same, "0s" allowed (a key for which nothing means off). */
int policy_get_duration_or_zero(struct parse_ctx *c, json_object *o, const char *tenant, const char *key,
                                uint64_t *ret);
int policy_get_opt_path(struct parse_ctx *c, json_object *o, const char *tenant, const char *key, const char **ret);
/* "http(s)://host[:port]" and nothing more: keys are appended to it. */
int policy_check_endpoint(struct parse_ctx *c, const char *tenant, const char *e);
int policy_check_headers(struct parse_ctx *c, const char *tenant, json_object *h);

/* An s3:// tenant's credential keys (policyaws.c), as given. */
struct aws_settings {
        const char *source, *profile, *role_arn, *token_file, *sts_endpoint;
};
struct policy_aws;
int policy_parse_aws(struct parse_ctx *c, json_object *o, const char *tenant, struct aws_settings *s);
/* Whether the keys and "credentials" agree; an s3:// backend needs a source. */
int policy_check_aws(struct parse_ctx *c, const char *tenant, bool s3, const char *credentials, const struct aws_settings *s);
/* The source's number, -EINVAL for no source's name. */
int policy_creds_source(const char *name);
int policy_aws_copy(struct policy_aws *a, const struct aws_settings *s);
void policy_aws_free(struct policy_aws *a);
