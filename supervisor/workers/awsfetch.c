/* SPDX-License-Identifier: MIT */
#include "awsfetch.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awsanswer.h"
#include "credentials.h"
#include "macro.h"

#define ANSWER_MAX (64 * 1024) /* a credentials answer is a few KiB: more is not one */

struct answer {
        char buf[ANSWER_MAX + 1];
        size_t len;
        bool too_long;
};

static size_t on_body(char *p, size_t size, size_t n, void *userdata) {
        struct answer *a = userdata;
        size_t k = size * n;
        if (a->len + k > ANSWER_MAX) {
                a->too_long = true;
                return 0; /* curl stops */
        }
        memcpy(a->buf + a->len, p, k);
        a->len += k;
        a->buf[a->len] = 0;
        return k;
}

/* One request: 0 with the body of a 2xx answer in a, else -errno with why
 * (and a->buf what the service said, for STS's error document). direct:
 * never through a proxy (the link-local metadata services). */
static int http_call(const struct aws_plan *pl, const char *method, const char *url, struct curl_slist *headers,
                     const char *form, bool direct, struct answer *a, struct aws_result *res) {
        char error[CURL_ERROR_SIZE] = "";
        long status = 0;
        CURL *c = curl_easy_init();
        if (!c)
                return -ENOMEM;
        a->len = 0;
        a->buf[0] = 0;
        a->too_long = false;
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(pl->connect_timeout_usec / 1000));
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(pl->timeout_usec / 1000));
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        if (direct)
                curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
        if (pl->ca_file[0])
                curl_easy_setopt(c, CURLOPT_CAINFO, pl->ca_file);
        if (form)
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, form);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        CURLcode cc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        if (a->too_long) {
                snprintf(res->why, sizeof(res->why), "%s %.300s: the answer is over %d bytes", method, url, ANSWER_MAX);
                return -EFBIG;
        }
        if (cc != CURLE_OK) {
                snprintf(res->why, sizeof(res->why), "%s %.300s: %.180s", method, url, error[0] ? error : curl_easy_strerror(cc));
                return cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH;
        }
        if (status < 200 || status > 299) {
                snprintf(res->why, sizeof(res->why), "%s %.300s: HTTP %ld", method, url, status);
                return status == 401 || status == 403 ? -EACCES : -EIO;
        }
        return 0;
}

static char *trim_end(char *s) {
        size_t n = strlen(s);
        while (n > 0 && isspace((unsigned char)s[n - 1]))
                s[--n] = 0;
        return s;
}

/* A token that goes into a header: printable, one line (a CR LF in it
 * would add headers of the sender's choosing). */
static bool header_safe(const char *s, bool spaces) {
        for (; *s; s++)
                if ((unsigned char)*s < (spaces ? 0x20 : 0x21) || (unsigned char)*s > 0x7e)
                        return false;
        return true;
}

static void json_answer(const struct answer *a, const char *from, struct aws_result *res) {
        const char *err = "";
        res->error = aws_json_credentials(a->buf, a->len, &res->cred, &res->expires, &err);
        if (res->error < 0)
                snprintf(res->why, sizeof(res->why), "%.250s: %.250s", from, err);
}

/* IMDSv2: a session token (PUT), the role's name, its keys. No IMDSv1:
 * a request without a token is what IMDSv2 exists to refuse. */
static void fetch_imds(const struct aws_plan *pl, struct answer *a, struct aws_result *res) {
        char url[PROTO_URL_MAX + 256], header[256], role[128];
        struct curl_slist *h = curl_slist_append(NULL, "X-aws-ec2-metadata-token-ttl-seconds: 300");
        snprintf(url, sizeof(url), "%s/latest/api/token", pl->url);
        res->error = h ? http_call(pl, "PUT", url, h, "", true, a, res) : -ENOMEM;
        curl_slist_free_all(h);
        if (res->error < 0)
                return;
        trim_end(a->buf);
        if (!a->buf[0] || strlen(a->buf) > 200 || !header_safe(a->buf, false)) {
                snprintf(res->why, sizeof(res->why), "%.300s: not a session token", url);
                res->error = -EBADMSG;
                explicit_bzero(a->buf, a->len);
                return;
        }
        snprintf(header, sizeof(header), "X-aws-ec2-metadata-token: %s", a->buf);
        explicit_bzero(a->buf, a->len);
        h = curl_slist_append(NULL, header);
        explicit_bzero(header, sizeof(header));
        snprintf(url, sizeof(url), "%s/latest/meta-data/iam/security-credentials/", pl->url);
        if (!h)
                res->error = -ENOMEM;
        else if ((res->error = http_call(pl, "GET", url, h, NULL, true, a, res)) == 0) {
                snprintf(role, sizeof(role), "%.*s", (int)strcspn(a->buf, "\r\n"), a->buf);
                if (!role[0] || strspn(role, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+=,.@_-") !=
                                        strlen(role)) {
                        snprintf(res->why, sizeof(res->why), "%.300s: no role's name (does the instance have a role?)", url);
                        res->error = -ENOENT;
                }
        }
        if (res->error == 0) {
                snprintf(url, sizeof(url), "%s/latest/meta-data/iam/security-credentials/%s", pl->url, role);
                if ((res->error = http_call(pl, "GET", url, h, NULL, true, a, res)) == 0)
                        json_answer(a, url, res);
        }
        curl_slist_free_all(h);
}

/* A container credentials endpoint: GET, with its token if there is one
 * (a file read each time: EKS rotates it). */
static void fetch_container(const struct aws_plan *pl, struct answer *a, struct aws_result *res) {
        char token[sizeof(pl->token)], header[sizeof(token) + 32];
        const char *err = "";
        struct curl_slist *h = NULL;
        snprintf(token, sizeof(token), "%s", pl->token);
        if (pl->token_file[0] && (res->error = token_file_read(pl->token_file, token, sizeof(token), &err)) < 0)
                snprintf(res->why, sizeof(res->why), "the authorization token file %.250s: %.200s", pl->token_file, err);
        else if (!header_safe(trim_end(token), true)) {
                snprintf(res->why, sizeof(res->why), "the authorization token holds a control character");
                res->error = -EINVAL;
        }
        if (res->error == 0 && token[0]) {
                snprintf(header, sizeof(header), "Authorization: %s", token);
                if (!(h = curl_slist_append(NULL, header)))
                        res->error = -ENOMEM;
        }
        explicit_bzero(token, sizeof(token));
        explicit_bzero(header, sizeof(header));
        if (res->error == 0 && (res->error = http_call(pl, "GET", pl->url, h, NULL, true, a, res)) == 0)
                json_answer(a, pl->url, res);
        curl_slist_free_all(h);
}

/* STS AssumeRoleWithWebIdentity: unsigned, the token is the proof. Through
 * a proxy if tierd's environment names one, as the store is. */
static void fetch_web_identity(const struct aws_plan *pl, struct answer *a, struct aws_result *res) {
        char token[8192];
        const char *err = "";
        if ((res->error = token_file_read(pl->token_file, token, sizeof(token), &err)) < 0) {
                explicit_bzero(token, sizeof(token));
                snprintf(res->why, sizeof(res->why), "the web identity token file %.250s: %.200s", pl->token_file, err);
                return;
        }
        char *t = curl_easy_escape(NULL, trim_end(token), 0), *role = curl_easy_escape(NULL, pl->role_arn, 0),
             *session = curl_easy_escape(NULL, pl->session_name, 0), *form = NULL;
        explicit_bzero(token, sizeof(token));
        if (!t || !role || !session || asprintf(&form, "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=%s"
                                                       "&RoleSessionName=%s&WebIdentityToken=%s", role, session, t) < 0) {
                form = NULL;
                res->error = -ENOMEM;
        }
        if (t)
                explicit_bzero(t, strlen(t));
        curl_free(t);
        curl_free(role);
        curl_free(session);
        if (res->error == 0) {
                struct curl_slist *h = curl_slist_append(NULL, "Accept: application/xml");
                int r = h ? http_call(pl, "POST", pl->url, h, form, false, a, res) : -ENOMEM;
                curl_slist_free_all(h);
                if (r == 0)
                        r = aws_sts_credentials(a->buf, a->len, &res->cred, &res->expires, res->why, sizeof(res->why));
                else if (a->len > 0 && (r == -EACCES || r == -EIO)) {
                        /* STS says why in its error document: its code rather
                         * than the status; keys in an error answer are not taken. */
                        struct proto_credentials ignored;
                        int64_t when;
                        char said[sizeof(res->why)];
                        if (aws_sts_credentials(a->buf, a->len, &ignored, &when, said, sizeof(said)) == -EACCES) {
                                memcpy(res->why, said, sizeof(said));
                                r = -EACCES; /* STS's answer: not a failure that passes */
                        }
                        explicit_bzero(&ignored, sizeof(ignored));
                }
                res->error = r;
        }
        if (form)
                explicit_bzero(form, strlen(form));
        free(form);
}

void awsfetch_run(const struct aws_plan *pl, struct aws_result *res) {
        struct answer *a = calloc(1, sizeof(*a));
        *res = (struct aws_result){};
        if (!a) {
                res->error = -ENOMEM;
                snprintf(res->why, sizeof(res->why), "out of memory");
                return;
        }
        if (pl->source == CREDS_FROM_IMDS)
                fetch_imds(pl, a, res);
        else if (pl->source == CREDS_FROM_CONTAINER)
                fetch_container(pl, a, res);
        else
                fetch_web_identity(pl, a, res);
        explicit_bzero(a, sizeof(*a));
        free(a);
}

int awsfetch_init(void) {
        return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}
