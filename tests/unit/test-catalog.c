/* The catalog's format: what goes in comes out, byte for byte (names that
 * are not UTF-8 included), and every tampered or hostile object is refused. */
#include "unit.h"
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include "catalog-format.h"

/* The tenant's key, and another one. */
static const struct catalog_key KEY = { .bytes = "0123456789abcdef0123456789abcdef", .len = 32 };
static const struct catalog_key OTHER = { .bytes = "0123456789abcdef0123456789abcdeF", .len = 32 };

struct collected {
        struct catalog_entry e[8];
        size_t n;
};

static char *dup_bytes(const char *s, size_t n) {
        char *p = malloc(n + 1);
        memcpy(p, s, n);
        p[n] = 0;
        return p;
}

static int collect(void *userdata, const struct catalog_entry *e) {
        struct collected *c = userdata;
        struct catalog_entry *d = &c->e[c->n++];
        *d = *e;
        d->path = dup_bytes(e->path, e->path_len);
        d->target = e->target ? dup_bytes(e->target, e->target_len) : NULL;
        d->xattrs = calloc(e->n_xattrs + 1, sizeof(*d->xattrs));
        for (size_t i = 0; i < e->n_xattrs; i++) {
                d->xattrs[i].name = strdup(e->xattrs[i].name);
                d->xattrs[i].value = (uint8_t *)dup_bytes((const char *)e->xattrs[i].value, e->xattrs[i].len);
                d->xattrs[i].len = e->xattrs[i].len;
        }
        return 0;
}

static void collected_done(struct collected *c) {
        for (size_t i = 0; i < c->n; i++)
                catalog_entry_done(&c->e[i]);
}

/* Encodes n entries into a malloc'd object. */
static char *encode(const struct catalog_entry *e, size_t n, size_t *len) {
        char *buf = NULL;
        FILE *f = open_memstream(&buf, len);
        struct catalog_header h = { .kind = CATALOG_JOURNAL, .epoch = 3, .seq = 42, .time_usec = 1700000000000000ull,
                                    .entries = n };
        struct catalog_writer *w;
        assert_int_equal(catalog_writer_new(f, &h, &KEY, &w), 0);
        for (size_t i = 0; i < n; i++)
                assert_int_equal(catalog_writer_add(w, &e[i]), 0);
        assert_int_equal(catalog_writer_finish(w), 0);
        fclose(f);
        return buf;
}

static const char bad_name[] = "dir/caf\xe9\xff name\nwith newline";

static void test_roundtrip(void **state) {
        (void)state;
        uint8_t acl[] = { 2, 0, 0, 0, 1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff };
        struct catalog_xattr xs[] = { { .name = "user.color", .value = (uint8_t *)"blue", .len = 4 },
                                      { .name = "system.posix_acl_access", .value = acl, .len = sizeof(acl) } };
        struct catalog_entry in[] = {
                { .op = CATALOG_PUT, .type = CATALOG_DIR, .path = "dir", .path_len = 3, .mode = 0750, .uid = 1000,
                  .gid = 1000, .mtime_sec = 1700000000, .mtime_nsec = 5 },
                { .op = CATALOG_PUT, .type = CATALOG_FILE, .path = (char *)bad_name, .path_len = sizeof(bad_name) - 1,
                  .size = 1ull << 40, .mode = 04755, .uid = 7, .gid = 8, .mtime_sec = -5, .mtime_nsec = 999999999,
                  .sha256 = { 1, 2, 3 }, .has_manifest = true, .manifest = { 9 }, .chunk = 4 << 20, .xattrs = xs,
                  .n_xattrs = 2 },
                { .op = CATALOG_PUT, .type = CATALOG_FILE, .path = "dir/empty", .path_len = 9, .mode = 0644 },
                { .op = CATALOG_PUT, .type = CATALOG_SYMLINK, .path = "dir/link", .path_len = 8, .mode = 0777,
                  .target = "../elsewhere/\x80", .target_len = 14 },
                { .op = CATALOG_DEL, .path = "gone file", .path_len = 9 },
                { .op = CATALOG_DEL, .type = CATALOG_DIR, .path = "gone dir", .path_len = 8 },
        };
        size_t len, n = sizeof(in) / sizeof(in[0]);
        char *obj = encode(in, n, &len);
        struct collected c = {};
        struct catalog_header h;
        const char *why;

        assert_int_equal(catalog_decode(obj, len, &KEY, &h, collect, &c, &why), 0);
        assert_int_equal(h.kind, CATALOG_JOURNAL);
        assert_int_equal(h.epoch, 3);
        assert_int_equal(h.seq, 42);
        assert_int_equal(h.entries, n);
        assert_int_equal(c.n, n);
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(c.e[i].op, in[i].op);
                assert_int_equal(c.e[i].path_len, in[i].path_len);
                assert_memory_equal(c.e[i].path, in[i].path, in[i].path_len);
                if (in[i].op == CATALOG_DEL) {
                        assert_int_equal(c.e[i].type, in[i].type);
                        continue;
                }
                assert_int_equal(c.e[i].type, in[i].type);
                assert_int_equal(c.e[i].mode, in[i].mode);
                assert_int_equal(c.e[i].uid, in[i].uid);
                assert_int_equal(c.e[i].gid, in[i].gid);
                assert_int_equal(c.e[i].mtime_sec, in[i].mtime_sec);
                assert_int_equal(c.e[i].mtime_nsec, in[i].mtime_nsec);
                assert_int_equal(c.e[i].size, in[i].size);
                assert_int_equal(c.e[i].n_xattrs, in[i].n_xattrs);
        }
        assert_memory_equal(c.e[1].sha256, in[1].sha256, 32);
        assert_true(c.e[1].has_manifest);
        assert_memory_equal(c.e[1].manifest, in[1].manifest, 32);
        assert_int_equal(c.e[1].chunk, 4 << 20);
        assert_string_equal(c.e[1].xattrs[0].name, "user.color");
        assert_memory_equal(c.e[1].xattrs[1].value, acl, sizeof(acl));
        assert_false(c.e[2].has_manifest);
        assert_int_equal(c.e[3].target_len, 14);
        assert_memory_equal(c.e[3].target, in[3].target, 14);
        /* A UTF-8 name is readable in the object; the other one is hex. */
        assert_non_null(strstr(obj, "\"path\":\"dir/empty\""));
        assert_non_null(strstr(obj, "\"path_hex\":"));
        collected_done(&c);
        free(obj);
}

static int decode_fails(const char *obj, size_t len) {
        struct catalog_header h;
        const char *why = NULL;
        int r = catalog_decode(obj, len, &KEY, &h, NULL, NULL, &why);
        if (r == -EBADMSG)
                assert_true(why && *why);
        return r;
}

static void test_tampered(void **state) {
        (void)state;
        struct catalog_entry in[] = { { .op = CATALOG_PUT, .type = CATALOG_FILE, .path = "a", .path_len = 1,
                                        .size = 10, .mode = 0644, .sha256 = { 7 } } };
        size_t len;
        char *obj = encode(in, 1, &len);

        assert_int_equal(decode_fails(obj, len), 0);
        /* Every single-byte change, and every cut, is caught. */
        for (size_t i = 0; i < len; i++) {
                char *copy = malloc(len);
                memcpy(copy, obj, len);
                copy[i] ^= 0x01;
                assert_int_equal(decode_fails(copy, len), -EBADMSG);
                assert_int_equal(decode_fails(obj, i), -EBADMSG);
                free(copy);
        }
        free(obj);
}

/* Hostile objects with a valid trailer around them: what the key's
 * holder could write, or (plain) what anyone who writes the store can. */
static char *with_any_trailer(const char *body, size_t *len, bool plain) {
        size_t n = strlen(body);
        uint8_t mac[32];
        char hex[65];
        if (plain)
                EVP_Digest(body, n, mac, NULL, EVP_sha256(), NULL);
        else
                assert_int_equal(catalog_mac(&KEY, body, n, mac), 0);
        for (int i = 0; i < 32; i++)
                sprintf(hex + 2 * i, "%02x", mac[i]);
        char *out = NULL;
        *len = (size_t)asprintf(&out, "%s{\"%s\":\"%s\"}\n", body, plain ? "sha256" : "hmac-sha256", hex);
        return out;
}

static char *with_trailer(const char *body, size_t *len) {
        return with_any_trailer(body, len, false);
}

static void test_hostile(void **state) {
        (void)state;
        const char *head = "{\"tierd_catalog\":2,\"kind\":\"journal\",\"epoch\":1,\"seq\":1,\"time\":1,\"entries\":1}\n";
        const char *bodies[] = {
                "{\"op\":\"put\",\"type\":\"file\",\"path\":\"../etc/passwd\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"size\":0}\n",
                "{\"op\":\"put\",\"type\":\"file\",\"path\":\"/etc/passwd\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"size\":0}\n",
                "{\"op\":\"put\",\"type\":\"file\",\"path\":\"a//b\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"size\":0}\n",
                "{\"op\":\"put\",\"type\":\"file\",\"path\":\"a/./b\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"size\":0}\n",
                "{\"op\":\"put\",\"type\":\"file\",\"path_hex\":\"610062\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"size\":0}\n",
                "{\"op\":\"put\",\"type\":\"file\",\"path\":\"a\\u0000b\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"size\":0}\n",
                "{\"op\":\"put\",\"type\":\"file\",\"path\":\"a\",\"mode\":4096,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"size\":0}\n",
                "{\"op\":\"put\",\"type\":\"file\",\"path\":\"a\",\"mode\":420,\"uid\":-1,\"gid\":0,\"mtime\":[0,0],\"size\":0}\n",
                "{\"op\":\"put\",\"type\":\"file\",\"path\":\"a\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"size\":-1}\n",
                "{\"op\":\"put\",\"type\":\"file\",\"path\":\"a\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"size\":5}\n",
                "{\"op\":\"put\",\"type\":\"file\",\"path\":\"a\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,1000000000],\"size\":0}\n",
                "{\"op\":\"put\",\"type\":\"device\",\"path\":\"a\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,0]}\n",
                "{\"op\":\"put\",\"type\":\"symlink\",\"path\":\"a\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,0]}\n",
                "{\"op\":\"put\",\"type\":\"dir\",\"path\":\"a\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,0],"
                "\"xattrs\":[[\"73656375726974792e74696572640a\",\"00\"]]}\n", /* security.tierd */
                "{\"op\":\"put\",\"type\":\"dir\",\"path\":\"a\",\"mode\":420,\"uid\":0,\"gid\":0,\"mtime\":[0,0],"
                "\"xattrs\":[[\"7472757374656400\",\"00\"]]}\n",
                "{\"op\":\"move\",\"path\":\"a\"}\n",
                "{\"op\":\"del\",\"path\":\"a\",\"type\":\"file\"}\n",
                "[1,2]\n",
                "{\"op\":\"del\",\"path\":\"a\"} trailing\n",
        };
        for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
                char *body = NULL, *obj;
                size_t len;
                assert_true(asprintf(&body, "%s%s", head, bodies[i]) > 0);
                obj = with_trailer(body, &len);
                if (decode_fails(obj, len) != -EBADMSG)
                        fail_msg("accepted: %s", bodies[i]);
                free(obj);
                free(body);
        }
        /* The count must match; a second object's header is no entry. */
        size_t len;
        char *obj = with_trailer("{\"tierd_catalog\":2,\"kind\":\"journal\",\"epoch\":1,\"seq\":1,\"time\":1,\"entries\":2}\n"
                                 "{\"op\":\"del\",\"path\":\"a\"}\n", &len);
        assert_int_equal(decode_fails(obj, len), -EBADMSG);
        free(obj);
        obj = with_trailer("{\"tierd_catalog\":3,\"kind\":\"journal\",\"epoch\":1,\"seq\":1,\"time\":1,\"entries\":0}\n", &len);
        assert_int_equal(decode_fails(obj, len), -EBADMSG);
        free(obj);
        obj = with_trailer("{\"tierd_catalog\":2,\"kind\":\"journal\",\"epoch\":1,\"seq\":1,\"time\":1,\"entries\":0}\n", &len);
        assert_int_equal(decode_fails(obj, len), 0);
        free(obj);
}

/* Only the key's holder makes an object an import takes: not one with
 * another key, not one with a plain sha256 (anyone can compute that). */
static void test_key(void **state) {
        (void)state;
        struct catalog_entry in[] = { { .op = CATALOG_PUT, .type = CATALOG_FILE, .path = "a", .path_len = 1,
                                        .size = 10, .mode = 04755, .sha256 = { 7 } } };
        struct catalog_header h;
        const char *why = NULL;
        size_t len;
        char *obj = encode(in, 1, &len);
        assert_int_equal(catalog_decode(obj, len, &KEY, &h, NULL, NULL, &why), 0);
        assert_int_equal(catalog_decode(obj, len, &OTHER, &h, NULL, NULL, &why), -EBADMSG);
        assert_non_null(strstr(why, "another catalog_key"));
        free(obj);
        const char *body = "{\"tierd_catalog\":2,\"kind\":\"journal\",\"epoch\":1,\"seq\":1,\"time\":1,\"entries\":1}\n"
                           "{\"op\":\"put\",\"type\":\"file\",\"path\":\"a\",\"mode\":2541,\"uid\":0,\"gid\":0,"
                           "\"mtime\":[0,0],\"size\":0}\n";
        obj = with_any_trailer(body, &len, true);
        assert_int_equal(catalog_decode(obj, len, &KEY, &h, NULL, NULL, &why), -EBADMSG);
        assert_non_null(strstr(why, "not authenticated"));
        /* gc's mark reads it all the same: a mark only keeps. */
        assert_int_equal(catalog_decode(obj, len, &catalog_key_unchecked, &h, NULL, NULL, &why), 0);
        free(obj);
        const char *v1 = "{\"tierd_catalog\":1,\"kind\":\"journal\",\"epoch\":1,\"seq\":1,\"time\":1,\"entries\":0}\n";
        obj = with_any_trailer(v1, &len, true);
        assert_int_equal(catalog_decode(obj, len, &catalog_key_unchecked, &h, NULL, NULL, &why), 0);
        assert_int_equal(catalog_decode(obj, len, &KEY, &h, NULL, NULL, &why), -EBADMSG);
        obj[len - 3] ^= 1; /* a trailer that does not parse as one is refused even unchecked */
        obj[len - 2] = 'x';
        assert_int_equal(catalog_decode(obj, len, &catalog_key_unchecked, &h, NULL, NULL, &why), -EBADMSG);
        free(obj);
        obj = with_any_trailer(body, &len, false);
        assert_int_equal(catalog_decode(obj, len, &KEY, &h, NULL, NULL, &why), 0);
        free(obj);
        /* No key, or a short one: nothing is written or read. */
        struct catalog_key short_key = { .bytes = "short", .len = 5 };
        uint8_t mac[32];
        assert_int_equal(catalog_mac(&short_key, "x", 1, mac), -EINVAL);
        assert_int_equal(catalog_decode("x\n", 2, NULL, &h, NULL, NULL, &why), -EBADMSG);
        char *buf = NULL;
        FILE *f = open_memstream(&buf, &len);
        struct catalog_writer *w = NULL;
        assert_int_equal(catalog_writer_new(f, &h, &short_key, &w), -EINVAL);
        assert_int_equal(catalog_writer_new(f, &h, NULL, &w), -EINVAL);
        fclose(f);
        free(buf);
}

static void test_writer_refuses(void **state) {
        (void)state;
        char *buf = NULL;
        size_t len;
        FILE *f = open_memstream(&buf, &len);
        struct catalog_header h = { .kind = CATALOG_SNAPSHOT, .entries = 1 };
        struct catalog_writer *w;
        struct catalog_xattr x = { .name = "security.capability", .value = (uint8_t *)"x", .len = 1 };
        struct catalog_entry up = { .op = CATALOG_PUT, .type = CATALOG_DIR, .path = "..", .path_len = 2 };
        struct catalog_entry sec = { .op = CATALOG_PUT, .type = CATALOG_DIR, .path = "d", .path_len = 1, .xattrs = &x,
                                     .n_xattrs = 1 };

        assert_int_equal(catalog_writer_new(f, &h, &KEY, &w), 0);
        assert_int_equal(catalog_writer_add(w, &up), -EINVAL);
        assert_int_equal(catalog_writer_add(w, &sec), -EINVAL);
        assert_int_equal(catalog_writer_finish(w), -EINVAL); /* one entry announced, none added */
        fclose(f);
        free(buf);
        assert_true(catalog_path_valid("a/b c/d", 7));
        assert_false(catalog_path_valid("a/", 2));
        assert_false(catalog_path_valid("", 0));
        assert_false(catalog_path_valid("./a", 3));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_roundtrip),
                cmocka_unit_test(test_tampered),
                cmocka_unit_test(test_hostile),
                cmocka_unit_test(test_key),
                cmocka_unit_test(test_writer_refuses),
        };
        return UNIT_RUN("catalog", tests);
}
