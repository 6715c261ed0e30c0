/* SPDX-License-Identifier: MIT */
#include "catalog-format.h"

#include <errno.h>
#include <json-c/json.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "hex.h"
#include "macro.h"
#include "utf8.h"

/* 2: the trailer is an HMAC with the tenant's catalog key (1: a plain
 * sha256, which anyone who can write the store can make). */
#define CATALOG_VERSION 2

static void json_putp(json_object **o) {
        if (*o)
                json_object_put(*o);
}

size_t catalog_entry_bytes(const struct catalog_entry *e) {
        size_t n = sizeof(*e) + e->path_len + e->target_len;
        for (size_t i = 0; i < e->n_xattrs; i++)
                n += sizeof(e->xattrs[i]) + (e->xattrs[i].name ? strlen(e->xattrs[i].name) : 0) + e->xattrs[i].len;
        return n;
}

void catalog_entry_done(struct catalog_entry *e) {
        free(e->path);
        free(e->target);
        for (size_t i = 0; i < e->n_xattrs; i++) {
                free(e->xattrs[i].name);
                free(e->xattrs[i].value);
        }
        free(e->xattrs);
        *e = (struct catalog_entry){};
}

bool catalog_path_valid(const char *path, size_t len) {
        if (len == 0 || len > CATALOG_PATH_MAX || memchr(path, 0, len) || path[0] == '/')
                return false;
        /* Every part non-empty, and neither "." nor "..": an import creates
         * exactly these names, beneath the subvolume and nowhere else. */
        for (size_t a = 0; a <= len;) {
                const char *slash = memchr(path + a, '/', len - a);
                size_t b = slash ? (size_t)(slash - path) : len;
                size_t n = b - a;
                if (n == 0 || (n == 1 && path[a] == '.') || (n == 2 && path[a] == '.' && path[a + 1] == '.'))
                        return false;
                a = b + 1;
        }
        return true;
}

bool catalog_xattr_name_allowed(const char *name) {
        return (strncmp(name, "user.", 5) == 0 && name[5]) || strcmp(name, "system.posix_acl_access") == 0 ||
               strcmp(name, "system.posix_acl_default") == 0;
}

/* ---- the key ---- */

const struct catalog_key catalog_key_unchecked = { .len = 0 };

static EVP_MAC_CTX *mac_new(const struct catalog_key *key) {
        if (!key || key->len < CATALOG_KEY_MIN || key->len > sizeof(key->bytes))
                return NULL;
        EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
        EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
        EVP_MAC_free(mac); /* the context keeps its own reference */
        OSSL_PARAM params[] = { OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
                                OSSL_PARAM_construct_end() };
        if (ctx && !EVP_MAC_init(ctx, key->bytes, key->len, params)) {
                EVP_MAC_CTX_free(ctx);
                ctx = NULL;
        }
        return ctx;
}

static int mac_final(EVP_MAC_CTX *ctx, uint8_t out[32]) {
        size_t n = 0;
        return EVP_MAC_final(ctx, out, &n, 32) && n == 32 ? 0 : -ENOMEM;
}

int catalog_mac(const struct catalog_key *key, const void *data, size_t len, uint8_t out[32]) {
        EVP_MAC_CTX *ctx = mac_new(key);
        int r = ctx && EVP_MAC_update(ctx, data, len) ? mac_final(ctx, out) : -EINVAL;
        EVP_MAC_CTX_free(ctx);
        return r;
}

/* ---- writing ---- */

struct catalog_writer {
        FILE *out;
        EVP_MAC_CTX *mac;
        uint64_t expected, added;
};

void catalog_writer_free(struct catalog_writer *w) {
        if (!w)
                return;
        EVP_MAC_CTX_free(w->mac);
        free(w);
}

static int write_line(struct catalog_writer *w, json_object *o) {
        size_t n;
        const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
        if (!s)
                return -ENOMEM;
        if (!EVP_MAC_update(w->mac, (const unsigned char *)s, n) || !EVP_MAC_update(w->mac, (const unsigned char *)"\n", 1))
                return -ENOMEM;
        if (fwrite(s, 1, n, w->out) != n || fputc('\n', w->out) == EOF)
                return -EIO;
        return 0;
}

/* Adds key (or key_hex, for bytes that are not UTF-8) to o. */
static int add_bytes(json_object *o, const char *key, const char *data, size_t len) {
        if (utf8_valid(data, len))
                return json_object_object_add(o, key, json_object_new_string_len(data, (int)len));
        _cleanup_free_ char *hex = malloc(len * 2 + 1), *hexkey = NULL;
        if (!hex || asprintf(&hexkey, "%s_hex", key) < 0)
                return -ENOMEM;
        hex_encode((const uint8_t *)data, len, hex);
        return json_object_object_add(o, hexkey, json_object_new_string(hex));
}

static int add_hash(json_object *o, const char *key, const uint8_t h[32]) {
        char hex[65];
        hex_encode(h, 32, hex);
        return json_object_object_add(o, key, json_object_new_string(hex));
}

int catalog_writer_new(FILE *out, const struct catalog_header *h, const struct catalog_key *key,
                       struct catalog_writer **ret) {
        struct catalog_writer *w = calloc(1, sizeof(*w));
        _cleanup_(json_putp) json_object *o = json_object_new_object();

        if (!w || !o || !(w->mac = mac_new(key))) {
                catalog_writer_free(w);
                return !key || key->len < CATALOG_KEY_MIN ? -EINVAL : -ENOMEM;
        }
        w->out = out;
        w->expected = h->entries;
        json_object_object_add(o, "tierd_catalog", json_object_new_int(CATALOG_VERSION));
        json_object_object_add(o, "kind", json_object_new_string(h->kind == CATALOG_SNAPSHOT ? "snapshot" : "journal"));
        json_object_object_add(o, "epoch", json_object_new_uint64(h->epoch));
        json_object_object_add(o, "seq", json_object_new_uint64(h->seq));
        json_object_object_add(o, "time", json_object_new_uint64(h->time_usec));
        json_object_object_add(o, "entries", json_object_new_uint64(h->entries));
        int r = write_line(w, o);
        if (r < 0) {
                catalog_writer_free(w);
                return r;
        }
        *ret = w;
        return 0;
}

static const char *type_name(enum catalog_type t) {
        return t == CATALOG_DIR ? "dir" : t == CATALOG_SYMLINK ? "symlink" : "file";
}

int catalog_writer_add(struct catalog_writer *w, const struct catalog_entry *e) {
        _cleanup_(json_putp) json_object *o = json_object_new_object();
        int r;

        if (!o)
                return -ENOMEM;
        if (!catalog_path_valid(e->path, e->path_len))
                return -EINVAL;
        json_object_object_add(o, "op", json_object_new_string(e->op == CATALOG_DEL ? "del" : "put"));
        if ((r = add_bytes(o, "path", e->path, e->path_len)) < 0)
                return r;
        if (e->op == CATALOG_DEL && e->type == CATALOG_DIR)
                json_object_object_add(o, "type", json_object_new_string("dir"));
        if (e->op == CATALOG_PUT) {
                json_object_object_add(o, "type", json_object_new_string(type_name(e->type)));
                json_object_object_add(o, "mode", json_object_new_uint64(e->mode));
                json_object_object_add(o, "uid", json_object_new_uint64(e->uid));
                json_object_object_add(o, "gid", json_object_new_uint64(e->gid));
                json_object *mt = json_object_new_array();
                json_object_array_add(mt, json_object_new_int64(e->mtime_sec));
                json_object_array_add(mt, json_object_new_uint64(e->mtime_nsec));
                json_object_object_add(o, "mtime", mt);
        }
        if (e->op == CATALOG_PUT && e->type == CATALOG_FILE) {
                json_object_object_add(o, "size", json_object_new_uint64(e->size));
                if (e->size > 0)
                        add_hash(o, "sha256", e->sha256);
                if (e->has_manifest)
                        add_hash(o, "manifest", e->manifest);
                if (e->chunk)
                        json_object_object_add(o, "chunk", json_object_new_uint64(e->chunk));
        }
        if (e->op == CATALOG_PUT && e->type == CATALOG_SYMLINK && (r = add_bytes(o, "target", e->target, e->target_len)) < 0)
                return r;
        if (e->op == CATALOG_PUT && e->n_xattrs) {
                json_object *xs = json_object_new_array();
                json_object_object_add(o, "xattrs", xs);
                for (size_t i = 0; i < e->n_xattrs; i++) {
                        if (!catalog_xattr_name_allowed(e->xattrs[i].name))
                                return -EINVAL;
                        size_t nl = strlen(e->xattrs[i].name);
                        _cleanup_free_ char *name = malloc(nl * 2 + 1), *value = malloc(e->xattrs[i].len * 2 + 1);
                        if (!name || !value)
                                return -ENOMEM;
                        hex_encode((const uint8_t *)e->xattrs[i].name, nl, name);
                        hex_encode(e->xattrs[i].value, e->xattrs[i].len, value);
                        json_object *pair = json_object_new_array();
                        json_object_array_add(pair, json_object_new_string(name));
                        json_object_array_add(pair, json_object_new_string(value));
                        json_object_array_add(xs, pair);
                }
        }
        r = write_line(w, o);
        if (r == 0)
                w->added++;
        return r;
}

int catalog_writer_finish(struct catalog_writer *w) {
        uint8_t sha[32];
        char hex[65];
        int r = 0;

        if (w->added != w->expected)
                r = -EINVAL;
        else if ((r = mac_final(w->mac, sha)) == 0) {
                hex_encode(sha, 32, hex);
                if (fprintf(w->out, "{\"hmac-sha256\":\"%s\"}\n", hex) < 0)
                        r = -EIO;
        }
        catalog_writer_free(w);
        return r;
}

/* ---- reading ---- */

static int bad(const char **why, const char *what) {
        *why = what;
        return -EBADMSG;
}

static json_object *parse_line(const char *line, size_t len) {
        json_tokener *tok = json_tokener_new_ex(8);
        json_object *o;

        if (!tok)
                return NULL;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, line, (int)len);
        if (o && (json_tokener_get_error(tok) != json_tokener_success || json_tokener_get_parse_end(tok) != len ||
                  !json_object_is_type(o, json_type_object))) {
                json_object_put(o);
                o = NULL;
        }
        json_tokener_free(tok);
        return o;
}

static bool get_u64(json_object *o, const char *key, uint64_t max, uint64_t *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return false;
        /* Negative: no size (above INT64_MAX, json-c's int64 saturates). */
        if (json_object_get_int64(v) < 0)
                return false;
        *ret = json_object_get_uint64(v);
        return *ret <= max;
}

static bool get_hash(json_object *o, const char *key, uint8_t out[32]) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) &&
               json_object_get_string_len(v) == 64 && hex_decode(json_object_get_string(v), out, 32) == 0;
}

/* key as a string, or key_hex: *ret malloc'd and NUL-terminated. 0, or -ENOENT if
 * neither is there, -EBADMSG if it is malformed or longer than max. */
static int get_bytes(json_object *o, const char *key, size_t max, char **ret, size_t *ret_len) {
        char hexkey[32];
        json_object *v;

        snprintf(hexkey, sizeof(hexkey), "%s_hex", key);
        if (json_object_object_get_ex(o, key, &v)) {
                if (!json_object_is_type(v, json_type_string) || (size_t)json_object_get_string_len(v) > max)
                        return -EBADMSG;
                *ret_len = (size_t)json_object_get_string_len(v);
                *ret = malloc(*ret_len + 1);
                if (!*ret)
                        return -ENOMEM;
                memcpy(*ret, json_object_get_string(v), *ret_len + 1);
                return 0;
        }
        if (!json_object_object_get_ex(o, hexkey, &v))
                return -ENOENT;
        size_t n = json_object_is_type(v, json_type_string) ? (size_t)json_object_get_string_len(v) : 1;
        if (n % 2 || n / 2 > max)
                return -EBADMSG;
        *ret = malloc(n / 2 + 1);
        if (!*ret)
                return -ENOMEM;
        if (hex_decode(json_object_get_string(v), (uint8_t *)*ret, n / 2) < 0) {
                free(*ret);
                *ret = NULL;
                return -EBADMSG;
        }
        (*ret)[n / 2] = 0;
        *ret_len = n / 2;
        return 0;
}

static int decode_xattrs(json_object *o, struct catalog_entry *e, const char **why) {
        json_object *xs;
        if (!json_object_object_get_ex(o, "xattrs", &xs))
                return 0;
        if (!json_object_is_type(xs, json_type_array) || json_object_array_length(xs) > CATALOG_XATTRS_MAX)
                return bad(why, "xattrs is not an array of at most 64 pairs");
        size_t n = json_object_array_length(xs);
        e->xattrs = calloc(n ?: 1, sizeof(*e->xattrs));
        if (!e->xattrs)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *pair = json_object_array_get_idx(xs, i), *nv, *vv;
                if (!json_object_is_type(pair, json_type_array) || json_object_array_length(pair) != 2 ||
                    !json_object_is_type(nv = json_object_array_get_idx(pair, 0), json_type_string) ||
                    !json_object_is_type(vv = json_object_array_get_idx(pair, 1), json_type_string))
                        return bad(why, "an xattr is not a pair of hex strings");
                size_t nl = (size_t)json_object_get_string_len(nv), vl = (size_t)json_object_get_string_len(vv);
                if (nl == 0 || nl % 2 || nl / 2 > CATALOG_XATTR_NAME_MAX || vl % 2 || vl / 2 > CATALOG_XATTR_VALUE_MAX)
                        return bad(why, "an xattr's name or value has a bad length");
                struct catalog_xattr *x = &e->xattrs[e->n_xattrs++];
                x->name = calloc(1, nl / 2 + 1);
                x->value = malloc(vl / 2 + 1);
                x->len = vl / 2;
                if (!x->name || !x->value)
                        return -ENOMEM;
                if (hex_decode(json_object_get_string(nv), (uint8_t *)x->name, nl / 2) < 0 ||
                    hex_decode(json_object_get_string(vv), x->value, vl / 2) < 0)
                        return bad(why, "an xattr is not hex");
                if (strlen(x->name) != nl / 2 || !catalog_xattr_name_allowed(x->name))
                        return bad(why, "an xattr is neither user.* nor a POSIX ACL");
        }
        return 0;
}

static int decode_entry(json_object *o, struct catalog_entry *e, const char **why) {
        json_object *v;
        uint64_t u;
        int r;

        if (!json_object_object_get_ex(o, "op", &v) || !json_object_is_type(v, json_type_string))
                return bad(why, "an entry has no op");
        if (strcmp(json_object_get_string(v), "put") == 0)
                e->op = CATALOG_PUT;
        else if (strcmp(json_object_get_string(v), "del") == 0)
                e->op = CATALOG_DEL;
        else
                return bad(why, "an entry's op is neither put nor del");
        r = get_bytes(o, "path", CATALOG_PATH_MAX, &e->path, &e->path_len);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || !catalog_path_valid(e->path, e->path_len))
                return bad(why, "an entry's path is missing or not a relative path beneath the subvolume");
        if (e->op == CATALOG_DEL) {
                /* A directory's: everything beneath it goes too. */
                bool typed = json_object_object_get_ex(o, "type", &v);
                if (typed && (!json_object_is_type(v, json_type_string) || strcmp(json_object_get_string(v), "dir") != 0))
                        return bad(why, "a del entry's type is not dir");
                e->type = typed ? CATALOG_DIR : 0;
                return 0;
        }

        if (!json_object_object_get_ex(o, "type", &v) || !json_object_is_type(v, json_type_string))
                return bad(why, "an entry has no type");
        const char *t = json_object_get_string(v);
        e->type = strcmp(t, "file") == 0 ? CATALOG_FILE : strcmp(t, "dir") == 0 ? CATALOG_DIR
                : strcmp(t, "symlink") == 0 ? CATALOG_SYMLINK : 0;
        if (!e->type)
                return bad(why, "an entry's type is not file, dir or symlink");
        if (!get_u64(o, "mode", 07777, &u))
                return bad(why, "an entry's mode is missing or above 07777");
        e->mode = (uint32_t)u;
        if (!get_u64(o, "uid", UINT32_MAX - 1, &u))
                return bad(why, "an entry's uid is missing or out of range");
        e->uid = (uint32_t)u;
        if (!get_u64(o, "gid", UINT32_MAX - 1, &u))
                return bad(why, "an entry's gid is missing or out of range");
        e->gid = (uint32_t)u;
        if (!json_object_object_get_ex(o, "mtime", &v) || !json_object_is_type(v, json_type_array) ||
            json_object_array_length(v) != 2 ||
            !json_object_is_type(json_object_array_get_idx(v, 0), json_type_int) ||
            !json_object_is_type(json_object_array_get_idx(v, 1), json_type_int))
                return bad(why, "an entry's mtime is not [seconds, nanoseconds]");
        e->mtime_sec = json_object_get_int64(json_object_array_get_idx(v, 0));
        int64_t ns = json_object_get_int64(json_object_array_get_idx(v, 1));
        if (ns < 0 || ns > 999999999)
                return bad(why, "an entry's mtime nanoseconds are out of range");
        e->mtime_nsec = (uint32_t)ns;

        if (e->type == CATALOG_FILE) {
                if (!get_u64(o, "size", INT64_MAX, &e->size))
                        return bad(why, "a file entry's size is missing or out of range");
                if (e->size > 0 && !get_hash(o, "sha256", e->sha256))
                        return bad(why, "a file entry has no sha256");
                e->has_manifest = json_object_object_get_ex(o, "manifest", NULL);
                if (e->has_manifest && !get_hash(o, "manifest", e->manifest))
                        return bad(why, "a file entry's manifest is not a SHA-256");
                if (json_object_object_get_ex(o, "chunk", NULL) && !get_u64(o, "chunk", 1ull << 40, &e->chunk))
                        return bad(why, "a file entry's chunk is out of range");
        }
        if (e->type == CATALOG_SYMLINK) {
                r = get_bytes(o, "target", CATALOG_PATH_MAX, &e->target, &e->target_len);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 || e->target_len == 0 || memchr(e->target, 0, e->target_len))
                        return bad(why, "a symlink entry's target is missing or malformed");
        }
        return decode_xattrs(o, e, why);
}

/* old_ok: version 1 too (its entries are the same; its trailer was a plain sha256). */
static int decode_header(json_object *o, struct catalog_header *h, bool old_ok, const char **why) {
        json_object *v;
        uint64_t u;

        if (!get_u64(o, "tierd_catalog", UINT32_MAX, &u) || (u != CATALOG_VERSION && !(old_ok && u == 1)))
                return bad(why, "not a tierd catalog object of version 1");
        if (!json_object_object_get_ex(o, "kind", &v) || !json_object_is_type(v, json_type_string))
                return bad(why, "the header has no kind");
        h->kind = strcmp(json_object_get_string(v), "journal") == 0    ? CATALOG_JOURNAL
                : strcmp(json_object_get_string(v), "snapshot") == 0 ? CATALOG_SNAPSHOT
                                                                       : 0;
        if (!h->kind)
                return bad(why, "the header's kind is neither journal nor snapshot");
        if (!get_u64(o, "epoch", UINT32_MAX, &u))
                return bad(why, "the header's epoch is missing or out of range");
        h->epoch = (uint32_t)u;
        if (!get_u64(o, "seq", UINT64_MAX, &h->seq) || !get_u64(o, "time", UINT64_MAX, &h->time_usec) ||
            !get_u64(o, "entries", UINT64_MAX, &h->entries))
                return bad(why, "the header's seq, time or entries is missing");
        return 0;
}

/* The last line: {"hmac-sha256":...} of all bytes before it, with the
 * tenant's key: whoever can write the store cannot make one. */
static int check_trailer(const char *data, size_t len, const struct catalog_key *key, size_t *body_len,
                         const char **why) {
        uint8_t want[32], got[32];
        size_t start;

        if (len == 0 || data[len - 1] != '\n')
                return bad(why, "the object does not end with a newline (cut short?)");
        for (start = len - 1; start > 0 && data[start - 1] != '\n'; start--)
                ;
        _cleanup_(json_putp) json_object *o = parse_line(data + start, len - 1 - start);
        bool one = o && json_object_object_length(o) == 1;
        bool plain = one && get_hash(o, "sha256", want), keyed = one && !plain && get_hash(o, "hmac-sha256", want);
        if (key == &catalog_key_unchecked && (plain || keyed)) {
                *body_len = start;
                return 0;
        }
        if (plain)
                return bad(why, "the object is not authenticated (a plain sha256 trailer: written by a tierd "
                                "without catalog keys, or by someone else)");
        if (!keyed)
                return bad(why, "the object has no hmac-sha256 trailer (cut short?)");
        int r = catalog_mac(key, data, start, got);
        if (r < 0)
                return r == -EINVAL ? bad(why, "no catalog key to check it with") : r;
        if (CRYPTO_memcmp(want, got, 32) != 0)
                return bad(why, "the object does not match its hmac-sha256 trailer (changed in the store, or "
                                "written with another catalog_key)");
        *body_len = start;
        return 0;
}

int catalog_decode(const char *data, size_t len, const struct catalog_key *key, struct catalog_header *h,
                   int (*each)(void *userdata, const struct catalog_entry *e), void *userdata, const char **why) {
        size_t body, pos = 0;
        uint64_t n = 0;
        bool have_header = false;
        int r;

        *why = "";
        r = check_trailer(data, len, key, &body, why);
        if (r < 0)
                return r;
        while (pos < body) {
                const char *nl = memchr(data + pos, '\n', body - pos);
                size_t linelen = (size_t)(nl - (data + pos)); /* body ends with '\n' */
                _cleanup_(json_putp) json_object *o = parse_line(data + pos, linelen);
                pos += linelen + 1;
                if (!o)
                        return bad(why, "a line is not a JSON object");
                if (!have_header) {
                        if ((r = decode_header(o, h, key == &catalog_key_unchecked, why)) < 0)
                                return r;
                        have_header = true;
                        continue;
                }
                if (++n > h->entries)
                        return bad(why, "more entries than the header says");
                struct catalog_entry e = {};
                r = decode_entry(o, &e, why);
                if (r == 0 && each)
                        r = each(userdata, &e);
                catalog_entry_done(&e);
                if (r < 0)
                        return r;
        }
        if (!have_header)
                return bad(why, "the object has no header");
        if (n != h->entries)
                return bad(why, "fewer entries than the header says");
        return 0;
}
