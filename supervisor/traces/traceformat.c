/* SPDX-License-Identifier: MIT */
#include "traceformat.h"

#include <errno.h>
#include <json-c/json.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-strict.h"
#include "objkey.h"
#include "macro.h"
#include "utf8.h"

#define TRACE_VERSION 1
/* Offsets past this are no file's: 2^62 keeps sums of two from wrapping. */
#define TRACE_OFFSET_MAX (UINT64_C(1) << 62)

static void trace_file_done(struct trace_file *f) {
        free(f->path);
        free(f->r);
        *f = (struct trace_file){};
}

void trace_done(struct trace *t) {
        for (size_t i = 0; i < t->n_files; i++)
                trace_file_done(&t->files[i]);
        free(t->files);
        *t = (struct trace){};
}

bool trace_name_valid(const char *name) {
        size_t n = strlen(name);
        /* No "." part either: the store's key would name another trace
         * (a file:// path and a URL both drop it). */
        if (n == 0 || n > TRACE_NAME_MAX || name[0] == '/' || name[n - 1] == '/' || strstr(name, "//") ||
            strstr(name, "..") || strcmp(name, ".") == 0 || strncmp(name, "./", 2) == 0 || strstr(name, "/./") ||
            (n >= 2 && strcmp(name + n - 2, "/.") == 0))
                return false;
        return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/-") == n;
}

bool trace_path_valid(const char *path, size_t len) {
        if (len == 0 || len > TRACE_PATH_MAX || memchr(path, 0, len) || path[0] == '/' || !utf8_valid(path, len))
                return false;
        for (const char *p = path, *end = path + len; p < end;) {
                const char *slash = memchr(p, '/', (size_t)(end - p)), *e = slash ?: end;
                size_t part = (size_t)(e - p);
                if (part == 0 || (part == 1 && p[0] == '.') || (part == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                if (!slash)
                        break;
                p = slash + 1;
                if (p == end)
                        return false; /* "a/" */
        }
        return true;
}

int trace_store_key(const char *name, char *buf, size_t size) {
        struct proto_object o = { .kind = PROTO_OBJECT_TRACE };
        char key[STUB_KEY_MAX];

        if (!trace_name_valid(name))
                return -EINVAL;
        /* By its name's SHA-256: a key of tierd's form, which a listing
         * of the store gives back (a collection deletes the traces not
         * saved for trace_keep), whatever the name's slashes. */
        if (!EVP_Digest(name, strlen(name), o.hash, NULL, EVP_sha256(), NULL))
                return -ENOMEM;
        object_key_format(&o, key);
        int n = snprintf(buf, size, "%s", key);
        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static struct trace_file *file_find(struct trace *t, const char *path) {
        for (size_t i = 0; i < t->n_files; i++)
                if (strcmp(t->files[i].path, path) == 0)
                        return &t->files[i];
        return NULL;
}

/* The files sorted by path (pointers into t->files, valid until it
 * changes): lookups in O(log n), so a trace of TRACE_FILES_MAX files is
 * merged and checked in O(n log n), never O(n^2). */
static int by_path(const void *a, const void *b) {
        return strcmp((*(struct trace_file *const *)a)->path, (*(struct trace_file *const *)b)->path);
}

typedef struct trace_file *file_ptr;

static struct trace_file **path_index(struct trace *t) {
        file_ptr *ix = calloc(MAX(t->n_files, 1u), sizeof(file_ptr));
        if (!ix)
                return NULL;
        for (size_t i = 0; i < t->n_files; i++)
                ix[i] = &t->files[i];
        qsort(ix, t->n_files, sizeof(file_ptr), by_path);
        return ix;
}

static struct trace_file *index_find(struct trace_file **ix, size_t n, const char *path) {
        struct trace_file key = { .path = (char *)path }, *k = &key;
        file_ptr *found = bsearch(&k, ix, n, sizeof(file_ptr), by_path);
        return found ? *found : NULL;
}

static struct trace_file *file_add(struct trace *t, const char *path, const char *key, uint64_t size) {
        if (t->n_files >= TRACE_FILES_MAX)
                return NULL;
        struct trace_file *files = reallocarray(t->files, t->n_files + 1, sizeof(*files));
        if (!files)
                return NULL;
        t->files = files;
        struct trace_file *f = &files[t->n_files];
        *f = (struct trace_file){ .size = size, .path = strdup(path) };
        if (!f->path)
                return NULL;
        snprintf(f->key, sizeof(f->key), "%s", key);
        t->n_files++;
        return f;
}

/* Appends r; past TRACE_RANGES_MAX, the last range grows to cover it. */
static int range_append(struct trace_file *f, const struct trace_range *r) {
        if (f->n >= TRACE_RANGES_MAX) {
                struct trace_range *l = &f->r[f->n - 1];
                l->start = MIN(l->start, r->start);
                l->end = MAX(l->end, r->end);
                l->seen = MAX(l->seen, r->seen);
                l->last = MAX(l->last, r->last);
                return 0;
        }
        struct trace_range *rs = reallocarray(f->r, f->n + 1, sizeof(*rs));
        if (!rs)
                return -ENOMEM;
        f->r = rs;
        rs[f->n++] = *r;
        return 0;
}

int trace_add(struct trace *run, const char *path, const char *key, uint64_t size, uint64_t start, uint64_t end,
              uint32_t at_ms, bool resident) {
        struct trace_file *f = file_find(run, path);
        if (!trace_path_valid(path, strlen(path)) || start >= end || end > size || size > TRACE_OFFSET_MAX)
                return -EINVAL;
        if (!f && !(f = file_add(run, path, key, size)))
                return run->n_files >= TRACE_FILES_MAX ? -E2BIG : -ENOMEM;
        f->resident |= resident;
        for (size_t i = 0; i < f->n; i++)
                if (f->r[i].start == start && f->r[i].end == end)
                        return 0;
        run->runs = 1;
        return range_append(f, &(struct trace_range){ .start = start, .end = end, .seen = 1, .last = 1, .at_ms = at_ms });
}

static int by_string(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static uint32_t file_first_at(const struct trace_file *f) {
        uint32_t at = UINT32_MAX;
        for (size_t i = 0; i < f->n; i++)
                at = MIN(at, f->r[i].at_ms);
        return at;
}

static int by_first_touch(const void *a, const void *b) {
        uint32_t x = file_first_at(a), y = file_first_at(b);
        return x < y ? -1 : x > y;
}

static const struct trace_range *run_range(const struct trace_file *f, const struct trace_range *r) {
        for (size_t i = 0; f && i < f->n; i++)
                if (f->r[i].start == r->start && f->r[i].end == r->end)
                        return &f->r[i];
        return NULL;
}

/* The old file's ranges, counted for one more run, and the run's new ones. */
static int file_merge(struct trace_file *old, const struct trace_file *run, uint32_t runs) {
        _cleanup_free_ struct trace_range *keep = old->r;
        size_t n = old->n;
        bool changed = run && strcmp(run->key, old->key) != 0;

        old->r = NULL;
        old->n = 0;
        for (size_t i = 0; i < n && !changed; i++) {
                struct trace_range r = keep[i];
                const struct trace_range *now = run_range(run, &r);
                /* Read while whole (resident): one read of it was heard,
                 * not which ranges; all count as touched. */
                if (now || (run && run->resident)) {
                        r.seen++;
                        r.last = runs;
                        r.at_ms = now ? now->at_ms : file_first_at(run);
                } else if (!run && old->unknown)
                        r.last = runs; /* whole all along: no read of it could be heard */
                /* Kept while most runs touch it, or one of the last two did. */
                if (r.seen * 2 > runs || runs - r.last < 2) {
                        int k = range_append(old, &r);
                        if (k < 0)
                                return k;
                }
        }
        if (run) {
                snprintf(old->key, sizeof(old->key), "%s", run->key);
                old->size = run->size;
        }
        for (size_t i = 0; run && i < run->n; i++) {
                struct trace_range r = run->r[i];
                if (!changed && run_range(&(struct trace_file){ .r = keep, .n = n }, &r))
                        continue;
                r.seen = 1;
                r.last = runs;
                int k = range_append(old, &r);
                if (k < 0)
                        return k;
        }
        return 0;
}

int trace_merge(struct trace *into, const struct trace *run) {
        if (run->runs != 1 || into->runs >= UINT32_MAX / 2)
                return -EINVAL;
        _cleanup_free_ struct trace_file **run_ix = path_index((struct trace *)run), **old_ix = path_index(into);
        uint32_t runs = ++into->runs;
        size_t n_old = into->n_files;
        int r;

        if (!run_ix || !old_ix)
                return -ENOMEM;
        for (size_t i = 0; i < n_old; i++)
                if ((r = file_merge(&into->files[i], index_find(run_ix, run->n_files, into->files[i].path), runs)) < 0)
                        return r;
        /* Appending moves into->files: the old files' index is of paths only from here. */
        _cleanup_free_ char **old_paths = calloc(MAX(n_old, 1u), sizeof(*old_paths));
        if (!old_paths)
                return -ENOMEM;
        for (size_t i = 0; i < n_old; i++)
                old_paths[i] = old_ix[i]->path;
        for (size_t i = 0; i < run->n_files; i++) {
                const struct trace_file *rf = &run->files[i];
                const char *p = rf->path;
                struct trace_file *f;
                if (bsearch(&p, old_paths, n_old, sizeof(*old_paths), by_string))
                        continue;
                if (!(f = file_add(into, rf->path, rf->key, rf->size)))
                        return -ENOMEM;
                if ((r = file_merge(f, rf, runs)) < 0)
                        return r;
        }
        /* Files with no range left go. */
        size_t w = 0;
        for (size_t i = 0; i < into->n_files; i++) {
                if (into->files[i].n == 0)
                        trace_file_done(&into->files[i]);
                else
                        into->files[w++] = into->files[i];
        }
        into->n_files = w;
        if (w)
                qsort(into->files, w, sizeof(*into->files), by_first_touch);
        return 0;
}

bool trace_has_file(const struct trace *t, const char *path) { return file_find((struct trace *)t, path) != NULL; }

uint64_t trace_bytes(const struct trace *t) {
        uint64_t n = 0;
        for (size_t i = 0; i < t->n_files; i++)
                for (size_t j = 0; j < t->files[i].n; j++)
                        n += t->files[i].r[j].end - t->files[i].r[j].start;
        return n;
}

size_t trace_ranges(const struct trace *t) {
        size_t n = 0;
        for (size_t i = 0; i < t->n_files; i++)
                n += t->files[i].n;
        return n;
}

char *trace_format(const struct trace *t) {
        _cleanup_(json_putp) json_object *o = json_object_new_object(), *files = json_object_new_array();
        if (!o || !files)
                return NULL;
        json_object_object_add(o, "tierd_trace", json_object_new_int(TRACE_VERSION));
        json_object_object_add(o, "name", json_object_new_string(t->name));
        json_object_object_add(o, "runs", json_object_new_int64(t->runs));
        for (size_t i = 0; i < t->n_files; i++) {
                const struct trace_file *f = &t->files[i];
                json_object *fo = json_object_new_object(), *ranges = json_object_new_array();
                json_object_object_add(fo, "path", json_object_new_string(f->path));
                json_object_object_add(fo, "key", json_object_new_string(f->key));
                json_object_object_add(fo, "size", json_object_new_int64((int64_t)f->size));
                for (size_t j = 0; j < f->n; j++) {
                        const struct trace_range *r = &f->r[j];
                        json_object *a = json_object_new_array();
                        json_object_array_add(a, json_object_new_int64((int64_t)r->start));
                        json_object_array_add(a, json_object_new_int64((int64_t)r->end));
                        json_object_array_add(a, json_object_new_int64(r->seen));
                        json_object_array_add(a, json_object_new_int64(r->last));
                        json_object_array_add(a, json_object_new_int64(r->at_ms));
                        json_object_array_add(ranges, a);
                }
                json_object_object_add(fo, "ranges", ranges);
                json_object_array_add(files, fo);
        }
        json_object_object_add(o, "files", json_object_get(files));
        /* Paths as they are: json-c writes "\/" for every "/" otherwise. */
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        return s ? strdup(s) : NULL;
}

static bool get_u64(json_object *v, uint64_t max, uint64_t *ret) {
        if (!json_object_is_type(v, json_type_int))
                return false;
        errno = 0;
        int64_t n = json_object_get_int64(v);
        if (errno || n < 0 || (uint64_t)n > max)
                return false;
        *ret = (uint64_t)n;
        return true;
}

static json_object *member(json_object *o, const char *key, json_type type) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, type) ? v : NULL;
}

static int parse_range(json_object *a, const struct trace_file *f, uint32_t runs, struct trace_range *r,
                       const char **why) {
        uint64_t v[5];
        if (!json_object_is_type(a, json_type_array) || json_object_array_length(a) != 5)
                return *why = "a range is not [start, end, seen, last, at_ms]", -EINVAL;
        for (size_t k = 0; k < 5; k++)
                if (!get_u64(json_object_array_get_idx(a, k), k < 2 ? f->size : k < 4 ? runs : UINT32_MAX, &v[k]))
                        return *why = "a range has a number out of bounds", -EINVAL;
        if (v[0] >= v[1] || v[2] == 0 || v[3] == 0)
                return *why = "a range is empty, or was never seen", -EINVAL;
        *r = (struct trace_range){ .start = v[0], .end = v[1], .seen = (uint32_t)v[2], .last = (uint32_t)v[3],
                                   .at_ms = (uint32_t)v[4] };
        return 0;
}

static int parse_file(json_object *fo, struct trace *t, const char **why) {
        json_object *path = member(fo, "path", json_type_string), *key = member(fo, "key", json_type_string),
                    *size = member(fo, "size", json_type_int), *ranges = member(fo, "ranges", json_type_array);
        uint64_t sz;
        struct trace_file *f;
        int r;

        if (!path || !key || !size || !ranges || json_object_object_length(fo) != 4)
                return *why = "a file is not {path, key, size, ranges}", -EINVAL;
        const char *p = json_object_get_string(path), *k = json_object_get_string(key);
        if (!trace_path_valid(p, (size_t)json_object_get_string_len(path)))
                return *why = "a path is not one beneath a subvolume", -EINVAL;
        if ((size_t)json_object_get_string_len(key) >= STUB_KEY_MAX || strlen(k) == 0)
                return *why = "a file's key is empty or too long", -EINVAL;
        if (!get_u64(size, TRACE_OFFSET_MAX, &sz))
                return *why = "a file's size is out of bounds", -EINVAL;
        size_t n = json_object_array_length(ranges);
        if (n == 0 || n > TRACE_RANGES_MAX)
                return *why = "a file has no range, or too many", -EINVAL;
        if (!(f = file_add(t, p, k, sz)))
                return t->n_files >= TRACE_FILES_MAX ? (*why = "too many files", -EINVAL) : -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct trace_range rg;
                if ((r = parse_range(json_object_array_get_idx(ranges, i), f, t->runs, &rg, why)) < 0 ||
                    (r = range_append(f, &rg)) < 0)
                        return r;
        }
        return 0;
}

int trace_parse(const char *text, size_t len, struct trace *ret, const char **why) {
        _cleanup_(json_putp) json_object *o = NULL;
        _cleanup_free_ char *jwhy = NULL, *dup = NULL;
        struct trace t = {};
        json_object *files, *name, *runs, *version;
        uint64_t v, nruns;
        int r;

        *why = "not a trace";
        if (len > TRACE_OBJECT_MAX)
                return *why = "larger than a trace can be", -EINVAL;
        if ((r = json_parse_strict(text, len, &o, &jwhy, &dup)) < 0)
                return r == -ENOMEM ? r : (*why = "not strict JSON", -EINVAL);
        if (!json_object_is_type(o, json_type_object) || json_object_object_length(o) != 4 ||
            !(version = member(o, "tierd_trace", json_type_int)) || !(name = member(o, "name", json_type_string)) ||
            !(runs = member(o, "runs", json_type_int)) || !(files = member(o, "files", json_type_array)))
                return *why = "not {tierd_trace, name, runs, files}", -EINVAL;
        if (!get_u64(version, UINT32_MAX, &v) || v != TRACE_VERSION)
                return *why = "a trace version this tierd does not read", -EINVAL;
        if (!trace_name_valid(json_object_get_string(name)))
                return *why = "its name is not a trace name", -EINVAL;
        if (!get_u64(runs, UINT32_MAX / 2, &nruns) || nruns == 0)
                return *why = "its count of runs is out of bounds", -EINVAL;
        if (json_object_array_length(files) > TRACE_FILES_MAX)
                return *why = "too many files", -EINVAL;
        snprintf(t.name, sizeof(t.name), "%s", json_object_get_string(name));
        t.runs = (uint32_t)nruns;
        for (size_t i = 0; i < json_object_array_length(files); i++) {
                json_object *fo = json_object_array_get_idx(files, i);
                if (!json_object_is_type(fo, json_type_object)) {
                        *why = "a file is not an object";
                        r = -EINVAL;
                } else
                        r = parse_file(fo, &t, why);
                if (r < 0) {
                        trace_done(&t);
                        return r;
                }
        }
        _cleanup_free_ struct trace_file **ix = path_index(&t);
        for (size_t i = 1; ix && i < t.n_files; i++)
                if (strcmp(ix[i - 1]->path, ix[i]->path) == 0) {
                        *why = "a path appears twice";
                        trace_done(&t);
                        return -EINVAL;
                }
        if (!ix) {
                trace_done(&t);
                return -ENOMEM;
        }
        *why = NULL;
        *ret = t;
        return 0;
}
