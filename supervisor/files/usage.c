/* SPDX-License-Identifier: MIT */
#include "usage.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "handle.h"
#include "fsgroup.h"
#include "log.h"
#include "macro.h"
#include "namer.h"
#include "quota.h"
#include "stub.h"

#define LASTUSE_MAGIC "TIERDLU1"
#define SAVE_EVERY_USEC (5 * 60 * 1000 * 1000ull)
#define KEY_MAX 24 /* ext4 8, xfs <= 16, btrfs 20 bytes: larger handles are not tracked */
#define WALK_MAX_DEPTH 256
#define SCAN_BATCH 2000 /* directory entries per event loop turn */

struct usage_key {
        uint8_t type, len;
        uint8_t bytes[KEY_MAX];
};

struct scan_dir {
        DIR *d;
        size_t path_len;
};

struct usage {
        struct engine_file *files;
        struct usage_key *keys; /* parallel to files */
        size_t n, cap, gone;
        uint32_t *index; /* open addressing: slot + 1, 0 empty; a deleted file stays, GONE, until compaction */
        size_t index_cap;
        uint64_t used;
        /* The scan: a few thousand files per event loop turn, so readers'
         * events are served meanwhile. */
        bool scanning;
        dev_t root_dev; /* a nested subvolume or snapshot is not the tenant's */
        struct scan_dir stack[WALK_MAX_DEPTH + 1];
        size_t depth;
        char path[PATH_MAX];
        struct timespec scan_start;
        sd_event_source *scan_src;
};

bool usage_tracked(const struct tenant *tn) {
        return tn->usage && !tn->usage->scanning;
}

static bool key_of(const struct file_handle *fh, struct usage_key *k) {
        if (fh->handle_bytes > KEY_MAX || fh->handle_type < 0 || fh->handle_type > 255)
                return false;
        *k = (struct usage_key){ .type = (uint8_t)fh->handle_type, .len = (uint8_t)fh->handle_bytes };
        memcpy(k->bytes, fh->f_handle, fh->handle_bytes);
        return true;
}

static uint64_t key_hash(const struct usage_key *k) {
        uint64_t h = 0xcbf29ce484222325ull ^ k->type;
        for (unsigned i = 0; i < k->len; i++)
                h = (h ^ k->bytes[i]) * 0x100000001b3ull;
        return h;
}

static bool key_equal(const struct usage_key *a, const struct usage_key *b) {
        return a->type == b->type && a->len == b->len && memcmp(a->bytes, b->bytes, a->len) == 0;
}

static size_t find(const struct usage *u, const struct usage_key *k) {
        if (!u->index_cap)
                return SIZE_MAX;
        for (size_t i = key_hash(k) & (u->index_cap - 1);; i = (i + 1) & (u->index_cap - 1)) {
                uint32_t v = u->index[i];
                if (v == 0)
                        return SIZE_MAX;
                if (key_equal(&u->keys[v - 1], k))
                        return v - 1;
        }
}

static void index_put(struct usage *u, size_t slot) {
        size_t i = key_hash(&u->keys[slot]) & (u->index_cap - 1);
        while (u->index[i])
                i = (i + 1) & (u->index_cap - 1);
        u->index[i] = (uint32_t)slot + 1;
}

/* Grows by half: bounded memory for a big tenant. */
static int grow(struct usage *u) {
        size_t cap = u->cap ? u->cap + u->cap / 2 : 1024;
        struct engine_file *files = realloc(u->files, cap * sizeof(*files));
        if (!files)
                return -ENOMEM;
        u->files = files;
        struct usage_key *keys = realloc(u->keys, cap * sizeof(*keys));
        if (!keys)
                return -ENOMEM;
        u->keys = keys;
        u->cap = cap;
        if (u->index_cap * 3 / 4 < cap) { /* at most three quarters full */
                size_t icap = 1;
                while (icap * 3 / 4 < cap)
                        icap <<= 1;
                uint32_t *index = calloc(icap, sizeof(*index));
                if (!index)
                        return -ENOMEM;
                free(u->index);
                u->index = index;
                u->index_cap = icap;
                for (size_t s = 0; s < u->n; s++)
                        index_put(u, s);
        }
        return 0;
}

/* The stub's state; an archived file whose size or mtime moved is dirty
 * already (the notification group may not have marked it yet). */
static enum engine_state state_of(int stub_r, const struct stub *s, const struct stat *st) {
        if (stub_r < 0)
                return ENGINE_LOCAL; /* no stub, or one we cannot read: never released */
        switch (s->state) {
        case STUB_ARCHIVED:
                if ((uint64_t)st->st_size != s->size || st->st_mtim.tv_sec != s->mtime.tv_sec ||
                    st->st_mtim.tv_nsec != s->mtime.tv_nsec)
                        return ENGINE_DIRTY;
                return ENGINE_ARCHIVED;
        case STUB_PARTIAL: return ENGINE_PARTIAL;
        case STUB_RELEASED: return ENGINE_RELEASED;
        default: return ENGINE_DIRTY;
        }
}

/* Pinned by its mark, or by one of the tenant's globs (rel: beneath the subvolume). */
static bool pinned(const struct tenant *tn, int fd, const char *rel) {
        if (stub_pinned_fd(fd) > 0)
                return true;
        for (char **g = tn->cfg->pin; rel && g && *g; g++)
                if (fnmatch(*g, rel, FNM_PATHNAME | FNM_PERIOD) == 0 || fnmatch(*g, rel, 0) == 0)
                        return true;
        return false;
}

static void entry_set(struct usage *u, size_t slot, const struct stat *st, enum engine_state state, bool pin) {
        struct engine_file *f = &u->files[slot];
        uint64_t local = (uint64_t)st->st_blocks * 512;
        if (!(f->flags & ENGINE_GONE))
                u->used -= f->local;
        else
                u->gone--;
        uint32_t last_use = f->last_use;
        uint8_t keep = f->flags & ENGINE_ARCHIVING; /* BUSY goes: a changed file is worth another try */
        *f = (struct engine_file){ .size = (uint64_t)st->st_size, .local = local, .state = (uint8_t)state,
                                   .mtime = (uint32_t)st->st_mtim.tv_sec,
                                   .last_use = last_use ? last_use : (uint32_t)st->st_mtim.tv_sec,
                                   .flags = (uint8_t)(keep | (pin ? ENGINE_PINNED : 0)) };
        u->used += local;
}

/* Adds or refreshes the file open as fd; rel when known (the scan). */
static void upsert(struct tenant *tn, int fd, const char *rel) {
        struct usage *u = tn->usage;
        union file_handle_buf h = { .fh.handle_bytes = MAX_HANDLE_SZ };
        _cleanup_(stub_done) struct stub s = {};
        _cleanup_free_ char *own_rel = NULL;
        const char *err = "";
        struct usage_key k;
        struct stat st;
        int mount_id;

        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            name_to_handle_at(fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0 || !key_of(&h.fh, &k))
                return;
        /* No name now (its dentry was dropped: namer.h): pinned as it was. */
        int named = !rel && tn->cfg->pin[0] ? usage_name_of_fd(tn, fd, &own_rel) : 0;
        bool unnamed = usage_name_unknown(named);
        rel = rel ?: own_rel;
        int r = stub_read_fd(fd, &s, &err);
        size_t slot = find(u, &k);
        if (slot == SIZE_MAX) {
                if (u->n == u->cap && grow(u) < 0) {
                        log_error("tenant %s: out of memory for the file table", tn->cfg->name);
                        return;
                }
                slot = u->n++;
                u->keys[slot] = k;
                u->files[slot] = (struct engine_file){ .flags = ENGINE_GONE };
                u->gone++;
                index_put(u, slot);
        }
        bool pin = pinned(tn, fd, rel) || (unnamed && (u->files[slot].flags & ENGINE_PINNED));
        entry_set(u, slot, &st, state_of(r, &s, &st), pin);
}

static char *lastuse_path(const struct tenant *tn) {
        char *p = NULL;
        return asprintf(&p, "%s/%s.lastuse", tn->t->state_dir, tn->cfg->name) < 0 ? NULL : p;
}

/* Records of (handle type, handle length, handle, last use): the file is
 * rewritten whole, atomically; a torn or foreign one is ignored. */
int usage_save(struct tenant *tn) {
        _cleanup_free_ char *path = lastuse_path(tn), *tmp = NULL;
        struct usage *u = tn->usage;
        FILE *f;
        int fd;

        if (!u || !path || asprintf(&tmp, "%s.XXXXXX", path) < 0)
                return u ? -ENOMEM : 0;
        if (mkdir(tn->t->state_dir, 0700) < 0 && errno != EEXIST)
                return log_error_errno(errno, "cannot create %s: %m", tn->t->state_dir);
        if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0 || !(f = fdopen(fd, "w"))) {
                if (fd >= 0)
                        close(fd);
                return log_error_errno(errno, "tenant %s: cannot save last uses in %s: %m", tn->cfg->name,
                                       tn->t->state_dir);
        }
        fwrite(LASTUSE_MAGIC, 1, 8, f);
        for (size_t i = 0; i < u->n; i++) {
                if (u->files[i].flags & ENGINE_GONE)
                        continue;
                fwrite(&u->keys[i].type, 1, 2 + u->keys[i].len, f); /* type, len, handle */
                fwrite(&u->files[i].last_use, sizeof(uint32_t), 1, f);
        }
        if (fflush(f) != 0 || fsync(fileno(f)) < 0 || ferror(f)) {
                fclose(f);
                unlink(tmp);
                return log_error_errno(errno ?: EIO, "tenant %s: cannot save last uses: %m", tn->cfg->name);
        }
        fclose(f);
        if (rename(tmp, path) < 0) {
                unlink(tmp);
                return log_error_errno(errno, "tenant %s: cannot save last uses: %m", tn->cfg->name);
        }
        return 0;
}

static void lastuse_load(struct tenant *tn) {
        _cleanup_free_ char *path = lastuse_path(tn);
        struct usage *u = tn->usage;
        char magic[8];
        size_t restored = 0;
        FILE *f;

        if (!path || !(f = fopen(path, "re")))
                return;
        if (fread(magic, 1, 8, f) == 8 && memcmp(magic, LASTUSE_MAGIC, 8) == 0) {
                struct usage_key k = {};
                uint8_t type_len[2];
                uint32_t last_use;
                while (fread(type_len, 1, 2, f) == 2 && (k.type = type_len[0], k.len = type_len[1]) <= KEY_MAX &&
                       fread(k.bytes, 1, k.len, f) == k.len && fread(&last_use, sizeof(last_use), 1, f) == 1) {
                        size_t slot = find(u, &k);
                        if (slot != SIZE_MAX && !(u->files[slot].flags & ENGINE_GONE)) {
                                u->files[slot].last_use = last_use;
                                restored++;
                        }
                }
        }
        fclose(f);
        log_info("tenant %s: last uses of %zu files restored from %s", tn->cfg->name, restored, path);
}

static int on_save(sd_event_source *s, uint64_t usec, void *userdata) {
        (void)usec;
        usage_save(userdata);
        sd_event_source_set_time_relative(s, SAVE_EVERY_USEC);
        return 0;
}

static void scan_push(struct usage *u, int dir_fd, size_t path_len) {
        DIR *d = fdopendir(dir_fd);
        if (!d) {
                close(dir_fd);
                return;
        }
        u->stack[u->depth++] = (struct scan_dir){ .d = d, .path_len = path_len };
}

/* Up to budget directory entries; true when the whole subvolume is done. */
static bool scan_step(struct tenant *tn, unsigned budget) {
        struct usage *u = tn->usage;

        while (budget-- > 0 && u->depth > 0) {
                struct scan_dir *top = &u->stack[u->depth - 1];
                struct dirent *de = readdir(top->d);
                struct stat st;
                if (!de) {
                        closedir(top->d);
                        u->depth--;
                        continue;
                }
                size_t n = strlen(de->d_name), len = top->path_len;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 || len + n + 2 >= PATH_MAX)
                        continue;
                /* path: the name beneath the subvolume, for the pin globs */
                snprintf(u->path + len, PATH_MAX - len, "%s%s", len ? "/" : "", de->d_name);
                size_t sub_len = len + n + (len ? 1 : 0);
                unsigned type = de->d_type;
                if (type == DT_UNKNOWN && fstatat(dirfd(top->d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
                if (type == DT_DIR && u->depth <= WALK_MAX_DEPTH) {
                        int sub = openat(dirfd(top->d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0 && fstat(sub, &st) == 0 && st.st_dev == u->root_dev)
                                scan_push(u, sub, sub_len); /* top may move: not used below */
                        else if (sub >= 0)
                                close(sub);
                } else if (type == DT_REG) {
                        _cleanup_close_ int fd = openat(dirfd(top->d), de->d_name,
                                                        O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOATIME);
                        if (fd < 0)
                                fd = openat(dirfd(top->d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                        if (fd >= 0)
                                upsert(tn, fd, u->path);
                }
        }
        return u->depth == 0;
}

static int on_scan(sd_event_source *s, void *userdata) {
        struct tenant *tn = userdata;
        struct usage *u = tn->usage;
        struct timespec b;

        if (!scan_step(tn, SCAN_BATCH))
                return 0; /* more next turn */
        sd_event_source_set_enabled(s, SD_EVENT_OFF);
        u->scanning = false;
        clock_gettime(CLOCK_MONOTONIC, &b);
        log_info("tenant %s: %zu files scanned in %.2f s, %llu bytes local (quota %llu)", tn->cfg->name, u->n - u->gone,
                 (double)(b.tv_sec - u->scan_start.tv_sec) + (double)(b.tv_nsec - u->scan_start.tv_nsec) / 1e9,
                 (unsigned long long)u->used, (unsigned long long)tn->cfg->quota);
        lastuse_load(tn);
        if (!tn->usage_save_src &&
            sd_event_add_time_relative(tn->t->event, &tn->usage_save_src, CLOCK_MONOTONIC, SAVE_EVERY_USEC, 0, on_save,
                                       tn) >= 0)
                sd_event_source_set_enabled(tn->usage_save_src, SD_EVENT_ON);
        quota_check_high(tn);
        return 0;
}

/* Until the scan is done the tenant is not tracked: fills are admitted,
 * nothing is released or archived by the engine. */
int usage_scan(struct tenant *tn) {
        struct stat st;
        int r, fd;

        usage_free(tn);
        if (!tn->cfg->quota && !tn->cfg->archive_after_usec)
                return 0;
        if (!(tn->usage = calloc(1, sizeof(*tn->usage))))
                return -ENOMEM;
        struct usage *u = tn->usage;
        u->scanning = true;
        clock_gettime(CLOCK_MONOTONIC, &u->scan_start);
        fd = openat(tn->subvol_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                r = -errno;
                if (fd >= 0)
                        close(fd);
                usage_free(tn);
                return log_error_errno(r, "tenant %s: cannot scan: %m", tn->cfg->name);
        }
        u->root_dev = st.st_dev;
        scan_push(u, fd, 0);
        r = sd_event_add_defer(tn->t->event, &u->scan_src, on_scan, tn);
        if (r >= 0)
                r = sd_event_source_set_enabled(u->scan_src, SD_EVENT_ON);
        if (r < 0) {
                usage_free(tn);
                return log_error_errno(r, "tenant %s: cannot scan: %m", tn->cfg->name);
        }
        return 0;
}

void usage_free(struct tenant *tn) {
        tn->usage_save_src = sd_event_source_unref(tn->usage_save_src);
        if (!tn->usage)
                return;
        sd_event_source_unref(tn->usage->scan_src);
        while (tn->usage->depth > 0)
                closedir(tn->usage->stack[--tn->usage->depth].d);
        free(tn->usage->files);
        free(tn->usage->keys);
        free(tn->usage->index);
        free(tn->usage);
        tn->usage = NULL;
}

void usage_update_fd(struct tenant *tn, int fd) {
        if (tn->usage)
                upsert(tn, fd, NULL);
}

uint64_t usage_used(const struct tenant *tn) {
        return tn->usage ? tn->usage->used : 0;
}

const struct engine_file *usage_files(const struct tenant *tn, size_t *n) {
        *n = tn->usage ? tn->usage->n : 0;
        return tn->usage ? tn->usage->files : NULL;
}

size_t usage_index_of_fd(const struct tenant *tn, int fd) {
        union file_handle_buf h = { .fh.handle_bytes = MAX_HANDLE_SZ };
        struct usage_key k;
        int mount_id;
        if (!tn->usage || name_to_handle_at(fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0 || !key_of(&h.fh, &k))
                return SIZE_MAX;
        return find(tn->usage, &k);
}

int usage_open_index(const struct tenant *tn, size_t index, int flags) {
        union file_handle_buf h;
        if (!tn->usage || index >= tn->usage->n)
                return -ENOENT;
        const struct usage_key *k = &tn->usage->keys[index];
        h.fh.handle_type = k->type;
        h.fh.handle_bytes = k->len;
        memcpy(h.fh.f_handle, k->bytes, k->len);
        if (flags == O_PATH) {
                int fd = open_by_handle_at(tn->fs->root_fd, &h.fh, O_PATH | O_CLOEXEC | O_NOFOLLOW);
                return fd < 0 ? -errno : fd;
        }
        return fsgroup_open_regular(tn->fs, &h.fh, flags);
}

void usage_flag_index(struct tenant *tn, size_t index, uint8_t flag) {
        if (tn->usage && index < tn->usage->n)
                tn->usage->files[index].flags |= flag;
}

void usage_unflag_index(struct tenant *tn, size_t index, uint8_t flag) {
        if (tn->usage && index < tn->usage->n)
                tn->usage->files[index].flags &= (uint8_t)~flag;
}

void usage_clear_flag(struct tenant *tn, uint8_t flag) {
        for (size_t i = 0; tn->usage && i < tn->usage->n; i++)
                tn->usage->files[i].flags &= (uint8_t)~flag;
}

/* A file in more than one tenant's table (hard links across directory
 * tenants): every table hears of it. */
#define EACH_HOLDER(fs, k, tn, slot) \
        for (size_t _i = 0; _i < (fs)->t->n_tenants; _i++) \
                if (((tn) = &(fs)->t->tenants[_i])->fs == (fs) && (tn)->usage && \
                    ((slot) = find((tn)->usage, (k))) != SIZE_MAX)

static void forget_slot(struct usage *u, size_t slot) {
        struct engine_file *f = &u->files[slot];
        if (f->flags & ENGINE_GONE)
                return;
        u->used -= f->local;
        f->local = 0;
        f->flags |= ENGINE_GONE;
        u->gone++;
}

void usage_opened(struct tiered_fs *fs, const struct file_handle *fh) {
        struct usage_key k;
        struct tenant *tn;
        size_t slot;
        if (!key_of(fh, &k))
                return;
        EACH_HOLDER(fs, &k, tn, slot)
                tn->usage->files[slot].last_use = (uint32_t)time(NULL);
}

/* A file written or moved: refreshed where it still is beneath the
 * subvolume, forgotten where it left, added where it arrived. */
void usage_written(struct tiered_fs *fs, const struct file_handle *fh) {
        struct usage_key k;
        struct tenant *tn;
        size_t slot;

        if (!key_of(fh, &k))
                return;
        _cleanup_close_ int fd = fsgroup_open_regular(fs, fh, O_RDONLY);
        if (fd < 0)
                return; /* gone already (FAN_DELETE_SELF says so), or no regular file */
        for (size_t i = 0; i < fs->t->n_tenants; i++) {
                tn = &fs->t->tenants[i];
                if (tn->fs != fs || !tn->usage)
                        continue;
                _cleanup_free_ char *rel = NULL;
                int r = usage_name_of_fd(tn, fd, &rel);
                /* No name now (its dentry was dropped: namer.h): where it
                 * was, or in the tenant's subvolume if it is all the tenant's. */
                bool here = r == 0 || (usage_name_unknown(r) && (find(tn->usage, &k) != SIZE_MAX || usage_fd_in_own_subvolume(tn, fd)));
                if (here)
                        upsert(tn, fd, rel);
                slot = find(tn->usage, &k);
                if (here && slot != SIZE_MAX)
                        tn->usage->files[slot].last_use = (uint32_t)time(NULL);
                else if (slot != SIZE_MAX)
                        forget_slot(tn->usage, slot);
        }
}

void usage_deleted(struct tiered_fs *fs, const struct file_handle *fh) {
        struct usage_key k;
        struct tenant *tn;
        size_t slot;
        if (!key_of(fh, &k))
                return;
        EACH_HOLDER(fs, &k, tn, slot) {
                forget_slot(tn->usage, slot);
                usage_compact(tn);
        }
}

bool usage_pinned_fd(const struct tenant *tn, int fd) {
        _cleanup_free_ char *rel = tn->cfg->pin[0] ? usage_rel_of_fd(tn, fd) : NULL;
        return pinned(tn, fd, rel);
}

/* Deleted files' slots go once they are half the table: indices change, so
 * not while a background archive holds one. */
void usage_compact(struct tenant *tn) {
        struct usage *u = tn->usage;
        size_t w = 0;

        if (!u || u->scanning || u->n < 4096 || u->gone * 2 < u->n || tn->auto_in_flight > 0)
                return;
        for (size_t r = 0; r < u->n; r++)
                if (!(u->files[r].flags & ENGINE_GONE)) {
                        u->files[w] = u->files[r];
                        u->keys[w++] = u->keys[r];
                }
        u->n = w;
        u->gone = 0;
        memset(u->index, 0, u->index_cap * sizeof(*u->index));
        for (size_t slot = 0; slot < u->n; slot++)
                index_put(u, slot);
}
