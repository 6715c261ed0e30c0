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
#include "offthread.h"
#include "url.h"
#include "workers.h"

struct get {
        store_got_t done;
        store_listed_t listed; /* a listing's, instead of done */
        store_work_t work;     /* store_get_worked's, instead of done */
        void (*worked)(void *userdata, int error);
        void *userdata;
        struct tenant *tn; /* store_get_worked's: its loop */
        int fd;
        size_t max;
};

/* What the worker wrote into the memfd, mapped read-only: exactly
 * rep->bytes, never more than asked, and sealed first so the worker
 * cannot shrink it under the mapping (SIGBUS). */
static int map_reply(struct get *g, const struct proto_reply *rep, char **ret) {
        struct stat st;
        *ret = NULL;
        if (rep->bytes > g->max || fstat(g->fd, &st) < 0 || (uint64_t)st.st_size < rep->bytes)
                return -EBADMSG;
        if (rep->bytes == 0)
                return 0;
        if (fcntl(g->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
                return -errno;
        char *data = mmap(NULL, rep->bytes, PROT_READ, MAP_PRIVATE, g->fd, 0);
        if (data == MAP_FAILED)
                return -errno;
        *ret = data;
        return 0;
}

/* A listing's records (len bytes of them; data NULL if none): whole
 * ones, of the kind asked, nothing else. 0 or -EBADMSG. */
static int check_listing(const char *data, size_t len, uint32_t kind) {
        const struct proto_object *o = (const struct proto_object *)(const void *)data;
        if (len % sizeof(*o))
                return -EBADMSG;
        for (size_t i = 0; i < len / sizeof(*o); i++)
                if (o[i].kind != kind || o[i].seq >= UINT64_MAX / 2 || o[i].mtime <= 0)
                        return -EBADMSG;
        return 0;
}

/* An object read, worked on a thread: the mapping lives until then. */
struct worked {
        store_work_t work;
        void (*done)(void *userdata, int error);
        void *userdata;
        char *data; /* NULL: empty */
        size_t len;
};

static void worked_run(void *userdata) {
        struct worked *w = userdata;
        w->work(w->userdata, w->data ?: "", w->len);
}

static void worked_done(void *userdata) {
        struct worked *w = userdata;
        if (w->data)
                munmap(w->data, w->len);
        w->done(w->userdata, 0);
        free(w);
}

/* Objects this small are worked on the loop, at once: well under a
 * millisecond, and a thread costs more than that to start (a journal
 * object of a few entries; an import may read a million). */
#define WORK_INLINE_MAX (64u << 10)

/* Takes data's mapping: unmapped once worked. */
static void work_on_thread(struct tenant *tn, struct get *g, char *data, size_t len) {
        struct worked *w = malloc(sizeof(*w));
        int r = -ENOMEM;

        if (len <= WORK_INLINE_MAX) {
                free(w);
                g->work(g->userdata, data ?: "", len);
                if (data)
                        munmap(data, len);
                g->worked(g->userdata, 0);
                return;
        }
        if (w) {
                *w = (struct worked){ .work = g->work, .done = g->worked, .userdata = g->userdata, .data = data, .len = len };
                if ((r = offthread_start(tn->t->event, NULL, 0, worked_run, worked_done, w, NULL)) >= 0)
                        return;
                free(w);
        }
        if (data)
                munmap(data, len);
        g->worked(g->userdata, r);
}

static void on_got(struct request *req, const struct proto_reply *rep) {
        struct get *g = req->userdata;
        bool size_only = req->msg.flags & PROTO_GET_SIZE_ONLY;
        int r = rep->error;
        char *data = NULL;

        if (r == 0 && !size_only)
                r = map_reply(g, rep, &data);
        if (g->listed) {
                size_t n = rep->bytes / sizeof(struct proto_object);
                if (r == 0)
                        r = check_listing(data, rep->bytes, (uint32_t)req->msg.offset);
                g->listed(g->userdata, r, r == 0 ? (const struct proto_object *)data : NULL, r == 0 ? n : 0);
        } else if (g->work && r < 0)
                g->worked(g->userdata, r);
        else if (g->work) {
                work_on_thread(g->tn, g, TAKE_PTR(data), rep->bytes);
        } else if (size_only)
                g->done(g->userdata, r, NULL, r == 0 ? rep->bytes : 0);
        else
                g->done(g->userdata, r, r == 0 ? (data ? data : "") : NULL, r == 0 ? rep->bytes : 0);
        if (data)
                munmap(data, rep->bytes);
        close(g->fd);
        free(g);
}

static int get(struct tenant *tn, enum proto_type type, const char *key, uint64_t offset, size_t max, unsigned flags,
               struct get *proto) {
        struct get *g = calloc(1, sizeof(*g));
        struct request *req;

        if (!g)
                return -ENOMEM;
        *g = *proto;
        g->max = max;
        g->fd = memfd_create("tierd-get", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (g->fd < 0) {
                int r = -errno;
                free(g);
                return r;
        }
        /* Borrowed: tierd reads the memfd after the reply. */
        if (!(req = request_new_borrowing(type, g->fd, on_got, g))) {
                close(g->fd);
                free(g);
                return -ENOMEM;
        }
        snprintf(req->msg.key, sizeof(req->msg.key), "%s", key);
        req->msg.offset = offset;
        req->msg.length = max;
        req->msg.flags = flags;
        worker_submit(&tn->worker, req);
        return 0;
}

int store_get(struct tenant *tn, const char *key, size_t max, store_got_t done, void *userdata) {
        return get(tn, PROTO_GET, key, 0, max, 0, &(struct get){ .done = done, .userdata = userdata });
}

int store_get_worked(struct tenant *tn, const char *key, size_t max, store_work_t work,
                     void (*done)(void *userdata, int error), void *userdata) {
        return get(tn, PROTO_GET, key, 0, max, 0,
                   &(struct get){ .work = work, .worked = done, .userdata = userdata, .tn = tn });
}

int store_head(struct tenant *tn, const char *key, store_got_t done, void *userdata) {
        return get(tn, PROTO_GET, key, 0, 0, PROTO_GET_SIZE_ONLY, &(struct get){ .done = done, .userdata = userdata });
}

int store_list(struct tenant *tn, uint32_t kind, size_t max, store_listed_t done, void *userdata) {
        return get(tn, PROTO_LIST, "", kind, max - max % sizeof(struct proto_object), 0,
                   &(struct get){ .listed = done, .userdata = userdata });
}

/* store_list_worked's: the listing checked and worked on the thread. */
struct list_worked {
        store_list_work_t work;
        void (*done)(void *userdata, int error);
        void *userdata;
        uint32_t kind;
        int error;
};

static void list_work(void *userdata, const char *data, size_t len) {
        struct list_worked *l = userdata;
        if ((l->error = check_listing(data, len, l->kind)) == 0)
                l->work(l->userdata, (const struct proto_object *)(const void *)data, len / sizeof(struct proto_object));
}

static void list_worked(void *userdata, int error) {
        struct list_worked *l = userdata;
        l->done(l->userdata, error ?: l->error);
        free(l);
}

int store_list_worked(struct tenant *tn, uint32_t kind, size_t max, store_list_work_t work,
                      void (*done)(void *userdata, int error), void *userdata) {
        struct list_worked *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        *l = (struct list_worked){ .work = work, .done = done, .userdata = userdata, .kind = kind };
        int r = get(tn, PROTO_LIST, "", kind, max - max % sizeof(struct proto_object), 0,
                    &(struct get){ .work = list_work, .worked = list_worked, .userdata = l, .tn = tn });
        if (r < 0)
                free(l);
        return r;
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

int store_delete_if_old(struct tenant *tn, const char *key, uint64_t size, int64_t before, store_put_t done,
                        void *userdata) {
        struct put *p = calloc(1, sizeof(*p));
        struct request *req;

        if (!p)
                return -ENOMEM;
        *p = (struct put){ .done = done, .userdata = userdata };
        if (!(req = request_new(PROTO_DELETE, -1, on_put, p))) {
                free(p);
                return -ENOMEM;
        }
        snprintf(req->msg.key, sizeof(req->msg.key), "%s", key);
        req->msg.size = size;
        req->msg.offset = (uint64_t)before;
        worker_submit(&tn->worker, req);
        return 0;
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

static bool str_same(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

bool store_same_place(const struct tenant *a, const struct tenant *b) {
        struct backend_url ua, ub;
        struct stat sa, sb;
        bool same;

        if (a->store_fd >= 0 && b->store_fd >= 0)
                return fstat(a->store_fd, &sa) < 0 || fstat(b->store_fd, &sb) < 0 ||
                       (sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino);
        if (backend_url_parse(a->cfg->backend, &ua, NULL) < 0)
                return true;
        if (backend_url_parse(b->cfg->backend, &ub, NULL) < 0) {
                backend_url_done(&ua);
                return true;
        }
        same = ua.kind == ub.kind && str_same(ua.bucket, ub.bucket) && str_same(ua.base, ub.base) &&
               str_same(ua.prefix, ub.prefix) && (ua.kind != BACKEND_S3 || str_same(a->cfg->endpoint, b->cfg->endpoint));
        backend_url_done(&ua);
        backend_url_done(&ub);
        return same;
}
