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

/* What recent checks found, by the object's SHA-256: a small table in
 * which a newer entry simply takes an older one's slot (a forgotten answer
 * costs one more HEAD). */
#define CHECKED_SLOTS 1024

struct checked_object {
        uint8_t sha256[32];
        uint64_t size;
        uint64_t when_usec; /* 0: empty */
        int result;         /* 0 there, or -ENOENT, -EBADMSG */
};

struct checked_objects {
        struct checked_object slot[CHECKED_SLOTS];
};

static struct checked_object *checked_slot(struct tenant *tn, const uint8_t sha256[32]) {
        if (!tn->checked && !(tn->checked = calloc(1, sizeof(*tn->checked))))
                return NULL;
        uint32_t h;
        memcpy(&h, sha256, sizeof(h));
        return &tn->checked->slot[h % CHECKED_SLOTS];
}

static void remember(struct tenant *tn, const uint8_t sha256[32], uint64_t size, int result) {
        struct checked_object *o = checked_slot(tn, sha256);
        if (!o)
                return; /* out of memory: the next release asks again */
        *o = (struct checked_object){ .size = size, .when_usec = tierd_now_usec(tn->t) ?: 1, .result = result };
        memcpy(o->sha256, sha256, 32);
}

void remote_check_remember(struct tenant *tn, const uint8_t sha256[32], uint64_t size) {
        remember(tn, sha256, size, 0);
}

/* Content-addressed: a key that is not the stub's hash names bytes nobody
 * checked. */
static bool key_is_hash(const struct stub *s) {
        char expected[STUB_KEY_MAX];
        stub_key_for_hash(s->sha256, expected);
        return strcmp(expected, s->key) == 0;
}

int remote_check_recent(struct tenant *tn, const struct stub *s) {
        if (!key_is_hash(s))
                return -EBADMSG;
        const struct checked_object *o = tn->checked ? checked_slot(tn, s->sha256) : NULL;
        /* Another size: one of the stubs is wrong, a check says which. */
        if (!o || !o->when_usec || memcmp(o->sha256, s->sha256, 32) != 0 || o->size != s->size ||
            tierd_now_usec(tn->t) - o->when_usec > REMOTE_CHECK_FRESH_USEC)
                return 0;
        return o->result ?: 1;
}

void remote_check_free(struct tenant *tn) {
        free(tn->checked);
        tn->checked = NULL;
}

struct check {
        void (*done)(void *userdata, int error, const char *msg);
        void *userdata;
        struct tenant *tn;
        uint8_t sha256[32];
        char key[STUB_KEY_MAX];
};

static void on_checked(struct request *req, const struct proto_reply *rep) {
        struct check *c = req->userdata;
        char msg[512] = "";
        int r = rep->error;

        if (r == -ENOENT)
                snprintf(msg, sizeof(msg), "its archived copy %s is not in the store: not released (archive it again)",
                         c->key);
        else if (r == -EBADMSG)
                snprintf(msg, sizeof(msg), "its archived copy %s has %llu bytes, not %llu: not released", c->key,
                         (unsigned long long)rep->bytes, (unsigned long long)req->msg.size);
        else if (r < 0)
                snprintf(msg, sizeof(msg), "cannot check its archived copy %s: %s: not released", c->key, strerror(-r));
        /* Found or not found; an error on the way (a network fault) says
         * nothing about the object. */
        if (r == 0 || r == -ENOENT || r == -EBADMSG)
                remember(c->tn, c->sha256, req->msg.size, r);
        if (r < 0)
                log_error("tenant %s: %s", c->tn->cfg->name, msg);
        c->done(c->userdata, r, r < 0 ? msg : NULL);
        free(c);
}

int remote_check(struct tenant *tn, const struct stub *s, void (*done)(void *userdata, int error, const char *msg),
                 void *userdata) {
        struct check *c;
        struct request *req;

        if (!key_is_hash(s)) {
                done(userdata, -EBADMSG, "its stub's object key is not its SHA-256: not released");
                return 0;
        }
        if (!(c = calloc(1, sizeof(*c))))
                return -ENOMEM;
        *c = (struct check){ .done = done, .userdata = userdata, .tn = tn };
        memcpy(c->sha256, s->sha256, 32);
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
