/* SPDX-License-Identifier: MIT */
/*
 * Where an s3:// tenant's AWS credentials come from: its keys in the
 * policy ("credential_source", "profile", "role_arn",
 * "web_identity_token_file", "sts_endpoint"), read and checked here; the
 * sources themselves are supervisor/workers/awscreds.c.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "policy.h"
#include "policyvalue.h"

static const char *const source_names[] = {
        [CREDS_FROM_FILE] = "file",         [CREDS_FROM_ENV] = "env",   [CREDS_FROM_WEB_IDENTITY] = "web_identity",
        [CREDS_FROM_CONTAINER] = "container", [CREDS_FROM_IMDS] = "imds", [CREDS_FROM_CHAIN] = "chain",
};

const char *policy_creds_source_name(enum creds_source s) {
        return (size_t)s < ARRAY_SIZE(source_names) ? source_names[s] : "?";
}

static bool printable(const char *s, const char *also) {
        for (; *s; s++)
                if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7e || (also && !strchr(also, *s) && !isalnum((unsigned char)*s)))
                        return false;
        return true;
}

int policy_parse_aws(struct parse_ctx *c, json_object *o, const char *tenant, struct aws_settings *s) {
        int r;
        if ((r = policy_get_string(c, o, tenant, "credential_source", &s->source)) < 0)
                return r;
        if (r > 0 && policy_creds_source(s->source) < 0)
                return policy_fail(c, tenant, "credential_source",
                                   "must be \"file\", \"env\", \"web_identity\", \"container\", \"imds\" or \"chain\"");
        if ((r = policy_get_string(c, o, tenant, "profile", &s->profile)) < 0)
                return r;
        if (r > 0 && (!*s->profile || strlen(s->profile) > 64 || !printable(s->profile, "-_.@+")))
                return policy_fail(c, tenant, "profile", "'%s' is not a profile name (letters, digits, - _ . @ +)", s->profile);
        if ((r = policy_get_string(c, o, tenant, "role_arn", &s->role_arn)) < 0)
                return r;
        if (r > 0 && (strncmp(s->role_arn, "arn:", 4) != 0 || strlen(s->role_arn) > 2048 || !printable(s->role_arn, NULL)))
                return policy_fail(c, tenant, "role_arn", "'%s' is not a role's ARN (arn:aws:iam::ACCOUNT:role/NAME)",
                                   s->role_arn);
        if ((r = policy_get_opt_path(c, o, tenant, "web_identity_token_file", &s->token_file)) < 0)
                return r;
        if ((r = policy_get_string(c, o, tenant, "sts_endpoint", &s->sts_endpoint)) < 0)
                return r;
        return r > 0 ? policy_check_endpoint(c, tenant, s->sts_endpoint) : 0;
}

int policy_creds_source(const char *name) {
        for (size_t i = 0; i < ARRAY_SIZE(source_names); i++)
                if (strcmp(name, source_names[i]) == 0)
                        return (int)i;
        return -EINVAL;
}

int policy_check_aws(struct parse_ctx *c, const char *tenant, bool s3, const char *credentials, const struct aws_settings *s) {
        int source = s->source ? policy_creds_source(s->source) : credentials ? CREDS_FROM_FILE : -1;
        if (s3 && source < 0)
                return policy_fail(c, tenant, "credentials",
                                   "missing: an s3:// backend needs an AWS shared-credentials file, or \"credential_source\" "
                                   "(env, web_identity, container, imds or chain)");
        if (source == CREDS_FROM_FILE && !credentials)
                return policy_fail(c, tenant, "credentials", "missing: \"credential_source\": \"file\" reads this file");
        return 0;
}

int policy_aws_copy(struct policy_aws *a, const struct aws_settings *s) {
        a->source = s->source ? (enum creds_source)policy_creds_source(s->source) : CREDS_FROM_FILE;
        a->profile = s->profile ? strdup(s->profile) : NULL;
        a->role_arn = s->role_arn ? strdup(s->role_arn) : NULL;
        a->web_identity_token_file = s->token_file ? strdup(s->token_file) : NULL;
        a->sts_endpoint = s->sts_endpoint ? strdup(s->sts_endpoint) : NULL;
        bool oom = (s->profile && !a->profile) || (s->role_arn && !a->role_arn) || (s->token_file && !a->web_identity_token_file) ||
                   (s->sts_endpoint && !a->sts_endpoint);
        return oom ? -ENOMEM : 0;
}

void policy_aws_free(struct policy_aws *a) {
        free(a->profile);
        free(a->role_arn);
        free(a->web_identity_token_file);
        free(a->sts_endpoint);
}
