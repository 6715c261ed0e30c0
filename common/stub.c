/* SPDX-License-Identifier: MIT */
#include "stub.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "hex.h"
#include "objkey.h"

static const char *const state_names[_STUB_STATE_MAX] = {
        [STUB_ARCHIVED] = "archived",
        [STUB_PARTIAL] = "partial",
        [STUB_RELEASED] = "released",
        [STUB_DIRTY] = "dirty",
};

const char *stub_state_to_string(enum stub_state s) {
        return s < _STUB_STATE_MAX ? state_names[s] : "invalid";
}

void stub_done(struct stub *s) { range_set_done(&s->populated); }

bool stub_is_whole(const struct stub *s) {
        switch (s->state) {
        case STUB_ARCHIVED:
        case STUB_DIRTY:
                return true;
        case STUB_PARTIAL:
                return range_set_covers(&s->populated, 0, s->size);
        default:
                return s->size == 0;
        }
}

uint64_t stub_resident_bytes(const struct stub *s) {
        switch (s->state) {
        case STUB_ARCHIVED:
        case STUB_DIRTY:
                return s->size;
        case STUB_PARTIAL:
                return range_set_total(&s->populated);
        default:
                return 0;
        }
}

void stub_key_for_hash(const uint8_t sha256[32], char key[STUB_KEY_MAX]) {
        struct proto_object o = { .kind = PROTO_OBJECT_DATA };
        memcpy(o.hash, sha256, 32);
        object_key_format(&o, key);
}

void stub_manifest_key(const uint8_t root[32], char key[STUB_KEY_MAX]) {
        struct proto_object o = { .kind = PROTO_OBJECT_MANIFEST };
        memcpy(o.hash, root, 32);
        object_key_format(&o, key);
}

/* Unsigned decimal, no sign, no leading garbage, no overflow. */
static int parse_u64(const char *v, uint64_t *ret, int base) {
        uint64_t x = 0;
        if (!*v)
                return -EINVAL;
        for (const char *p = v; *p; p++) {
                int d;
                if (*p >= '0' && *p <= '9')
                        d = *p - '0';
                else
                        return -EINVAL;
                if (d >= base || x > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
                        return -EINVAL;
                x = x * (uint64_t)base + (uint64_t)d;
        }
        *ret = x;
        return 0;
}

static int parse_name(const char *v, char *out, size_t size) {
        size_t n = strlen(v);
        if (n == 0 || n >= size)
                return -EINVAL;
        for (const char *p = v; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr("-_.", *p))
                        return -EINVAL;
        memcpy(out, v, n + 1);
        return 0;
}

static int parse_key(const char *v, char *out) {
        uint8_t h[32];
        if (strncmp(v, "sha256/", 7) != 0 || hex_decode(v + 7, h, 32) < 0)
                return -EINVAL;
        memcpy(out, v, strlen(v) + 1);
        return 0;
}

static int parse_mtime(const char *v, struct timespec *ts) {
        char sec[32];
        const char *dot = strchr(v, '.');
        uint64_t s, ns;
        if (!dot || (size_t)(dot - v) >= sizeof(sec) || strlen(dot + 1) != 9)
                return -EINVAL;
        memcpy(sec, v, (size_t)(dot - v));
        sec[dot - v] = 0;
        if (parse_u64(sec, &s, 10) < 0 || parse_u64(dot + 1, &ns, 10) < 0 || s > INT64_MAX)
                return -EINVAL;
        ts->tv_sec = (time_t)s;
        ts->tv_nsec = (long)ns;
        return 0;
}

static int parse_ranges(const char *v, uint64_t size, struct range_set *out) {
        uint64_t last_end = 0;
        size_t count = 0;
        char buf[STUB_TEXT_MAX];

        if (strlen(v) >= sizeof(buf))
                return -EINVAL;
        strcpy(buf, v);
        if (!*buf)
                return 0;
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                char *plus = strchr(tok, '+');
                uint64_t off, len;
                if (!plus)
                        return -EINVAL;
                *plus = 0;
                if (parse_u64(tok, &off, 10) < 0 || parse_u64(plus + 1, &len, 10) < 0)
                        return -EINVAL;
                /* Sorted, disjoint, non-empty and inside the file. */
                if (len == 0 || off < last_end || (count > 0 && off == last_end) || off > size || len > size - off)
                        return -EINVAL;
                if (++count > STUB_MAX_RANGES)
                        return -EINVAL;
                if (range_set_add(out, off, off + len) < 0)
                        return -ENOMEM;
                last_end = off + len;
        }
        return 0;
}

enum {
        F_V, F_TENANT, F_STATE, F_KEY, F_SIZE, F_SHA, F_MODE, F_UID, F_GID, F_MTIME, F_CHUNK, F_FCAPS, F_RANGES,
        F_MANIFEST, /* optional: the fields before it are required */
        F_CTIME_MAX,
        F_CHECKED,
        F_COUNT
};
static const char *const field_names[F_COUNT] = {
        "v", "tenant", "state", "key", "size", "sha256", "mode", "uid", "gid", "mtime", "chunk", "fcaps", "ranges",
        "manifest", "ctime_max", "checked",
};

/* The record's lines (buf, NUL-terminated, ending in a newline) into
 * values by key, each line cut at its '='. */
static int split_fields(char *buf, const char *values[F_COUNT], const char **error) {
        uint64_t u;

        for (char *line = buf; *line;) {
                char *nl = strchr(line, '\n'), *eq;
                size_t i;
                *nl = 0;
                for (char *p = line; *p; p++)
                        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) {
                                *error = "non-printable byte in stub record";
                                return -EINVAL;
                        }
                eq = strchr(line, '=');
                if (!eq) {
                        *error = "stub line without '='";
                        return -EINVAL;
                }
                *eq = 0;
                for (i = 0; i < F_COUNT && strcmp(line, field_names[i]) != 0; i++)
                        ;
                if (i == F_COUNT) {
                        *error = "unknown key in stub record";
                        return -EINVAL;
                }
                if (values[i]) {
                        *error = "duplicate key in stub record";
                        return -EINVAL;
                }
                if (i == F_V && line != buf) {
                        *error = "stub version must be the first line";
                        return -EINVAL;
                }
                values[i] = eq + 1;
                line = nl + 1;
        }
        if (!values[F_V]) {
                *error = "stub record has no version";
                return -EINVAL;
        }
        if (parse_u64(values[F_V], &u, 10) < 0 || u != STUB_VERSION) {
                *error = "unsupported stub version";
                return -EINVAL;
        }
        for (size_t i = 0; i < F_MANIFEST; i++)
                if (!values[i]) {
                        *error = "stub record misses a required key";
                        return -EINVAL;
                }
        return 0;
}

/* Each value checked and decoded into s (which the caller frees on an
 * error: it may hold ranges already). */
static int decode_fields(const char *const values[F_COUNT], struct stub *s, const char **error) {
        uint64_t u;

#define CHECK(cond, msg) do { if (!(cond)) { *error = msg; return -EINVAL; } } while (0)
        CHECK(parse_name(values[F_TENANT], s->tenant, sizeof(s->tenant)) == 0, "bad tenant in stub");
        for (s->state = 0; s->state < _STUB_STATE_MAX && strcmp(values[F_STATE], state_names[s->state]) != 0; s->state++)
                ;
        CHECK(s->state < _STUB_STATE_MAX, "bad state in stub");
        CHECK(parse_key(values[F_KEY], s->key) == 0, "bad object key in stub");
        CHECK(parse_u64(values[F_SIZE], &s->size, 10) == 0 && s->size <= INT64_MAX, "bad size in stub");
        CHECK(hex_decode(values[F_SHA], s->sha256, 32) == 0, "bad sha256 in stub");
        CHECK(parse_u64(values[F_MODE], &u, 8) == 0 && S_ISREG(u) && u <= 0177777, "bad mode in stub");
        s->mode = (mode_t)u;
        CHECK(parse_u64(values[F_UID], &u, 10) == 0 && u < UINT32_MAX, "bad uid in stub");
        s->uid = (uid_t)u;
        CHECK(parse_u64(values[F_GID], &u, 10) == 0 && u < UINT32_MAX, "bad gid in stub");
        s->gid = (gid_t)u;
        CHECK(parse_mtime(values[F_MTIME], &s->mtime) == 0, "bad mtime in stub");
        CHECK(parse_u64(values[F_CHUNK], &s->chunk, 10) == 0 && s->chunk >= 4096 && s->chunk <= (1u << 30) &&
              (s->chunk & (s->chunk - 1)) == 0, "bad chunk in stub (a power of two from 4K to 1G)");
        if (*values[F_FCAPS]) {
                size_t n = strlen(values[F_FCAPS]) / 2;
                CHECK(n <= STUB_FCAPS_MAX && hex_decode(values[F_FCAPS], s->fcaps, n) == 0, "bad fcaps in stub");
                s->fcaps_len = n;
        }
        CHECK(parse_ranges(values[F_RANGES], s->size, &s->populated) == 0, "bad ranges in stub");
        CHECK(s->state == STUB_PARTIAL || s->populated.n == 0, "ranges in a stub that is not partial");
        CHECK(s->state != STUB_PARTIAL || s->populated.n > 0, "a partial stub without ranges");
        if (values[F_MANIFEST]) {
                CHECK(strlen(values[F_MANIFEST]) == 64 && hex_decode(values[F_MANIFEST], s->manifest, 32) == 0,
                      "bad manifest in stub");
                s->has_manifest = true;
        }
        if (values[F_CTIME_MAX])
                CHECK(parse_mtime(values[F_CTIME_MAX], &s->ctime_max) == 0 && s->state == STUB_ARCHIVED &&
                      s->ctime_max.tv_sec > 0, "bad ctime_max in stub");
        if (values[F_CHECKED]) {
                CHECK(strcmp(values[F_CHECKED], "1") == 0 && s->state == STUB_PARTIAL, "bad checked in stub");
                s->checked = true;
        }
#undef CHECK
        return 0;
}

int stub_parse(const char *text, size_t len, struct stub *ret, const char **error) {
        const char *values[F_COUNT] = {};
        char buf[STUB_TEXT_MAX + 1];
        struct stub s = {};
        const char *dummy;
        int r;

        if (!error)
                error = &dummy;
        *ret = (struct stub){};
        if (len == 0 || len > STUB_TEXT_MAX) {
                *error = len == 0 ? "empty stub record" : "stub record too long";
                return -EINVAL;
        }
        memcpy(buf, text, len);
        buf[len] = 0;
        if (strlen(buf) != len) {
                *error = "NUL byte in stub record";
                return -EINVAL;
        }
        if (buf[len - 1] != '\n') {
                *error = "stub record is truncated (no final newline)";
                return -EINVAL;
        }
        r = split_fields(buf, values, error);
        if (r < 0)
                return r;
        r = decode_fields(values, &s, error);
        if (r < 0) {
                stub_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}

int stub_format(const struct stub *s, char *buf, size_t size) {
        char sha[65], fcaps[2 * STUB_FCAPS_MAX + 1];
        size_t n;
        int k;

        if (s->populated.n > STUB_MAX_RANGES)
                return -E2BIG;
        hex_encode(s->sha256, 32, sha);
        hex_encode(s->fcaps, s->fcaps_len, fcaps);
        k = snprintf(buf, size,
                     "v=%d\ntenant=%s\nstate=%s\nkey=%s\nsize=%" PRIu64 "\nsha256=%s\nmode=%o\nuid=%u\ngid=%u\n"
                     "mtime=%lld.%09ld\nchunk=%" PRIu64 "\nfcaps=%s\nranges=",
                     STUB_VERSION, s->tenant, stub_state_to_string(s->state), s->key, s->size, sha,
                     (unsigned)s->mode, (unsigned)s->uid, (unsigned)s->gid, (long long)s->mtime.tv_sec,
                     s->mtime.tv_nsec, s->chunk, fcaps);
        if (k < 0 || (size_t)k >= size)
                return -E2BIG;
        n = (size_t)k;
        for (size_t i = 0; s->state == STUB_PARTIAL && i < s->populated.n; i++) {
                k = snprintf(buf + n, size - n, "%s%" PRIu64 "+%" PRIu64, i ? "," : "", s->populated.r[i].start,
                             s->populated.r[i].end - s->populated.r[i].start);
                if (k < 0 || (size_t)k >= size - n)
                        return -E2BIG;
                n += (size_t)k;
        }
        if (n + 1 >= size)
                return -E2BIG;
        buf[n++] = '\n';
        buf[n] = 0;
        if (s->has_manifest) {
                char root[65];
                hex_encode(s->manifest, 32, root);
                k = snprintf(buf + n, size - n, "manifest=%s\n", root);
                if (k < 0 || (size_t)k >= size - n)
                        return -E2BIG;
                n += (size_t)k;
        }
        if (s->state == STUB_PARTIAL && s->checked) {
                k = snprintf(buf + n, size - n, "checked=1\n");
                if (k < 0 || (size_t)k >= size - n)
                        return -E2BIG;
                n += (size_t)k;
        }
        if (s->state == STUB_ARCHIVED && s->ctime_max.tv_sec > 0) {
                k = snprintf(buf + n, size - n, "ctime_max=%lld.%09ld\n", (long long)s->ctime_max.tv_sec,
                             s->ctime_max.tv_nsec);
                if (k < 0 || (size_t)k >= size - n)
                        return -E2BIG;
                n += (size_t)k;
        }
        return (int)n;
}

static int64_t ts_nsec(const struct timespec *t) { return (int64_t)t->tv_sec * 1000000000ll + t->tv_nsec; }

bool stub_ctime_moved(const struct stub *s, const struct timespec *ctime) {
        if (s->state != STUB_ARCHIVED || s->ctime_max.tv_sec == 0)
                return false; /* nothing recorded to compare with */
        int64_t c = ts_nsec(ctime), max = ts_nsec(&s->ctime_max);
        /* Later: changed since. Well before the record's own write (which
         * set ctime within the slack, give or take a tick of a coarse
         * clock): the clock stepped back since, or the filesystem keeps
         * whole seconds, and a change could hide below the mark. */
        return c > max || c < max - STUB_CTIME_SLACK_NSEC - STUB_CTIME_TICK_NSEC;
}

/* fgetxattr, also on an O_PATH fd (EBADF there): through its /proc link,
 * which leads to the very inode the fd holds. */
static ssize_t fd_getxattr(int fd, const char *name, void *buf, size_t size) {
        ssize_t n = fgetxattr(fd, name, buf, size);
        if (n < 0 && errno == EBADF && fd >= 0) {
                char proc[40]; /* thread-self: right on a thread with an fd table of its own too */
                snprintf(proc, sizeof(proc), "/proc/thread-self/fd/%d", fd);
                n = getxattr(proc, name, buf, size);
        }
        return n;
}

int stub_read_fd(int fd, struct stub *ret, const char **error) {
        char buf[STUB_TEXT_MAX + 1];
        ssize_t n = fd_getxattr(fd, STUB_XATTR, buf, sizeof(buf));
        if (n < 0) {
                if (errno == ERANGE) {
                        *error = "stub record too long";
                        return -EINVAL;
                }
                return -errno;
        }
        return stub_parse(buf, (size_t)n, ret, error);
}

static int stub_write_once(int fd, const struct stub *s, struct stub *t) {
        char buf[STUB_TEXT_MAX + 1];
        struct timespec now;
        *t = *s; /* shallow: formatted, not kept */
        t->ctime_max = (struct timespec){};
        if (t->state == STUB_ARCHIVED && clock_gettime(CLOCK_REALTIME, &now) == 0) {
                int64_t ns = (int64_t)now.tv_nsec + STUB_CTIME_SLACK_NSEC;
                t->ctime_max = (struct timespec){ .tv_sec = now.tv_sec + ns / 1000000000, .tv_nsec = ns % 1000000000 };
        }
        int n = stub_format(t, buf, sizeof(buf));
        if (n < 0)
                return n;
        if (fsetxattr(fd, STUB_XATTR, buf, (size_t)n, 0) < 0)
                return -errno;
        return 0;
}

int stub_write_fd(int fd, const struct stub *s) {
        struct stub t;
        struct stat st;
        int r = stub_write_once(fd, s, &t);
        /* Written later than the slack allows (the thread was starved
         * between the clock and the write): once more, or every release
         * would check the bytes for nothing. */
        if (r == 0 && t.state == STUB_ARCHIVED && fstat(fd, &st) == 0 && stub_ctime_moved(&t, &st.st_ctim))
                r = stub_write_once(fd, s, &t);
        return r;
}

int stub_pinned_fd(int fd) {
        if (fd_getxattr(fd, STUB_PIN_XATTR, NULL, 0) >= 0) /* any value */
                return 1;
        return errno == ENODATA ? 0 : -errno;
}

int stub_set_pinned_fd(int fd, bool pinned) {
        if (pinned)
                return fsetxattr(fd, STUB_PIN_XATTR, "1", 1, 0) < 0 ? -errno : 0;
        return fremovexattr(fd, STUB_PIN_XATTR) < 0 && errno != ENODATA ? -errno : 0;
}
