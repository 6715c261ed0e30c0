/* SPDX-License-Identifier: MIT */
/*
 * Where a fill is written: fetch a range from the store and pwrite it
 * through the fill fd tierd opened on its private mount (so the write raises
 * no event and keeps every permission check: an immutable file fails).
 */
#include "fill.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "log.h"
#include "macro.h"
#include "progress.h"
#include "verify.h"

#define BLOCK 4096u

struct fill_sink {
        int fd;
        uint64_t pos;
        EVP_MD_CTX *md; /* set for whole-file fills */
        uint64_t hole_end; /* [a zero run's start, hole_end) is known to be a hole */
};

static bool all_zero(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (p[i])
                        return false;
        return true;
}

static int pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off) {
        while (n > 0) {
                ssize_t w = pwrite(fd, p, n, (off_t)off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                p += w;
                n -= (size_t)w;
                off += (uint64_t)w;
        }
        return 0;
}

/* Whole zero blocks [off, off+len) read as zeros: a hole already (the
 * usual case, a released range: one SEEK_DATA tells for all that follow),
 * else punched, else written. Never a punch of bytes that are not zeros in
 * the object: a reader may be reading them right now. */
static int zero_blocks(struct fill_sink *s, uint64_t off, uint64_t len) {
        if (off + len <= s->hole_end)
                return 0;
        off_t data = lseek(s->fd, (off_t)off, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
                data = INT64_MAX; /* nothing but holes from off on */
        if (data >= 0 && (uint64_t)data >= off) {
                s->hole_end = (uint64_t)data;
                if (off + len <= s->hole_end)
                        return 0;
        }
        if (fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
                return 0;
        if (errno != EOPNOTSUPP)
                return -errno;
        static const uint8_t zeros[BLOCK];
        for (uint64_t at = off; at < off + len; at += BLOCK) {
                int r = pwrite_all(s->fd, zeros, BLOCK, at);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Writes data at the sink's position, a whole zero block as a hole, so a
 * sparse file stays sparse. */
static int fill_sink_write(void *ctx, const void *data, size_t n) {
        struct fill_sink *s = ctx;
        const uint8_t *p = data;
        size_t done = 0;

        progress_report();
        if (s->md)
                EVP_DigestUpdate(s->md, data, n);
        while (done < n) {
                uint64_t off = s->pos + done;
                size_t len = MIN(n - done, (size_t)(BLOCK - off % BLOCK));
                size_t run = 0;
                if (len == BLOCK && all_zero(p + done, len)) {
                        /* Consecutive zero blocks: one run. */
                        while (done + run + BLOCK <= n && all_zero(p + done + run, BLOCK))
                                run += BLOCK;
                        int r = zero_blocks(s, off, run);
                        if (r < 0)
                                return r;
                        done += run;
                        continue;
                }
                /* Coalesce consecutive blocks that carry data into one write. */
                while (done + run < n) {
                        uint64_t o = s->pos + done + run;
                        size_t l = MIN(n - done - run, (size_t)(BLOCK - o % BLOCK));
                        if (run > 0 && l == BLOCK && all_zero(p + done + run, l))
                                break;
                        run += l;
                }
                int r = pwrite_all(s->fd, p + done, run, off);
                if (r < 0)
                        return r;
                done += run;
        }
        s->pos += n;
        return 0;
}

/* A whole-file check failed: put the holes back, so no wrong byte stays. */
static void punch_back(int fd, uint64_t size) {
        if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)round_up_u64(size, BLOCK)) < 0)
                log_error("could not punch back a file that failed verification: %m");
}

#ifdef TIERD_TEST_HOOKS
/* Test builds only (make testhooks): objects with these keys make the
 * worker try what its sandbox forbids, and fill the file with what
 * happened, so a test reads the verdict through the data path. */
#include <arpa/inet.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>

#define HOOK_KEY(n) "sha256/00000000000000000000000000000000000000000000000000000000000000" n

static const char *try_errno(int r) { return r >= 0 ? "allowed" : strerrorname_np(errno) ?: "?"; }

/* Hook 06: a fill fd kept after its fill, written through at the next one. */
static int kept_fd = -1;

static void write_kept(void) {
        int fd = __atomic_exchange_n(&kept_fd, -1, __ATOMIC_SEQ_CST);
        if (fd < 0)
                return;
        /* Said first: tierd may kill the worker as soon as it has written. */
        log_error("test hook: writing 4 bytes through a fill fd kept from an earlier fill");
        (void)!pwrite(fd, "EVIL", 4, 0);
        close(fd);
}

static int test_hook(const struct proto_request *req, int fd) {
        char out[4096] = "";
        write_kept();
        if (strcmp(req->key, HOOK_KEY("01")) == 0) {
                int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                struct sockaddr_in other = { .sin_family = AF_INET, .sin_port = htons(22),
                                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                int c = connect(s, (struct sockaddr *)&other, sizeof(other));
                const char *conn = try_errno(c);
                close(s);
                int o1 = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
                const char *passwd = try_errno(o1);
                int o2 = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
                const char *proc = try_errno(o2);
                /* The fill fd, passed back to tierd over the control socket (fd 3). */
                const char *passed = try_errno(proto_send(3, "x", 1, fd));
                snprintf(out, sizeof(out), "open /etc/passwd: %s\nopen /proc/self/status: %s\nconnect 127.0.0.1:22: %s\n"
                         "uid %u\nsendmsg of an fd to tierd: %s\n", passwd, proc, conn, (unsigned)getuid(), passed);
                safe_close(o1);
                safe_close(o2);
        } else if (strcmp(req->key, HOOK_KEY("02")) == 0)
                ptrace(PTRACE_TRACEME, 0, NULL, NULL);
        else if (strcmp(req->key, HOOK_KEY("03")) == 0)
                mount("none", "/tmp", "tmpfs", 0, NULL);
        else if (strcmp(req->key, HOOK_KEY("05")) == 0)
                for (;;)
                        sleep(1000); /* hung: no progress, ever */
        else if (strcmp(req->key, HOOK_KEY("04")) == 0)
                kill((pid_t)(req->offset / 4096), SIGKILL); /* the pid to kill: the offset in pages */
        else if (strcmp(req->key, HOOK_KEY("06")) == 0) {
                __atomic_store_n(&kept_fd, fcntl(fd, F_DUPFD_CLOEXEC, 3), __ATOMIC_SEQ_CST);
                snprintf(out, sizeof(out), "kept\n");
        } else if (strcmp(req->key, HOOK_KEY("07")) == 0)
                (void)!ftruncate(fd, 0);
        else if (strcmp(req->key, HOOK_KEY("08")) == 0)
                mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        else if (strcmp(req->key, HOOK_KEY("09")) == 0) {
                if (fork() == 0)
                        _exit(0);
        } else if (strcmp(req->key, HOOK_KEY("10")) == 0)
                (void)!fallocate(fd, 0, 0, 1 << 20);
        else if (strcmp(req->key, HOOK_KEY("12")) == 0)
                snprintf(out, sizeof(out), "LIES\n"); /* and says it checked them */
        else if (strcmp(req->key, HOOK_KEY("11")) == 0) {
                struct flock lock = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
                (void)!fcntl(fd, F_OFD_SETLK, &lock);
        } else
                return 1;
        return pwrite_all(fd, (const uint8_t *)out, strlen(out), req->offset) < 0 ? -EIO : 0;
}
#endif

static int serve_fill(struct backend *b, struct manifest_cache *mcache, const struct proto_request *req, int fd,
                      struct proto_reply *rep) {
        _cleanup_md_ctx_ EVP_MD_CTX *md = NULL;
        struct fill_sink sink = { .fd = fd, .pos = req->offset };
        uint8_t got[32];
        int r;

#ifdef TIERD_TEST_HOOKS
        if ((r = test_hook(req, fd)) <= 0)
                return r;
#endif
        /* Nothing is punched first: the range may hold bytes a reader was
         * given (a range the record dropped); every byte is written over
         * with the object's, zero blocks included (fill_sink_write). */
        if (req->flags & PROTO_FILL_WHOLE) {
                if (req->offset != 0 || req->length != req->size)
                        return -EINVAL;
                md = EVP_MD_CTX_new();
                if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
                        return -ENOMEM;
                sink.md = md;
        }
        if (req->flags & PROTO_FILL_MANIFEST)
                r = fetch_verified(b, mcache, req, fill_sink_write, &sink);
        else
                r = b->ops->fetch(b, req->key, req->offset, req->length, fill_sink_write, &sink);
        if (r < 0)
                return r;
        rep->bytes = req->length;
        /* No fdatasync: tierd lets readers in on the bytes now, in the page
         * cache, and records them as present only after a PROTO_SYNC of the
         * file (batched across fills), so a crash or a power cut loses the
         * record, never the bytes a record vouches for. */
        if (md) {
                if (!EVP_DigestFinal_ex(md, got, NULL))
                        return -EIO;
                if (memcmp(got, req->sha256, 32) != 0) {
                        log_error("object %s: content does not match its SHA-256, nothing kept", req->key);
                        punch_back(fd, req->size);
                        return -EBADMSG;
                }
        }
        return 0;
}

static int serve_verify(const struct proto_request *req, int fd) {
        uint8_t got[32];
        int r = sha256_fd_range(fd, 0, req->size, got, progress_each, NULL);
        if (r < 0)
                return r;
        if (memcmp(got, req->sha256, 32) != 0) {
                log_error("object %s: restored file does not match its SHA-256, punched back", req->key);
                punch_back(fd, req->size);
                return -EBADMSG;
        }
        return 0;
}

static int serve_archive(struct backend *b, const struct proto_request *req, int fd, struct proto_reply *rep) {
        char key[STUB_KEY_MAX];
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0)
                return -errno;
        rep->size = (uint64_t)st.st_size;
        r = archive_hash_and_manifest(b, fd, rep->size, req->chunk, rep);
        if (r < 0)
                return r;
        stub_key_for_hash(rep->sha256, key);
        bool reused;
        r = backend_store_once(b, key, fd, rep->size, rep->sha256, &reused);
        if (r < 0)
                return r;
        rep->bytes = reused ? 0 : rep->size;
        return 0;
}

/* The archived copy can be read back: it is there, and of the size the
 * stub says (its key is its SHA-256: tierd checked that against the stub).
 * -ENOENT: gone; -EBADMSG: another size. */
static int serve_check(struct backend *b, const struct proto_request *req, struct proto_reply *rep) {
        uint64_t size = 0;
        int r = b->ops->exists(b, req->key, &size, NULL);
        if (r < 0)
                return r;
        rep->bytes = size;
        return size == req->size ? 0 : -EBADMSG;
}

/* Plain: every byte written, in order (a memfd has no holes to keep). */
static int plain_sink_write(void *ctx, const void *data, size_t n) {
        struct fill_sink *s = ctx;
        progress_report();
        int r = pwrite_all(s->fd, data, n, s->pos);
        s->pos += n;
        return r;
}

/* A small object of tierd's, written whole into its memfd. */
static int serve_get(struct backend *b, const struct proto_request *req, int fd, struct proto_reply *rep) {
        uint64_t size = 0;
        int r = b->ops->exists(b, req->key, &size, NULL);
        if (r < 0)
                return r;
        if (req->flags & PROTO_GET_SIZE_ONLY) {
                rep->bytes = size;
                return 0;
        }
        if (size > req->length)
                return -EFBIG; /* tierd's bound: a store cannot make it hold more */
        struct fill_sink sink = { .fd = fd };
        r = size ? b->ops->fetch(b, req->key, 0, size, plain_sink_write, &sink) : 0;
        if (r < 0)
                return r;
        rep->bytes = size;
        return 0;
}

/* tierd's own objects (the catalog's): not named by their bytes, so one
 * there is replaced unless the write is fenced. */
static int serve_put(struct backend *b, const struct proto_request *req, int fd) {
        return backend_put(b, req->key, fd, req->size, req->sha256,
                           req->flags & PROTO_PUT_IF_ABSENT ? BACKEND_STORE_IF_ABSENT : BACKEND_STORE_REPLACE);
}

struct list_sink {
        struct fill_sink out;
        uint64_t max;
};

static int list_sink_add(void *ctx, const struct proto_object *o) {
        struct list_sink *s = ctx;
        if (s->out.pos + sizeof(*o) > s->max)
                return -EFBIG; /* tierd's bound */
        return plain_sink_write(&s->out, o, sizeof(*o));
}

/* Every object of tierd's of one kind, as fixed records into tierd's memfd. */
static int serve_list(struct backend *b, const struct proto_request *req, int fd, struct proto_reply *rep) {
        struct list_sink sink = { .out = { .fd = fd }, .max = req->length };
        if (!b->ops->list)
                return -EOPNOTSUPP;
        int r = b->ops->list(b, (uint32_t)req->offset, list_sink_add, &sink);
        if (r < 0)
                return r;
        rep->bytes = sink.out.pos;
        return 0;
}

void worker_serve(struct backend *b, struct manifest_cache *mcache, const struct proto_request *req, int fd,
                  struct proto_reply *rep) {
        int r;

        *rep = (struct proto_reply){ .id = req->id };
        switch (req->type) {
        case PROTO_FILL:
                r = serve_fill(b, mcache, req, fd, rep);
                break;
        case PROTO_VERIFY:
                r = serve_verify(req, fd);
                break;
        case PROTO_ARCHIVE:
                r = serve_archive(b, req, fd, rep);
                break;
        case PROTO_CHECK:
                r = serve_check(b, req, rep);
                break;
        case PROTO_GET:
                r = serve_get(b, req, fd, rep);
                break;
        case PROTO_PUT:
                r = serve_put(b, req, fd);
                break;
        case PROTO_LIST:
                r = serve_list(b, req, fd, rep);
                break;
        case PROTO_SYNC:
                r = fdatasync(fd) < 0 ? -errno : 0;
                break;
        case PROTO_DELETE:
                /* A collection's, where the store lists (and says ages); a
                 * delete by size alone (a trace's lock) wherever it deletes. */
                r = b->ops->list || ((int64_t)req->offset == INT64_MAX && b->ops->remove)
                            ? backend_remove_if_old(b, req->key, req->size, (int64_t)req->offset)
                            : -EOPNOTSUPP;
                break;
        default:
                r = -EINVAL;
        }
        /* Archives say why themselves; the catalog asks for what may be
         * missing or taken. */
        if (r < 0 && req->type != PROTO_ARCHIVE && !(req->type == PROTO_GET && r == -ENOENT) &&
            !(req->type == PROTO_PUT && r == -EEXIST) &&
            !(req->type == PROTO_DELETE && r == -EBUSY))
                log_error("request %llu (%s [%llu, +%llu)): %s", (unsigned long long)req->id, req->key,
                          (unsigned long long)req->offset, (unsigned long long)req->length, strerror(-r));
        rep->error = r;
}
