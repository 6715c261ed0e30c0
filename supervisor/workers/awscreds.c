/* SPDX-License-Identifier: MIT */
/*
 * The sources of an s3:// tenant's keys, as AWS SDKs look for them:
 * - "env": tierd's AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 *   AWS_SESSION_TOKEN, read once;
 * - "file": a shared-credentials file, its "profile" (secrets.c reads it
 *   and reads it again when it changes);
 * - "web_identity": STS AssumeRoleWithWebIdentity with a token file (IRSA:
 *   AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE, or the policy's);
 * - "container": AWS_CONTAINER_CREDENTIALS_FULL_URI (EKS Pod Identity) or
 *   _RELATIVE_URI (ECS), with AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE);
 * - "imds": EC2's instance metadata, IMDSv2;
 * - "chain": the first of env, web_identity, file, container, imds that
 *   tierd's environment sets up (boto3's order).
 * Temporary keys are fetched on a thread (awsfetch.c: the network may
 * stall, the event loop waits on nothing it controls), again before they
 * expire (REFRESH_BEFORE, or half their life if that is shorter), and
 * handed to the running workers as rotated keys are: no restart, and a
 * request signed with the old keys is still good when it arrives. A fetch
 * that fails is tried again (1 s, doubling to RETRY_MAX) and the keys the
 * tenant has are kept meanwhile. Until the first fetch ends, a worker's
 * requests wait: a fill sent without keys would fail its reader.
 */
#include "awscreds.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "awsanswer.h"
#include "awsfetch.h"
#include "credentials.h"
#include "containers.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "url.h"
#include "workers.h"

#define REFRESH_BEFORE_SEC (15 * 60)
#define REFRESH_NO_EXPIRY_SEC (60 * 60)
#define RETRY_MAX_USEC (60 * 1000 * 1000ull)
#define FETCH_TIMEOUT_USEC (10 * 1000 * 1000ull)
#define CONNECT_TIMEOUT_USEC (2 * 1000 * 1000ull)
#define HOLD_USEC (30 * 1000 * 1000ull) /* fills wait this long at most for the first keys */
#define EXPIRES_SOON_SEC 10 /* keys that expire sooner are not taken: fetched again at most every 5 s */

struct fetch {
        struct tenant *tn;
        unsigned generation;
        struct aws_plan plan;
        struct aws_result result;
};

struct tenant_aws {
        enum creds_source source; /* as decided: never CREDS_FROM_CHAIN */
        char file[PROTO_URL_MAX], profile[72];
        struct aws_plan plan; /* web_identity, container, imds */
        unsigned generation;  /* a fetch of an older plan is dropped */
        bool answered, failing, expired_said;
        unsigned failures;
        uint64_t next_usec, planned_usec;
        int64_t expires;
        struct offthread *thread;
};

static const char *env(const char *name) {
        const char *v = getenv(name);
        return v && *v ? v : NULL;
}

/* A container endpoint over plain http only on the host itself or at the
 * link-local addresses ECS and EKS serve it on, as AWS SDKs allow: a token
 * sent elsewhere in clear would be anyone's. */
static bool container_url_allowed(const char *url, char *host, size_t size) {
        static const char *const local[] = { "localhost", "::1", "169.254.170.2", "169.254.170.23", "fd00:ec2::23" };
        struct http_url u;
        struct in_addr a4;
        const char *why = NULL;
        if (http_url_parse(url, &u, &why) < 0)
                return false;
        snprintf(host, size, "%s", u.host);
        bool ok = u.tls || (inet_pton(AF_INET, u.host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127);
        for (size_t i = 0; i < ARRAY_SIZE(local) && !ok; i++)
                ok = strcmp(u.host, local[i]) == 0;
        http_url_done(&u);
        return ok;
}

/* An endpoint from tierd's environment: http(s), no user, password, query
 * or fragment (it is logged). */
static int env_url(struct tenant *tn, const char *name, const char *value, char *url, size_t size) {
        struct http_url u;
        const char *why = NULL;
        if (http_url_parse(value, &u, &why) < 0)
                return log_error_errno(EINVAL, "tenant %s: %s in tierd's environment: %s", tn->cfg->name, name,
                                       why ?: "not an http(s) URL");
        http_url_done(&u);
        snprintf(url, size, "%s", value);
        return 0;
}

static int plan_env(struct tenant *tn) {
        const char *ak = env("AWS_ACCESS_KEY_ID"), *sk = env("AWS_SECRET_ACCESS_KEY");
        struct proto_credentials c;
        if (!ak || !sk)
                return -ENOENT;
        if (aws_keys_set(&c, ak, sk, env("AWS_SESSION_TOKEN")) < 0)
                return log_error_errno(EINVAL, "tenant %s: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or AWS_SESSION_TOKEN "
                                               "is too long or holds a space or a control character", tn->cfg->name);
        tn->cred = c;
        tn->have_cred = true;
        explicit_bzero(&c, sizeof(c));
        return 0;
}

static int plan_file(struct tenant *tn, struct tenant_aws *a, bool must_exist) {
        const char *home = env("HOME") ?: "/root", *path = tn->cfg->credentials ?: env("AWS_SHARED_CREDENTIALS_FILE");
        if (path)
                snprintf(a->file, sizeof(a->file), "%s", path);
        else
                snprintf(a->file, sizeof(a->file), "%s/.aws/credentials", home);
        /* AWS_PROFILE in a chain only: a named file is read as the policy says. */
        const char *profile = tn->cfg->aws.profile ?: (must_exist ? env("AWS_PROFILE") : NULL) ?: "default";
        if (strlen(profile) >= sizeof(a->profile))
                return log_error_errno(EINVAL, "tenant %s: AWS_PROFILE is too long", tn->cfg->name);
        snprintf(a->profile, sizeof(a->profile), "%s", profile);
        if (!must_exist)
                return 0;
        /* In a chain, the file counts only if it holds the profile, as
         * boto3 moves on past a file without it. Root's file, opened
         * O_NONBLOCK, as secrets.c reads it at each change. */
        char text[16384];
        const char *err = "";
        struct proto_credentials c;
        int r = secret_file_read(a->file, text, sizeof(text), &err);
        if (r == 0)
                r = credentials_parse(text, a->profile, &c, &err);
        explicit_bzero(text, sizeof(text));
        explicit_bzero(&c, sizeof(c));
        return r == -ENOENT || r == -ENOKEY ? -ENOENT : 0;
}

static int plan_web_identity(struct tenant *tn, struct aws_plan *p) {
        const char *role = tn->cfg->aws.role_arn ?: env("AWS_ROLE_ARN"),
                   *token = tn->cfg->aws.web_identity_token_file ?: env("AWS_WEB_IDENTITY_TOKEN_FILE");
        if (!role || !token)
                return -ENOENT;
        if (tn->cfg->aws.sts_endpoint) { /* checked with the policy; it is the tenant's: so is its CA */
                snprintf(p->url, sizeof(p->url), "%s", tn->cfg->aws.sts_endpoint);
                snprintf(p->ca_file, sizeof(p->ca_file), "%s", tn->cfg->ca_file ?: "");
        } else if (env("AWS_ENDPOINT_URL_STS") || env("AWS_ENDPOINT_URL")) {
                const char *name = env("AWS_ENDPOINT_URL_STS") ? "AWS_ENDPOINT_URL_STS" : "AWS_ENDPOINT_URL";
                int r = env_url(tn, name, env(name), p->url, sizeof(p->url));
                if (r < 0)
                        return r;
        } else
                snprintf(p->url, sizeof(p->url), "https://sts.%s.%s", tn->cfg->region ?: "us-east-1",
                         aws_domain(tn->cfg->region));
        snprintf(p->role_arn, sizeof(p->role_arn), "%s", role);
        snprintf(p->token_file, sizeof(p->token_file), "%s", token);
        if (env("AWS_ROLE_SESSION_NAME"))
                snprintf(p->session_name, sizeof(p->session_name), "%s", env("AWS_ROLE_SESSION_NAME"));
        else
                snprintf(p->session_name, sizeof(p->session_name), "tierd-%.50s", tn->cfg->name);
        return 0;
}

static int plan_container(struct tenant *tn, struct aws_plan *p) {
        const char *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI"), *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
                   *token = env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
        char host[256] = "";
        if (!full && !rel)
                return -ENOENT;
        /* The relative one first, as AWS SDKs take it. */
        if (rel)
                snprintf(p->url, sizeof(p->url), "http://169.254.170.2%s%s", rel[0] == '/' ? "" : "/", rel);
        else
                snprintf(p->url, sizeof(p->url), "%s", full);
        if (!container_url_allowed(p->url, host, sizeof(host)))
                return log_error_errno(EPERM, "tenant %s: the container credentials endpoint (host %s) is neither https "
                                              "nor on the host or ECS's and EKS's link-local addresses, or not a URL",
                                       tn->cfg->name, host[0] ? host : "?");
        if (token && strlen(token) >= sizeof(p->token))
                return log_error_errno(E2BIG, "tenant %s: AWS_CONTAINER_AUTHORIZATION_TOKEN is too long", tn->cfg->name);
        snprintf(p->token_file, sizeof(p->token_file), "%s", env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") ?: "");
        snprintf(p->token, sizeof(p->token), "%s", token ?: "");
        return 0;
}

static int plan_imds(struct tenant *tn, struct aws_plan *p) {
        const char *off = env("AWS_EC2_METADATA_DISABLED"), *url = env("AWS_EC2_METADATA_SERVICE_ENDPOINT"),
                   *mode = env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
        if (off && strcasecmp(off, "true") == 0)
                return -ENOENT;
        bool v6 = mode && strcasecmp(mode, "IPv6") == 0;
        int r = env_url(tn, "AWS_EC2_METADATA_SERVICE_ENDPOINT", url ?: v6 ? "http://[fd00:ec2::254]" : "http://169.254.169.254",
                        p->url, sizeof(p->url));
        if (r < 0)
                return r;
        size_t n = strlen(p->url);
        if (n > 0 && p->url[n - 1] == '/')
                p->url[n - 1] = 0;
        return 0;
}

/* The one source s, set up in a: 0, -ENOENT (the environment does not set
 * it up), or another error (logged). */
static int plan_one(struct tenant *tn, struct tenant_aws *a, enum creds_source s, bool in_chain) {
        a->plan = (struct aws_plan){ .source = s, .timeout_usec = FETCH_TIMEOUT_USEC,
                                     .connect_timeout_usec = MIN(CONNECT_TIMEOUT_USEC, tn->cfg->connect_timeout_usec ?: CONNECT_TIMEOUT_USEC) };
        a->source = s;
        switch (s) {
        case CREDS_FROM_ENV:
                return plan_env(tn);
        case CREDS_FROM_FILE:
                return plan_file(tn, a, in_chain);
        case CREDS_FROM_WEB_IDENTITY:
                return plan_web_identity(tn, &a->plan);
        case CREDS_FROM_CONTAINER:
                return plan_container(tn, &a->plan);
        case CREDS_FROM_IMDS:
                return plan_imds(tn, &a->plan);
        default:
                return -EINVAL;
        }
}

static int plan_chain(struct tenant *tn, struct tenant_aws *a) {
        static const enum creds_source order[] = { CREDS_FROM_ENV, CREDS_FROM_WEB_IDENTITY, CREDS_FROM_FILE,
                                                   CREDS_FROM_CONTAINER, CREDS_FROM_IMDS };
        for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
                int r = plan_one(tn, a, order[i], true);
                if (r != -ENOENT)
                        return r;
        }
        return -ENOENT;
}

static bool fetched(enum creds_source s) {
        return s == CREDS_FROM_WEB_IDENTITY || s == CREDS_FROM_CONTAINER || s == CREDS_FROM_IMDS;
}

static void fetch_work(void *userdata) {
        struct fetch *f = userdata;
        awsfetch_run(&f->plan, &f->result);
}

static void fetch_release(void *userdata) {
        explicit_bzero(userdata, sizeof(struct fetch));
        free(userdata);
}

static void say_expiry(int64_t expires, char *buf, size_t size) {
        struct tm tm;
        time_t t = (time_t)expires;
        if (!expires || !gmtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%d %H:%M:%S UTC", &tm))
                snprintf(buf, size, "no expiry said");
}

/* The keys fetched: the tenant's from now on, fetched again before they
 * expire; handed to its workers. */
static void fetch_took(struct tenant *tn, struct tenant_aws *a, struct aws_result *res, uint64_t now) {
        int64_t wall = (int64_t)time(NULL), life = res->expires ? res->expires - wall : 0;
        char until[64];
        tn->cred = res->cred;
        tn->have_cred = true;
        a->expires = res->expires;
        a->failures = 0;
        a->failing = a->expired_said = false;
        int64_t in = !res->expires ? REFRESH_NO_EXPIRY_SEC : MAX(1, life - MIN(REFRESH_BEFORE_SEC, life / 2));
        a->next_usec = now + (uint64_t)in * 1000000ull;
        say_expiry(res->expires, until, sizeof(until));
        log_info("tenant %s: AWS keys from %s, good until %s, fetched again in %llds", tn->cfg->name,
                 policy_creds_source_name(a->source), until, (long long)in);
}

static void fetch_failed(struct tenant *tn, struct tenant_aws *a, const struct aws_result *res, uint64_t now) {
        bool expired = a->expires && (int64_t)time(NULL) >= a->expires;
        a->failures++;
        a->next_usec = now + retry_backoff_usec(a->failures, RETRY_MAX_USEC);
        if (!a->failing || (expired && !a->expired_said))
                log_full_errno(expired || !tn->have_cred ? LOG_LVL_ERR : LOG_LVL_WARN, res->error,
                               "tenant %s: cannot fetch AWS keys from %s: %s; trying again (%s)", tn->cfg->name,
                               policy_creds_source_name(a->source), res->why,
                               !tn->have_cred ? "its fills fail until then"
                               : expired    ? "its keys have expired: its fills fail until then"
                                            : "keeping the keys it has meanwhile");
        a->expired_said |= expired;
        tenant_set_last_error(tn, "cannot fetch AWS keys from %s: %s", policy_creds_source_name(a->source), res->why);
        a->failing = true;
}

/* On the loop. */
static void fetch_done(void *userdata) {
        struct fetch *f = userdata;
        struct tenant *tn = f->tn;
        struct tenant_aws *a = tn->aws;
        uint64_t now = tierd_now_usec(tn->t);
        bool ok = f->result.error == 0, first = !a->answered;

        a->thread = NULL;
        if (f->generation != a->generation) { /* planned again meanwhile (reload): the next fetch is due */
                fetch_release(f);
                return;
        }
        if (ok && f->result.expires && f->result.expires < (int64_t)time(NULL) + EXPIRES_SOON_SEC) {
                char until[64];
                say_expiry(f->result.expires, until, sizeof(until));
                snprintf(f->result.why, sizeof(f->result.why), "the keys expire at %s, in less than %d s "
                         "(is this host's clock right?)", until, EXPIRES_SOON_SEC);
                f->result.error = -ESTALE;
                ok = false;
        }
        if (ok)
                fetch_took(tn, a, &f->result, now);
        else
                fetch_failed(tn, a, &f->result, now);
        /* The first answer lets held requests go; a failure that may pass
         * (the metadata service not up yet at boot) only after HOLD. */
        bool passing = f->result.error == -EHOSTUNREACH || f->result.error == -ETIMEDOUT || f->result.error == -EIO;
        fetch_release(f);
        if (!ok && passing && now < a->planned_usec + HOLD_USEC)
                return;
        a->answered = true;
        if (ok || first) {
                worker_send_update(&tn->worker, UPDATE_CREDENTIALS);
                containers_send_update(tn, UPDATE_CREDENTIALS);
        }
}

static void fetch_start(struct tenant *tn, uint64_t now) {
        struct tenant_aws *a = tn->aws;
        struct fetch *f = calloc(1, sizeof(*f));
        if (f) {
                f->tn = tn;
                f->generation = a->generation;
                f->plan = a->plan;
        }
        if (!f || offthread_start(tn->t->event, NULL, 0, fetch_work, fetch_done, f, &a->thread) < 0) {
                free(f);
                a->thread = NULL;
                a->next_usec = now + 1000 * 1000ull;
        }
}

void awscreds_tick(struct tenant *tn) {
        struct tenant_aws *a = tn->aws;
        uint64_t now = tierd_now_usec(tn->t);
        if (a && fetched(a->source) && !a->thread && now >= a->next_usec)
                fetch_start(tn, now);
}

static const char *const unset[] = {
        [CREDS_FROM_ENV] = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set in tierd's environment",
        [CREDS_FROM_FILE] = "no shared-credentials file",
        [CREDS_FROM_WEB_IDENTITY] = "it needs \"role_arn\" and \"web_identity_token_file\" (or AWS_ROLE_ARN and "
                                    "AWS_WEB_IDENTITY_TOKEN_FILE in tierd's environment)",
        [CREDS_FROM_CONTAINER] = "neither AWS_CONTAINER_CREDENTIALS_FULL_URI nor _RELATIVE_URI is set in tierd's "
                                 "environment",
        [CREDS_FROM_IMDS] = "AWS_EC2_METADATA_DISABLED is true in tierd's environment",
        [CREDS_FROM_CHAIN] = "none of env, web_identity, file, container and imds is set up in tierd's environment",
};

int awscreds_plan(struct tenant *tn) {
        struct tenant_aws *a = tn->aws;
        enum creds_source s = tn->cfg->aws.source;
        if (strncmp(tn->cfg->backend, "s3://", 5) != 0)
                return 0;
        if (!a && !(a = tn->aws = calloc(1, sizeof(*a))))
                return log_error_errno(ENOMEM, "tenant %s: %m", tn->cfg->name);
        a->generation++;
        a->failing = false;
        a->failures = 0;
        a->next_usec = 0;
        a->file[0] = 0;
        int r = s == CREDS_FROM_CHAIN ? plan_chain(tn, a) : plan_one(tn, a, s, false);
        if (r == -ENOENT)
                log_error("tenant %s: \"credential_source\": \"%s\": %s", tn->cfg->name, policy_creds_source_name(s),
                          unset[s]);
        if (r < 0) {
                a->source = CREDS_FROM_ENV; /* nothing to fetch or read: the keys it had, if any, stay */
                a->answered = true;
                return r;
        }
        /* A reload keeps the keys it had until new ones come. */
        a->answered = !fetched(a->source) || tn->have_cred;
        if (!fetched(a->source))
                a->expires = 0;
        log_info("tenant %s: AWS keys from %s%s%s", tn->cfg->name, policy_creds_source_name(a->source),
                 a->source == CREDS_FROM_FILE ? " " : fetched(a->source) ? " at " : "",
                 a->source == CREDS_FROM_FILE ? a->file : fetched(a->source) ? a->plan.url : "");
        /* One fetch at a time: one in flight for the old plan is dropped
         * when it ends, and the next tick starts this one's. */
        a->planned_usec = tierd_now_usec(tn->t);
        if (fetched(a->source) && !a->thread)
                fetch_start(tn, a->planned_usec);
        return 0;
}

void awscreds_stop(struct tenant *tn) {
        if (!tn->aws)
                return;
        if (tn->aws->thread)
                offthread_abandon(tn->aws->thread, fetch_release);
        explicit_bzero(tn->aws, sizeof(*tn->aws));
        free(tn->aws);
        tn->aws = NULL;
}

const char *awscreds_file(const struct tenant *tn) {
        if (!tn->aws)
                return tn->cfg->credentials;
        return tn->aws->source == CREDS_FROM_FILE && tn->aws->file[0] ? tn->aws->file : NULL;
}

const char *awscreds_profile(const struct tenant *tn) { return tn->aws ? tn->aws->profile : "default"; }

bool awscreds_answered(const struct tenant *tn) { return !tn->aws || tn->aws->answered; }
