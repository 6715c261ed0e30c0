/* SPDX-License-Identifier: MIT */
/*
 * A release punches the only local copy: first the store must still hold
 * the object (a lifecycle rule or a hand may have removed it since the
 * archive), of the size the stub records. Its content was checked at
 * upload, and its key is its SHA-256.
 */
#include "remotecheck.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "workers.h"

struct check {
        void (*done)(void *userdata, int error, const char *msg);
        void *userdata;
        struct tenant *tn;
        char key[STUB_KEY_MAX];
};

static void on_checked(struct request *req, const struct proto_reply *rep) {
        struct check *c = req->userdata;
        static char msg[512];
        int r = rep->error;

        if (r == -ENOENT)
                snprintf(msg, sizeof(msg), "its archived copy %s is not in the store: not released (archive it again)",
                         c->key);
        else if (r == -EBADMSG)
                snprintf(msg, sizeof(msg), "its archived copy %s has %llu bytes, not %llu: not released", c->key,
                         (unsigned long long)rep->bytes, (unsigned long long)req->msg.size);
        else if (r < 0)
                snprintf(msg, sizeof(msg), "cannot check its archived copy %s: %s: not released", c->key, strerror(-r));
        if (r < 0)
                log_error("tenant %s: %s", c->tn->cfg->name, msg);
        c->done(c->userdata, r, r < 0 ? msg : NULL);
        free(c);
}

int remote_check(struct tenant *tn, const struct stub *s, void (*done)(void *userdata, int error, const char *msg),
                 void *userdata) {
        char expected[STUB_KEY_MAX];
        struct check *c;
        struct request *req;

        /* Content-addressed: a key that is not the stub's hash names bytes
         * nobody checked. */
        stub_key_for_hash(s->sha256, expected);
        if (strcmp(expected, s->key) != 0) {
                done(userdata, -EBADMSG, "its stub's object key is not its SHA-256: not released");
                return 0;
        }
        if (!(c = calloc(1, sizeof(*c))))
                return -ENOMEM;
        *c = (struct check){ .done = done, .userdata = userdata, .tn = tn };
        snprintf(c->key, sizeof(c->key), "%s", s->key);
        if (!(req = request_new(PROTO_CHECK, -1, on_checked, c))) {
                free(c);
                return -ENOMEM;
        }
        memcpy(req->msg.key, s->key, sizeof(req->msg.key));
        req->msg.size = s->size;
        worker_submit(&tn->worker, req);
        return 0;
}
