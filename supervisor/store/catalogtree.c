/* SPDX-License-Identifier: MIT */
#include "catalogtree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "dispatch.h"
#include "log.h"
#include "macro.h"


void catalog_entries_done(struct catalog_entries *l) {
        for (size_t i = 0; i < l->n; i++)
                catalog_entry_done(&l->e[i]);
        free(l->e);
        *l = (struct catalog_entries){};
}

int catalog_entries_add(struct catalog_entries *l, struct catalog_entry *e) {
        size_t bytes = catalog_entry_bytes(e);
        if ((l->limit && l->n >= l->limit) || (l->limit_bytes && l->bytes + bytes > l->limit_bytes)) {
                catalog_entry_done(e);
                return -E2BIG;
        }
        struct catalog_entry *p = array_room(l->e, l->n, &l->allocated, sizeof(*p), 256);
        if (!p)
                return -ENOMEM;
        l->e = p;
        l->e[l->n++] = *e;
        l->bytes += bytes;
        *e = (struct catalog_entry){};
        return 0;
}

/* user.* and POSIX ACLs of an fd opened for reading. */
static int read_xattrs(int fd, struct catalog_entry *e) {
        ssize_t size = flistxattr(fd, NULL, 0);
        if (size < 0)
                return errno == ENOTSUP || errno == EBADF ? 0 : -errno;
        _cleanup_free_ char *names = malloc((size_t)size + 1);
        if (!names)
                return -ENOMEM;
        ssize_t n = flistxattr(fd, names, (size_t)size);
        if (n < 0)
                return errno == ERANGE ? -EAGAIN : -errno; /* grew meanwhile: the next try */
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
                const char *name = names + i;
                if (!catalog_xattr_name_allowed(name) || e->n_xattrs == CATALOG_XATTRS_MAX)
                        continue;
                ssize_t len = fgetxattr(fd, name, NULL, 0);
                if (len < 0 || len > CATALOG_XATTR_VALUE_MAX)
                        continue;
                struct catalog_xattr *p = reallocarray(e->xattrs, e->n_xattrs + 1, sizeof(*p));
                if (!p)
                        return -ENOMEM;
                e->xattrs = p;
                struct catalog_xattr *x = &p[e->n_xattrs];
                *x = (struct catalog_xattr){ .name = strdup(name), .value = malloc((size_t)len + 1) };
                if (!x->name || !x->value) {
                        free(x->name);
                        free(x->value);
                        return -ENOMEM;
                }
                len = fgetxattr(fd, name, x->value, (size_t)len);
                if (len < 0) { /* removed meanwhile */
                        free(x->name);
                        free(x->value);
                        continue;
                }
                x->len = (size_t)len;
                e->n_xattrs++;
        }
        return 0;
}

int catalog_entry_from_fd(int fd, const char *rel, const struct stub *s, struct catalog_entry *ret) {
        struct catalog_entry e = { .op = CATALOG_PUT };
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0)
                return -errno;
        e.mode = st.st_mode & 07777;
        e.uid = st.st_uid;
        e.gid = st.st_gid;
        e.mtime_sec = st.st_mtim.tv_sec;
        e.mtime_nsec = (uint32_t)st.st_mtim.tv_nsec;
        if (S_ISDIR(st.st_mode))
                e.type = CATALOG_DIR;
        else if (S_ISLNK(st.st_mode)) {
                char target[CATALOG_PATH_MAX + 1];
                ssize_t n = readlinkat(fd, "", target, sizeof(target));
                if (n <= 0 || n > CATALOG_PATH_MAX)
                        return n < 0 ? -errno : -ENODATA;
                e.type = CATALOG_SYMLINK;
                e.target_len = (size_t)n;
                if (!(e.target = strndup(target, (size_t)n)))
                        return -ENOMEM;
        } else if (S_ISREG(st.st_mode) && s) {
                /* The archived version: its content is the object's. */
                e.type = CATALOG_FILE;
                e.size = s->size;
                memcpy(e.sha256, s->sha256, 32);
                e.has_manifest = s->has_manifest;
                memcpy(e.manifest, s->manifest, 32);
                e.chunk = s->chunk;
                e.mode = s->mode & 07777;
                e.uid = s->uid;
                e.gid = s->gid;
                e.mtime_sec = s->mtime.tv_sec;
                e.mtime_nsec = (uint32_t)s->mtime.tv_nsec;
        } else if (S_ISREG(st.st_mode) && st.st_size == 0)
                e.type = CATALOG_FILE; /* empty: nothing to archive, kept all the same */
        else
                return -ENODATA;
        e.path_len = strlen(rel);
        if (!catalog_path_valid(rel, e.path_len)) {
                catalog_entry_done(&e);
                return -ENODATA; /* a name longer than a catalog keeps */
        }
        if (!(e.path = strdup(rel))) {
                catalog_entry_done(&e);
                return -ENOMEM;
        }
        if (e.type != CATALOG_SYMLINK && (r = read_xattrs(fd, &e)) < 0) {
                catalog_entry_done(&e);
                return r;
        }
        *ret = e;
        return 0;
}

/* The entry of dir/name (st: its lstat), if the catalog keeps one. */
static int add_one(int dir, const char *name, const char *rel, const struct stat *stp, struct catalog_entries *l) {
        _cleanup_(stub_done) struct stub s = {};
        struct catalog_entry e = {};
        const struct stat st = *stp;
        const char *err = "";
        int fd, r;

        if (S_ISLNK(st.st_mode))
                fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        else if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
                fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        else
                return 0;
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISREG(st.st_mode) && (r = stub_read_fd(fd, &s, &err)) < 0 && r != -ENODATA) {
                log_warning("catalog: %s: corrupt stub, not in the snapshot: %s", rel, err);
                close(fd);
                return 0;
        }
        r = catalog_entry_from_fd(fd, rel, S_ISREG(st.st_mode) && s.key[0] ? &s : NULL, &e);
        close(fd);
        if (r == -ENODATA)
                return 0;
        if (r < 0)
                return r;
        return catalog_entries_add(l, &e);
}

static int walk(int dir_fd, dev_t dev, char *rel, size_t rel_len, unsigned depth, struct catalog_entries *l) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int r;

        if (depth > CATALOG_DEPTH_MAX) {
                close(dir_fd);
                return 0; /* deeper than a catalog keeps: catalog_file_durable refuses their release */
        }
        if (!(d = fdopendir(dir_fd))) {
                close(dir_fd);
                return -errno;
        }
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                size_t n = strlen(de->d_name);
                if (rel_len + 1 + n >= CATALOG_PATH_MAX)
                        continue;
                size_t sub_len = rel_len ? rel_len + 1 + n : n;
                if (rel_len)
                        rel[rel_len] = '/';
                memcpy(rel + (rel_len ? rel_len + 1 : 0), de->d_name, n + 1);
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        rel[rel_len] = 0;
                        continue; /* gone meanwhile */
                }
                bool is_dir = S_ISDIR(st.st_mode);
                /* Another filesystem or subvolume inside (a snapshot the
                 * tenant made): not this tree. */
                /* One entry that cannot be made (changed under us, leased...)
                 * does not stop the walk: counted, and the catalog knows it
                 * misses something. */
                if (st.st_dev == dev && (r = add_one(dirfd(d), de->d_name, rel, &st, l)) < 0) {
                        if (r == -ENOMEM || r == -E2BIG)
                                return r;
                        log_warning("catalog: %s: not recorded: %s", rel, strerror(-r));
                        l->failed++;
                }
                if (is_dir && st.st_dev == dev) {
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0 && (r = walk(sub, dev, rel, sub_len, depth + 1, l)) < 0)
                                return r;
                }
                rel[rel_len] = 0;
        }
        return 0;
}

static int open_dir_beneath(int root, const char *dir, bool make);

int catalog_walk(int subvol_fd, const char *start, struct catalog_entries *ret) {
        char rel[CATALOG_PATH_MAX + 1];
        struct stat root, st;
        int fd, r;

        if (fstat(subvol_fd, &root) < 0)
                return -errno;
        if (!*start) { /* the whole tree */
                rel[0] = 0;
                if ((fd = openat(subvol_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                        return -errno;
                return walk(fd, root.st_dev, rel, 0, 0, ret);
        }
        size_t len = strlen(start);
        if (len >= sizeof(rel) || !catalog_path_valid(start, len))
                return -ENODATA;
        memcpy(rel, start, len + 1);
        /* The entry itself, found from its directory without following a
         * symlink, then what is beneath it. */
        char *slash = strrchr(rel, '/');
        if (slash)
                *slash = 0;
        _cleanup_close_ int parent = open_dir_beneath(subvol_fd, slash ? rel : ".", false);
        if (slash)
                *slash = '/';
        if (parent < 0)
                return parent == -ENOENT || parent == -ELOOP || parent == -EXDEV ? 0 : parent; /* gone, or moved on */
        const char *name = slash ? slash + 1 : rel;
        if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (st.st_dev != root.st_dev)
                return 0;
        if ((r = add_one(parent, name, rel, &st, ret)) < 0 || !S_ISDIR(st.st_mode))
                return r;
        if ((fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                return errno == ENOENT ? 0 : -errno;
        return walk(fd, root.st_dev, rel, len, 1, ret);
}

/* ---- making a tree ---- */

static int compare_paths(const void *a, const void *b) {
        const struct catalog_entry *x = a, *y = b;
        int c = memcmp(x->path, y->path, MIN(x->path_len, y->path_len));
        return c ? c : (x->path_len > y->path_len) - (x->path_len < y->path_len);
}

/* dir beneath the subvolume (root), made if missing; never through a symlink. */
static int open_dir_beneath(int root, const char *dir, bool make) {
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV |
                                           RESOLVE_NO_MAGICLINKS };
        int fd = (int)syscall(SYS_openat2, root, dir, &how, sizeof(how));
        if (fd >= 0 || errno != ENOENT || !make)
                return fd < 0 ? -errno : fd;
        /* Missing parents (the catalog had no entry for them): made 0755. */
        _cleanup_free_ char *copy = strdup(dir);
        if (!copy)
                return -ENOMEM;
        char *slash = strrchr(copy, '/');
        int parent = -1;
        if (slash) {
                *slash = 0;
                parent = open_dir_beneath(root, copy, true);
                if (parent < 0)
                        return parent;
        }
        int r = mkdirat(slash ? parent : root, slash ? slash + 1 : copy, 0755);
        if (parent >= 0)
                close(parent);
        if (r < 0 && errno != EEXIST)
                return -errno;
        fd = (int)syscall(SYS_openat2, root, dir, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

static int set_xattrs(int fd, const struct catalog_entry *e) {
        for (size_t i = 0; i < e->n_xattrs; i++)
                if (fsetxattr(fd, e->xattrs[i].name, e->xattrs[i].value, e->xattrs[i].len, 0) < 0)
                        return -errno;
        return 0;
}

static int fill_in_file(const struct catalog_tree_maker *m, int fd, const struct catalog_entry *e) {
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = e->mtime_sec, .tv_nsec = e->mtime_nsec } };
        int r;

        if (fchown(fd, e->uid, e->gid) < 0)
                return -errno;
        if ((r = set_xattrs(fd, e)) < 0)
                return r;
        if (e->size == 0)
                return fchmod(fd, e->mode) < 0 || futimens(fd, ts) < 0 ? -errno : 0;
        /* A released stub, as a release leaves one: a hole of the file's
         * size, and the record that says where its content is. */
        struct stub s = { .state = STUB_RELEASED, .size = e->size, .mode = S_IFREG | e->mode, .uid = e->uid,
                          .gid = e->gid, .mtime = { .tv_sec = e->mtime_sec, .tv_nsec = e->mtime_nsec },
                          .chunk = e->chunk ? e->chunk : m->chunk, .has_manifest = e->has_manifest };
        snprintf(s.tenant, sizeof(s.tenant), "%s", m->tenant);
        stub_key_for_hash(e->sha256, s.key);
        memcpy(s.sha256, e->sha256, 32);
        memcpy(s.manifest, e->manifest, 32);
        if (ftruncate(fd, (off_t)e->size) < 0)
                return -errno;
        if ((r = stub_write_fd(fd, &s)) < 0 || (r = stub_put_back_attrs(fd, &s, false)) < 0)
                return r;
        return 0;
}

/* Made whole without a name, then linked in: never a hole without its stub
 * under a name (a reader would see zeros), even if tierd dies half way. */
static int make_file(const struct catalog_tree_maker *m, int parent, const char *name, const struct catalog_entry *e) {
        struct stat st;
        if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return -EEXIST;
        _cleanup_close_ int dir = openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        _cleanup_close_ int fd = openat(dir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        int r = fill_in_file(m, fd, e);
        if (r < 0)
                return r == -EEXIST ? -EIO : r; /* EEXIST counts as "there already" */
        /* linkat(AT_EMPTY_PATH) wants CAP_DAC_READ_SEARCH, which tierd has. */
        if (linkat(fd, "", dir, name, AT_EMPTY_PATH) < 0)
                return -errno; /* EEXIST: made meanwhile by someone else, left alone */
        return 0;
}

/* Root's and 0700 while its entries are made: no tenant process can
 * rename or swap anything in it under the import. finish_dir gives it
 * its owner, mode, xattrs and mtime at the end. */
static int make_dir(int parent, const char *name) {
        if (mkdirat(parent, name, 0700) < 0)
                return -errno; /* EEXIST: left as it is, its entries go in */
        return 0;
}

/* A directory as make_dir leaves it (root's, 0700): one an import cut
 * short made, which no tenant process could have. */
static bool half_made_dir(int parent, const char *name) {
        struct stat st;
        return fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
               (st.st_mode & 07777) == 0700;
}

static int make_symlink(int parent, const char *name, const struct catalog_entry *e) {
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = e->mtime_sec, .tv_nsec = e->mtime_nsec } };
        struct stat st;
        if (symlinkat(e->target, parent, name) < 0)
                return -errno;
        /* Owned through an fd of the link itself: in a directory that was
         * there before, a tenant could swap the name for another file. */
        _cleanup_close_ int fd = openat(parent, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISLNK(st.st_mode))
                return -EIO;
        if (fchownat(fd, "", e->uid, e->gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ||
            utimensat(parent, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        return 0;
}

static void finish_dir(const struct catalog_tree_maker *m, const struct catalog_entry *e) {
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = e->mtime_sec, .tv_nsec = e->mtime_nsec } };
        _cleanup_close_ int fd = open_dir_beneath(m->root_fd, e->path, false);
        if (fd < 0)
                return;
        /* O_PATH: through /proc would be a magic link; an fd of the dir itself. */
        _cleanup_close_ int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || fchown(dfd, e->uid, e->gid) < 0 || set_xattrs(dfd, e) < 0 || fchmod(dfd, e->mode) < 0 ||
            futimens(dfd, ts) < 0)
                log_error("tenant %s: import: cannot give %s its owner, mode, xattrs and mtime: %m", m->tenant,
                          e->path);
}

int catalog_make_tree(const struct catalog_tree_maker *m, struct catalog_entries *l, struct catalog_made *made) {
        _cleanup_free_ char *parent_path = NULL;
        _cleanup_free_ bool *made_dir = calloc(l->n + 1, sizeof(bool));
        bool stopped = false;
        int parent = -1;

        *made = (struct catalog_made){};
        if (!made_dir)
                return -ENOMEM;
#ifdef TIERD_TEST_HOOKS
        /* Test builds: a slow import, for a stop to come while it makes the tree. */
        const char *pause = getenv("TIERD_TEST_IMPORT_PAUSE_MS");
#endif
        qsort(l->e, l->n, sizeof(l->e[0]), compare_paths);
        for (size_t i = 0; i < l->n; i++) {
                const struct catalog_entry *e = &l->e[i];
                const char *slash = strrchr(e->path, '/');
                if (m->stop && atomic_load_explicit(m->stop, memory_order_relaxed)) {
                        stopped = true; /* the directories made so far are finished all the same */
                        break;
                }
#ifdef TIERD_TEST_HOOKS
                if (pause)
                        usleep((useconds_t)atoi(pause) * 1000);
#endif
                const char *dir = ".", *name = e->path;
                _cleanup_free_ char *dir_copy = NULL;
                int r;

                if (slash) {
                        dir = dir_copy = strndup(e->path, (size_t)(slash - e->path));
                        name = slash + 1;
                        if (!dir_copy)
                                return -ENOMEM;
                }
                /* Sorted: the entries of one directory come together. */
                if (!parent_path || strcmp(parent_path, dir) != 0) {
                        safe_close(parent);
                        free(parent_path);
                        parent_path = strdup(dir);
                        parent = parent_path ? open_dir_beneath(m->root_fd, dir, true) : -ENOMEM;
                }
                if (parent < 0)
                        r = parent;
                else if (e->type == CATALOG_DIR)
                        r = make_dir(parent, name);
                else if (e->type == CATALOG_SYMLINK)
                        r = make_symlink(parent, name, e);
                else
                        r = make_file(m, parent, name, e);
                if (r == -EEXIST) {
                        made->existing++;
                        made_dir[i] = e->type == CATALOG_DIR && m->finish_existing && half_made_dir(parent, name);
                }
                else if (r < 0) {
                        made->failed++;
                        log_error_errno(r, "tenant %s: import: cannot make %s: %m", m->tenant, e->path);
                } else if (e->type == CATALOG_DIR)
                        made->dirs++, made_dir[i] = true;
                else if (e->type == CATALOG_SYMLINK)
                        made->symlinks++;
                else
                        made->files++, made->bytes += e->size;
                if (parent < 0 && parent != -ENOMEM)
                        parent_path = mfree(parent_path); /* try again for the next entry */
        }
        safe_close(parent);
        /* Deepest first: setting a directory's mtime is its last change. */
        for (size_t i = l->n; i-- > 0;)
                if (made_dir[i])
                        finish_dir(m, &l->e[i]);
        return stopped ? -ECANCELED : 0;
}

/* ---- the tree a catalog makes ---- */

static int compare_latest(const void *a, const void *b, void *entries) {
        size_t x = *(const size_t *)a, y = *(const size_t *)b;
        const struct catalog_entry *ex = (const struct catalog_entry *)entries + x,
                                   *ey = (const struct catalog_entry *)entries + y;
        int c = memcmp(ex->path, ey->path, MIN(ex->path_len, ey->path_len));
        if (c == 0)
                c = (ex->path_len > ey->path_len) - (ex->path_len < ey->path_len);
        return c ? c : (x > y) - (x < y);
}

/* A directory deleted (or renamed away): the last time it was. */
struct dir_delete {
        const char *path;
        size_t path_len;
        size_t last; /* the index of its latest delete among all entries */
};

static int compare_dir_delete(const void *a, const void *b) {
        const struct dir_delete *x = a, *y = b;
        int c = memcmp(x->path, y->path, MIN(x->path_len, y->path_len));
        return c ? c : (x->path_len > y->path_len) - (x->path_len < y->path_len);
}

/* Gone with a directory deleted (or renamed) after it was recorded? Each
 * of its parents looked up: depth times log(deletes), not deletes. */
static bool under_later_dir_delete(const struct catalog_entry *e, size_t index, const struct dir_delete *dels,
                                   size_t n_dels) {
        for (size_t p = 1; n_dels && p < e->path_len; p++) {
                if (e->path[p] != '/')
                        continue;
                struct dir_delete key = { .path = e->path, .path_len = p };
                const struct dir_delete *d = bsearch(&key, dels, n_dels, sizeof(key), compare_dir_delete);
                if (d && d->last > index)
                        return true;
        }
        return false;
}

int catalog_reduce(struct catalog_entries *all, struct catalog_entries *ret) {
        size_t n = all->n, n_dels = 0;
        _cleanup_free_ size_t *order = calloc(n + 1, sizeof(size_t));
        _cleanup_free_ struct dir_delete *dels = calloc(n + 1, sizeof(struct dir_delete));

        if (!order || !dels)
                return -ENOMEM;
        /* At most n entries: sized once, not doubled past what it needs. */
        if (!ret->e && n > 0) {
                if (!(ret->e = reallocarray(NULL, n, sizeof(*ret->e))))
                        return -ENOMEM;
                ret->allocated = n;
        }
        for (size_t i = 0; i < n; i++)
                order[i] = i;
        qsort_r(order, n, sizeof(size_t), compare_latest, all->e);
        /* In path order, each path's entries in the order written: a path's
         * last directory delete is its group's last. */
        for (size_t i = 0; i < n; i++) {
                const struct catalog_entry *e = &all->e[order[i]];
                if (e->op != CATALOG_DEL || e->type != CATALOG_DIR)
                        continue;
                struct dir_delete d = { .path = e->path, .path_len = e->path_len, .last = order[i] };
                if (n_dels && compare_dir_delete(&dels[n_dels - 1], &d) == 0)
                        dels[n_dels - 1].last = d.last;
                else
                        dels[n_dels++] = d;
        }
        for (size_t i = 0; i < n; i++) {
                struct catalog_entry *e = &all->e[order[i]];
                if (i + 1 < n) {
                        const struct catalog_entry *next = &all->e[order[i + 1]];
                        if (next->path_len == e->path_len && memcmp(next->path, e->path, e->path_len) == 0)
                                continue; /* a later entry of the same path */
                }
                if (e->op == CATALOG_PUT && !under_later_dir_delete(e, order[i], dels, n_dels) &&
                    catalog_entries_add(ret, e) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Files made without setuid and setgid: the catalog came from the store,
 * and a file that runs as its owner is not made from there unless the
 * operator asks (CATALOG_IMPORT_KEEP_SETUID). File capabilities never are:
 * a catalog holds no security.* attribute. */
uint64_t catalog_drop_setuid(const char *tenant, struct catalog_entries *tree) {
        uint64_t n = 0;
        for (size_t i = 0; i < tree->n; i++) {
                struct catalog_entry *e = &tree->e[i];
                if (e->type != CATALOG_FILE || !(e->mode & (S_ISUID | S_ISGID)))
                        continue;
                log_info("tenant %s: import: %.*s made without its setuid/setgid bits (mode %04o, not %04o)",
                         tenant, (int)MIN(e->path_len, 256), e->path, e->mode & ~(S_ISUID | S_ISGID) & 07777,
                         e->mode & 07777);
                e->mode &= ~(S_ISUID | S_ISGID);
                n++;
        }
        return n;
}

/* Between the lease and the tree made, a mark in the state directory: a
 * tierd that dies there imports again when it starts, before its writer
 * would take the half-made tree for the truth. */
