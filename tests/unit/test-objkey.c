/* The keys tierd makes in a store, and what a listing may hold that is
 * not one of them (never collected). */
#include "unit.h"
#include <errno.h>
#include "objkey.h"

static void round_trip(const struct proto_object *o, const char *want) {
        char key[STUB_KEY_MAX];
        struct proto_object back;
        object_key_format(o, key);
        assert_string_equal(key, want);
        assert_int_equal(object_key_parse(key, &back), 0);
        assert_int_equal(back.kind, o->kind);
        assert_int_equal(back.seq, o->seq);
        assert_int_equal(back.epoch, o->epoch);
        assert_memory_equal(back.hash, o->hash, 32);
}

static void test_round_trips(void **state) {
        struct proto_object o = { .kind = PROTO_OBJECT_DATA };
        (void)state;
        for (int i = 0; i < 32; i++)
                o.hash[i] = (uint8_t)(i * 7 + 1);
        round_trip(&o, "sha256/01080f161d242b323940474e555c636a71787f868d949ba2a9b0b7bec5ccd3da");
        o.kind = PROTO_OBJECT_MANIFEST;
        round_trip(&o, "manifest/01080f161d242b323940474e555c636a71787f868d949ba2a9b0b7bec5ccd3da");
        o.kind = PROTO_OBJECT_TRACE;
        round_trip(&o, "trace/01080f161d242b323940474e555c636a71787f868d949ba2a9b0b7bec5ccd3da");
        round_trip(&(struct proto_object){ .kind = PROTO_OBJECT_JOURNAL, .seq = 0x1234 }, "catalog/journal/0000000000001234");
        round_trip(&(struct proto_object){ .kind = PROTO_OBJECT_SNAPSHOT, .seq = 7, .epoch = 0xab },
                   "catalog/snapshot/0000000000000007.000000ab");
        assert_string_equal(object_kind_prefix(PROTO_OBJECT_SNAPSHOT), "catalog/snapshot/");
        assert_null(object_kind_prefix(99));
}

static void test_not_ours(void **state) {
        static const char *const keys[] = {
                "sha256/0000000000000000000000000000000000000000000000000000000000000000x", /* one too many */
                "sha256/000000000000000000000000000000000000000000000000000000000000000",  /* one too few */
                "sha256/AAAA000000000000000000000000000000000000000000000000000000000000", /* uppercase */
                "sha256/000000000000000000000000000000000000000000000000000000000000000g",
                "sha256/", "sha256", "", "other/thing", "sha256/../x",
                "trace/app", "trace/Deployment/web", /* a trace's name itself: not a key of tierd's */
                "sha256/0000000000000000000000000000000000000000000000000000000000000000.tmp.12.ab",
                "manifest/00", "catalog/journal/123", "catalog/journal/000000000000000g",
                "catalog/journal/00000000000000001", "catalog/snapshot/0000000000000007",
                "catalog/snapshot/0000000000000007_000000ab", "catalog/snapshot/0000000000000007.000000ab.x",
                "catalog/epoch/00000001", "catalog/snapshots/00000001", "/sha256/0000",
        };
        (void)state;
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                struct proto_object o = { .kind = 77 };
                assert_int_equal(object_key_parse(keys[i], &o), -EINVAL);
                assert_int_equal(o.kind, 0); /* nothing half-parsed */
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trips),
                cmocka_unit_test(test_not_ours),
        };
        return UNIT_RUN("objkey", tests);
}
