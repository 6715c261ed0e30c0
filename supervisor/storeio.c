/* SPDX-License-Identifier: MIT */
#include "storeio.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "log.h"
#include "macro.h"
#include "workers.h"

struct get {
        store_got_t done;
        void *userdata;
        int fd;
        size_t max;
};

static void on_got(struct request *req, const struct proto_reply *rep) {
        struct get *g = req->userdata;
        int r = rep->error;
        char *data = NULL;

        struct stat st;
        /* The worker is not trusted: what it says it wrote must be there,
         * and no more than asked (a mapping past the end would be SIGBUS). */
        if (r == 0 && !(req->msg.flags & PROTO_GET_SIZE_ONLY) &&
            (rep->bytes > g->max || fstat(g->fd, &st) < 0 || (uint64_t)st.st_size < rep->bytes))
                r = -EBADMSG;
        /* Sealed: the worker cannot shrink it under the mapping. */
        if (r == 0 && rep->bytes > 0 && !(req->msg.flags & PROTO_GET_SIZE_ONLY) &&
            fcntl(g->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
                r = -errno;
        if (r == 0 && rep->bytes > 0 && !(req->msg.flags & PROTO_GET_SIZE_ONLY)) {
                /* The worker wrote exactly rep->bytes from offset 0. */
                data = mmap(NULL, rep->bytes, PROT_READ, MAP_PRIVATE, g->fd, 0);
                if (data == MAP_FAILED) {
                        data = NULL;
                        r = -errno;
                }
        }
        if (req->msg.flags & PROTO_GET_SIZE_ONLY)
                g->done(g->userdata, r, NULL, r == 0 ? rep->bytes : 0);
        else
                g->done(g->userdata, r, r == 0 ? (data ? data : "") : NULL, r == 0 ? rep->bytes : 0);
        if (data)
                munmap(data, rep->bytes);
        close(g->fd);
        free(g);
}

static int get(struct tenant *tn, const char *key, size_t max, unsigned flags, store_got_t done, void *userdata) {
        struct get *g = calloc(1, sizeof(*g));
        struct request *req;

        if (!g)
                return -ENOMEM;
        *g = (struct get){ .done = done, .userdata = userdata, .max = max };
        g->fd = memfd_create("tierd-get", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (g->fd < 0) {
                int r = -errno;
                free(g);
                return r;
        }
        /* Borrowed: tierd reads the memfd after the reply. */
        if (!(req = request_new_borrowing(PROTO_GET, g->fd, on_got, g))) {
                close(g->fd);
                free(g);
                return -ENOMEM;
        }
        snprintf(req->msg.key, sizeof(req->msg.key), "%s", key);
        req->msg.length = max;
        req->msg.flags = flags;
        worker_submit(&tn->worker, req);
        return 0;
}

int store_get(struct tenant *tn, const char *key, size_t max, store_got_t done, void *userdata) {
        return get(tn, key, max, 0, done, userdata);
}

int store_head(struct tenant *tn, const char *key, store_got_t done, void *userdata) {
        return get(tn, key, 0, PROTO_GET_SIZE_ONLY, done, userdata);
}

struct put {
        store_put_t done;
        void *userdata;
};

static void on_put(struct request *req, const struct proto_reply *rep) {
        struct put *p = req->userdata;
        p->done(p->userdata, rep->error);
        free(p);
}

int store_put(struct tenant *tn, const char *key, const void *data, size_t len, bool if_absent, store_put_t done,
              void *userdata) {
        _cleanup_close_ int fd = memfd_create("tierd-put", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        struct request *req;
        struct put *p;
        int r;

        if (fd < 0)
                return -errno;
        if ((r = write_full(fd, data, len)) < 0)
                return r;
        /* Sealed: what the worker uploads is what was hashed here. */
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return -errno;
        if (!(p = calloc(1, sizeof(*p))))
                return -ENOMEM;
        *p = (struct put){ .done = done, .userdata = userdata };
        if (!(req = request_new(PROTO_PUT, fd, on_put, p))) {
                free(p);
                return -ENOMEM;
        }
        fd = -1; /* the request's now */
        snprintf(req->msg.key, sizeof(req->msg.key), "%s", key);
        req->msg.size = len;
        req->msg.flags = if_absent ? PROTO_PUT_IF_ABSENT : 0;
        EVP_Digest(data, len, req->msg.sha256, NULL, EVP_sha256(), NULL);
        worker_submit(&tn->worker, req);
        return 0;
}
