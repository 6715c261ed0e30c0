/* SPDX-License-Identifier: MIT */
/*
 * Temporary AWS keys fetched over HTTP (supervisor/workers/awsfetch.c):
 * from EC2's instance metadata (IMDSv2), a container credentials endpoint
 * (EKS Pod Identity, ECS) or STS AssumeRoleWithWebIdentity (IRSA). Runs
 * on a thread (awscreds.c): every call here may wait on the network, up
 * to its timeout, and never on the event loop.
 */
#pragma once

#include <stdint.h>

#include "policy.h"
#include "proto.h"

/* What one fetch needs: decided on the loop (awscreds.c), copied. */
struct aws_plan {
        enum creds_source source; /* CREDS_FROM_WEB_IDENTITY, _CONTAINER or _IMDS */
        char url[PROTO_URL_MAX];  /* STS's endpoint, the container endpoint's full URI, IMDS's base */
        char role_arn[2048];      /* web identity */
        char session_name[64];
        char token_file[PROTO_URL_MAX];      /* web identity's token; the container endpoint's token, if a file */
        char token[8192];                    /* the container endpoint's token, if given as it is */
        char ca_file[PROTO_URL_MAX];         /* "": the system's (the tenant's for its own sts_endpoint) */
        uint64_t connect_timeout_usec, timeout_usec;
};

struct aws_result {
        struct proto_credentials cred;
        int64_t expires; /* seconds since the epoch; 0: never said */
        int error;       /* 0, or negative errno with why */
        char why[512];
};

void awsfetch_run(const struct aws_plan *pl, struct aws_result *res);
/* libcurl's global set-up, once, before any thread may fetch: its lazy
 * one in curl_easy_init is not safe with two threads at once. 0 or -EIO. */
int awsfetch_init(void);
