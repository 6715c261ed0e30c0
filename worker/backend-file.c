/* SPDX-License-Identifier: MIT */
/*
 * file://DIR: the embedded default store. Objects are files DIR/<key>
 * ("sha256/<hex>"), written under a temporary name and renamed into place so
 * a crash never leaves a half object under a real key. The worker gets DIR
 * as an fd from tierd and resolves every key beneath it.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend.h"
#include "fdio.h"
#include "hash.h"
#include "macro.h"
#include "objkey.h"
#include "progress.h"

#define FILE_IO_BUF (1u << 20)

struct backend_file {
        struct backend base;
        int dir_fd;
};

static struct backend_file *to_file(struct backend *b) { return (struct backend_file *)b; }

/* Keys come from stubs that only root can write, but resolve them beneath
 * the store anyway: a key is never a way out of it. */
static int open_beneath(int dir_fd, const char *key, int flags, mode_t mode) {
        struct open_how how = { .flags = (uint64_t)flags | O_CLOEXEC | O_NOFOLLOW, .mode = mode,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS };
        long fd = syscall(SYS_openat2, dir_fd, key, &how, sizeof(how));
#ifdef TIERD_WORKER_UNDER_VALGRIND
        /* Test build only: valgrind 3.19 does not know openat2. The keys of
         * the test are tierd's own (sha256/<hex>, manifest/<hex>). */
        if (fd < 0 && errno == ENOSYS && !strstr(key, ".."))
                fd = openat(dir_fd, key, flags | O_CLOEXEC | O_NOFOLLOW, mode);
#endif
        return fd < 0 ? -errno : (int)fd;
}

static int file_open(const struct proto_config *cfg, int store_fd, struct backend **ret) {
        struct backend_file *f;
        (void)cfg;
        if (store_fd < 0)
                return -EBADF;
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->base.ops = &backend_file_ops;
        f->dir_fd = store_fd;
        *ret = &f->base;
        return 0;
}

static void file_close(struct backend *b) {
        if (!b)
                return;
        close(to_file(b)->dir_fd);
        free(b);
}

static int file_fetch(struct backend *b, const char *key, uint64_t offset, uint64_t length, backend_sink_t sink,
                      void *ctx) {
        _cleanup_close_ int fd = open_beneath(to_file(b)->dir_fd, key, O_RDONLY, 0);
        _cleanup_free_ uint8_t *buf = NULL;
        struct stat st;
        uint64_t pos = offset, end = offset + length;
        int r;

        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < end)
                return -EIO; /* a short object is a broken one */
        buf = malloc(FILE_IO_BUF);
        if (!buf)
                return -ENOMEM;
        while (pos < end) {
                ssize_t n = pread(fd, buf, (size_t)MIN((uint64_t)FILE_IO_BUF, end - pos), (off_t)pos);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                r = sink(ctx, buf, (size_t)n);
                if (r < 0)
                        return r;
                pos += (uint64_t)n;
        }
        return 0;
}

static int file_exists(struct backend *b, const char *key, uint64_t *size, int64_t *mtime) {
        _cleanup_close_ int fd = open_beneath(to_file(b)->dir_fd, key, O_PATH, 0);
        struct stat st;
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EIO;
        if (size)
                *size = (uint64_t)st.st_size;
        if (mtime)
                *mtime = st.st_mtim.tv_sec;
        return 0;
}

static int write_all(void *ctx, const void *buf, size_t n) {
        progress_report();
        return write_full(*(int *)ctx, buf, n);
}

/* A rename or a mkdir is an entry of its directory: until that directory
 * is synced, a power cut can lose it although the file's bytes are on
 * disk (XFS keeps it in its log, ext4 in its next journal commit). The
 * directory of path, beneath the store ("" : the store itself). */
static int sync_dir(int dir_fd, const char *path, size_t len) {
        char dir[STUB_KEY_MAX];
        _cleanup_close_ int fd = -1;

        snprintf(dir, sizeof(dir), "%.*s", (int)len, path);
        fd = open_beneath(dir_fd, len ? dir : ".", O_RDONLY | O_DIRECTORY, 0);
        if (fd < 0)
                return fd;
        return fsync(fd) < 0 ? -errno : 0;
}

static size_t parent_len(const char *path) {
        const char *slash = strrchr(path, '/');
        return slash ? (size_t)(slash - path) : 0;
}

static int file_store(struct backend *b, const char *key, int fd, uint64_t size, const uint8_t sha256[32],
                      unsigned flags) {
        struct backend_file *f = to_file(b);
        char tmp[STUB_KEY_MAX + 64], dir[STUB_KEY_MAX];
        _cleanup_close_ int out = -1;
        uint8_t got[32];
        int r;

        /* Every directory of the key (catalog/journal/...), beneath the store. */
        for (const char *slash = strchr(key, '/'); slash; slash = strchr(slash + 1, '/')) {
                snprintf(dir, sizeof(dir), "%.*s", (int)(slash - key), key);
                if (mkdirat(f->dir_fd, dir, 0700) == 0)
                        r = sync_dir(f->dir_fd, dir, parent_len(dir)); /* a new directory: its entry */
                else
                        r = errno == EEXIST ? 0 : -errno;
                if (r < 0)
                        return r;
        }
        snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%lx", key, (int)getpid(), (unsigned long)random());
        out = open_beneath(f->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (out < 0)
                return out;
        r = sha256_fd_range(fd, 0, size, got, write_all, &out);
        if (r == 0 && memcmp(got, sha256, 32) != 0)
                r = -EBADMSG; /* the file changed between hashing and upload */
        if (r == 0 && fsync(out) < 0)
                r = -errno;
        if (r == 0 && renameat2(f->dir_fd, tmp, f->dir_fd, key, flags & BACKEND_STORE_IF_ABSENT ? RENAME_NOREPLACE : 0) < 0)
                r = -errno;
        /* Stored only once its name is durable: a release punches the local
         * copy right after. */
        if (r == 0 && (r = sync_dir(f->dir_fd, key, parent_len(key))) < 0)
                return r; /* renamed: no temporary left to remove */
        if (r < 0)
                unlinkat(f->dir_fd, tmp, 0);
        return r;
}

static int file_remove(struct backend *b, const char *key) {
        return unlinkat(to_file(b)->dir_fd, key, 0) < 0 ? -errno : 0;
}

/* Its mtime is what a collection reads as the object's age. */
static int file_touch(struct backend *b, const char *key) {
        _cleanup_close_ int fd = open_beneath(to_file(b)->dir_fd, key, O_RDONLY, 0);
        if (fd < 0)
                return fd;
        return futimens(fd, NULL) < 0 ? -errno : 0;
}

/* One directory per kind; temporary names (a crash's) and anything else
 * not of tierd's form are skipped. */
static int file_list(struct backend *b, uint32_t kind, backend_list_t each, void *ctx) {
        const char *prefix = object_kind_prefix(kind);
        char dir[64], key[STUB_KEY_MAX];
        struct dirent *de;
        int r = 0;

        if (!prefix)
                return -EINVAL;
        snprintf(dir, sizeof(dir), "%.*s", (int)strlen(prefix) - 1, prefix); /* without its '/' */
        int fd = open_beneath(to_file(b)->dir_fd, dir, O_RDONLY | O_DIRECTORY, 0);
        if (fd == -ENOENT)
                return 0; /* nothing of that kind was ever stored */
        if (fd < 0)
                return fd;
        _cleanup_closedir_ DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        while (r == 0 && (errno = 0, de = readdir(d))) {
                struct proto_object o;
                struct stat st;
                if (snprintf(key, sizeof(key), "%s%s", prefix, de->d_name) >= (int)sizeof(key) ||
                    object_key_parse(key, &o) < 0 || o.kind != kind)
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)
                                continue; /* deleted meanwhile */
                        r = -errno; /* a listing with a hole would be taken for the whole */
                        break;
                }
                if (!S_ISREG(st.st_mode))
                        continue;
                o.size = (uint64_t)st.st_size;
                o.mtime = st.st_mtim.tv_sec;
                r = each(ctx, &o);
        }
        if (r == 0 && errno)
                r = -errno;
        return r;
}

const struct backend_ops backend_file_ops = {
        .scheme = "file",
        .open = file_open,
        .close = file_close,
        .fetch = file_fetch,
        .exists = file_exists,
        .store = file_store,
        .remove = file_remove,
        .list = file_list,
        .touch = file_touch,
};
