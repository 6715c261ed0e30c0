/* SPDX-License-Identifier: MIT */
#include "secrets.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "awscreds.h"
#include "credentials.h"
#include "containers.h"
#include "log.h"
#include "macro.h"
#include "workers.h"

#define SECRETS_CHECK_USEC (2 * 1000 * 1000ull)

static int load_credentials(struct tenant *tn) {
        const char *err = "", *file = awscreds_file(tn), *profile = awscreds_profile(tn);
        char text[16384];
        struct proto_credentials c;
        struct stat st;
        int r;

        /* A link out of the directory: the read below says so. */
        if ((r = secret_file_stat(file, &st)) < 0 && r != -EXDEV && r != -ELOOP)
                return log_error_errno(r, "tenant %s: credentials %s: %m", tn->cfg->name, file);
        r = secret_file_read(file, text, sizeof(text), &err);
        if (r < 0)
                return log_error_errno(r, "tenant %s: credentials %s: %s", tn->cfg->name, file, err);
        r = credentials_parse(text, profile, &c, &err);
        explicit_bzero(text, sizeof(text));
        if (r == -ENOKEY)
                r = -EINVAL; /* for the file's tenant, a file without its keys is a bad one: not tried again */
        if (r < 0)
                return log_error_errno(r, "tenant %s: credentials %s, profile [%s]: %s", tn->cfg->name, file, profile, err);
        tn->cred = c;
        explicit_bzero(&c, sizeof(c));
        tn->have_cred = true;
        tn->cred_ctime = st.st_ctim;
        tn->cred_size = st.st_size;
        tn->cred_ino = st.st_ino;
        return 0;
}

/* "Name: @FILE" reads the value from FILE (a bearer token, say): the
 * header lines into out. */
static int load_headers(struct tenant *tn, char *out, size_t size) {
        size_t n = 0;
        out[0] = 0;
        for (char **h = tn->cfg->headers; h && *h; h++) {
                const char *colon = strstr(*h, ": "), *value = colon + 2;
                char file_value[PROTO_HEADERS_MAX];
                const char *err = "";
                if (value[0] == '@') {
                        int r = secret_file_read(value + 1, file_value, sizeof(file_value), &err);
                        if (r < 0)
                                return log_error_errno(r, "tenant %s: header file %s: %s", tn->cfg->name, value + 1, err);
                        file_value[strcspn(file_value, "\r\n")] = 0;
                        value = file_value;
                }
                int k = snprintf(out + n, size - n, "%.*s: %s\n", (int)(colon - *h), *h, value);
                explicit_bzero(file_value, sizeof(file_value));
                if (k < 0 || (size_t)k >= size - n)
                        return log_error_errno(E2BIG, "tenant %s: headers too long", tn->cfg->name);
                n += (size_t)k;
        }
        return 0;
}

/* What the "@FILE" header files are now: inode, size and ctime of each
 * (errno for one that cannot be stat'ed), folded: odd. 0: the tenant has
 * none. HEADERS_RETRY, even, matches no stamp: the next check reads them. */
#define HEADERS_RETRY 2u
static uint64_t headers_stamp(const struct tenant *tn) {
        uint64_t h = 0;
        bool any = false;
        for (char **p = tn->cfg->headers; p && *p; p++) {
                const char *colon = strstr(*p, ": ");
                struct stat st;
                if (!colon || colon[2] != '@')
                        continue;
                any = true;
                uint64_t v[4] = { 0 };
                int r = secret_file_stat(colon + 3, &st);
                if (r < 0)
                        v[0] = (uint64_t)-r;
                else {
                        v[0] = st.st_ino;
                        v[1] = (uint64_t)st.st_size;
                        v[2] = (uint64_t)st.st_ctim.tv_sec;
                        v[3] = (uint64_t)st.st_ctim.tv_nsec;
                }
                for (size_t i = 0; i < 4; i++)
                        h = (h ^ v[i]) * 0x100000001b3ull; /* FNV-1a, a word at a time */
        }
        return any ? h | 1 : 0;
}

int catalog_key_read(const char *path, const char *tenant, struct catalog_key *key, const char **error) {
        struct catalog_key file = {};
        char text[sizeof(file.bytes) + 2], label[128];
        int r = secret_file_read(path, text, sizeof(text), error);
        size_t n = r < 0 ? 0 : strlen(text);
        while (n > 0 && isspace((unsigned char)text[n - 1]))
                n--;
        if (r == 0 && n < CATALOG_KEY_MIN) {
                *error = "it holds fewer than 32 bytes of text (openssl rand -hex 32 makes a key)";
                r = -EINVAL;
        }
        if (r == 0) {
                memcpy(file.bytes, text, n);
                file.len = n;
                /* The tenant's own key, from the file's: one file may key
                 * several tenants, and an object of one never verifies
                 * for another. */
                int k = snprintf(label, sizeof(label), "tierd catalog key of tenant %s", tenant);
                r = catalog_mac(&file, label, (size_t)k, key->bytes);
                key->len = r == 0 ? 32 : 0;
                if (r < 0)
                        *error = "cannot derive the tenant's key";
        }
        explicit_bzero(text, sizeof(text));
        explicit_bzero(&file, sizeof(file));
        return r;
}

static int load_catalog_key(struct tenant *tn) {
        const char *err = "";
        int r = catalog_key_read(tn->cfg->catalog_key, tn->cfg->name, &tn->catalog_key, &err);
        return r < 0 ? log_error_errno(r, "tenant %s: catalog_key %s: %s", tn->cfg->name, tn->cfg->catalog_key, err) : 0;
}

/* Each kind on its own: one that fails keeps what the tenant had (a reload
 * with a bad header file keeps the working token) and is tried again by
 * the watch; the first failure is returned. */
int tenant_secrets_load(struct tenant *tn) {
        char headers[PROTO_HEADERS_MAX];
        uint64_t stamp = headers_stamp(tn);
        int r = 0, k;

        r = awscreds_plan(tn);
        if (r == 0 && awscreds_file(tn))
                r = load_credentials(tn);
        k = load_headers(tn, headers, sizeof(headers));
        if (k == 0)
                memcpy(tn->headers, headers, sizeof(headers));
        explicit_bzero(headers, sizeof(headers));
        tn->headers_stamp = k == 0 ? stamp : HEADERS_RETRY;
        if (r == 0)
                r = k;
        if (tn->cfg->catalog_key && (k = load_catalog_key(tn)) < 0 && r == 0)
                r = k;
        return r;
}

/* A bearer token rotated in its file (a projected service-account token,
 * hourly): the new header lines go to the running workers, which use them
 * from their next request on. A file that cannot be read keeps the old. */
static bool headers_changed(struct tenant *tn) {
        char headers[PROTO_HEADERS_MAX];
        uint64_t stamp = headers_stamp(tn);
        if (stamp == 0 || stamp == tn->headers_stamp)
                return false;
        tn->headers_stamp = stamp;
        int r = load_headers(tn, headers, sizeof(headers));
        if (r < 0 && r != -EINVAL && r != -EPERM && r != -EFBIG && r != -E2BIG)
                tn->headers_stamp = HEADERS_RETRY; /* a passing reason (a file not there yet): again */
        bool changed = r == 0 && strcmp(headers, tn->headers) != 0;
        if (changed)
                memcpy(tn->headers, headers, sizeof(headers));
        explicit_bzero(headers, sizeof(headers));
        return changed;
}

static bool credentials_changed(struct tenant *tn) {
        const char *file = awscreds_file(tn);
        struct stat st;
        if (!file)
                return false;
        int k = secret_file_stat(file, &st);
        if (k == -EXDEV || k == -ELOOP)
                st = (struct stat){ .st_ino = (ino_t)-1 }; /* tried once: the refusal is logged */
        else if (k < 0)
                return false;
        if (st.st_ino == tn->cred_ino && st.st_size == tn->cred_size &&
            st.st_ctim.tv_sec == tn->cred_ctime.tv_sec && st.st_ctim.tv_nsec == tn->cred_ctime.tv_nsec)
                return false;
        /* Each version is tried once (a bad one is logged once, not every
         * turn); one that could not be read for a passing reason (out of
         * fds, a rename under the read) again next turn. A bad new file
         * keeps the old keys: better than none. */
        tn->cred_ino = st.st_ino;
        tn->cred_size = st.st_size;
        tn->cred_ctime = st.st_ctim;
        int r = load_credentials(tn);
        if (r < 0 && r != -EINVAL && r != -EPERM && r != -EFBIG)
                tn->cred_ino = 0;
        return r == 0;
}

/* Every SECRETS_CHECK_USEC: a stat of each file (admin-named paths, read
 * O_NONBLOCK when they changed), on the loop. */
static int on_secrets_check(sd_event_source *s, uint64_t usec, void *userdata) {
        struct tierd *t = userdata;
        for (size_t i = 0; i < t->n_tenants; i++) {
                struct tenant *tn = &t->tenants[i];
                awscreds_tick(tn); /* temporary keys fetched again, off the loop */
                bool cred = credentials_changed(tn), headers = headers_changed(tn);
                if (!cred && !headers)
                        continue;
                log_info("tenant %s: %s changed, handing them to the workers", tn->cfg->name,
                         cred && headers ? "credentials and header files" : cred ? "credentials" : "header files");
                unsigned what = (cred ? UPDATE_CREDENTIALS : 0) | (headers ? UPDATE_HEADERS : 0);
                worker_send_update(&tn->worker, what);
                containers_send_update(tn, what);
        }
        sd_event_source_set_time(s, usec + SECRETS_CHECK_USEC);
        return 0;
}

/* Always, even with no secret file named yet: a reload may name one. */
int secrets_watch_start(struct tierd *t) {
        int r = sd_event_add_time_relative(t->event, &t->secrets_src, CLOCK_MONOTONIC, SECRETS_CHECK_USEC, 0,
                                           on_secrets_check, t);
        if (r >= 0)
                r = sd_event_source_set_enabled(t->secrets_src, SD_EVENT_ON);
        return r < 0 ? log_error_errno(r, "cannot watch credentials: %m") : 0;
}
