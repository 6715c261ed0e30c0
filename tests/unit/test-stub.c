/* The security.tierd codec: round trips, and every kind of damage refused. */
#include "unit.h"
#include <errno.h>
#include <stdio.h>
#include "stub.h"

static void sample(struct stub *s) {
        *s = (struct stub){ .state = STUB_PARTIAL, .size = 5000000, .mode = 0100755, .uid = 1000, .gid = 100,
                            .mtime = { 1700000000, 123456789 }, .chunk = 1 << 20, .fcaps_len = 3,
                            .fcaps = { 1, 2, 0xff } };
        strcpy(s->tenant, "alpha");
        memset(s->sha256, 0xab, 32);
        stub_key_for_hash(s->sha256, s->key);
        range_set_add(&s->populated, 0, 1 << 20);
        range_set_add(&s->populated, 3 << 20, 5000000);
}

static void test_round_trip(void **state) {
        struct stub a, b;
        char buf[STUB_TEXT_MAX];
        const char *err = NULL;
        (void)state;
        sample(&a);
        int n = stub_format(&a, buf, sizeof(buf));
        assert_true(n > 0);
        assert_int_equal(stub_parse(buf, (size_t)n, &b, &err), 0);
        assert_string_equal(b.tenant, "alpha");
        assert_int_equal(b.state, STUB_PARTIAL);
        assert_string_equal(b.key, a.key);
        assert_int_equal(b.size, 5000000);
        assert_memory_equal(b.sha256, a.sha256, 32);
        assert_int_equal(b.mode, 0100755);
        assert_int_equal(b.uid, 1000);
        assert_int_equal(b.mtime.tv_sec, 1700000000);
        assert_int_equal(b.mtime.tv_nsec, 123456789);
        assert_int_equal(b.fcaps_len, 3);
        assert_memory_equal(b.fcaps, a.fcaps, 3);
        assert_int_equal(b.populated.n, 2);
        assert_int_equal(b.populated.r[1].end, 5000000);
        assert_int_equal(stub_resident_bytes(&b), (1 << 20) + 5000000 - (3 << 20));
        assert_false(stub_is_whole(&b));
        stub_done(&a);
        stub_done(&b);
}

/* Replace the first occurrence of from by to in a valid record, expect -EINVAL. */
static void expect_rejected(const char *from, const char *to) {
        struct stub a, b;
        char buf[STUB_TEXT_MAX], out[STUB_TEXT_MAX * 2];
        const char *err = NULL;
        sample(&a);
        int n = stub_format(&a, buf, sizeof(buf));
        stub_done(&a);
        char *p = strstr(buf, from);
        assert_non_null(p);
        snprintf(out, sizeof(out), "%.*s%s%s", (int)(p - buf), buf, to, p + strlen(from));
        (void)n;
        int r = stub_parse(out, strlen(out), &b, &err);
        if (r == 0)
                fail_msg("accepted a stub with '%s' replaced by '%s'", from, to);
        assert_int_equal(r, -EINVAL);
        assert_non_null(err);
}

static void test_rejects_damage(void **state) {
        (void)state;
        expect_rejected("v=1\n", "v=2\n");               /* newer version */
        expect_rejected("v=1\n", "");                    /* no version */
        expect_rejected("tenant=alpha", "tenant=al/pha"); /* bad name */
        expect_rejected("state=partial", "state=gone");
        expect_rejected("size=5000000", "size=-1");
        expect_rejected("size=5000000", "size=5000000x");
        expect_rejected("size=5000000", "size=99999999999999999999999");
        expect_rejected("sha256=abab", "sha256=zzab");
        expect_rejected("key=sha256/", "key=../../etc/");
        expect_rejected("mode=100755", "mode=40755");    /* a directory */
        expect_rejected("mtime=1700000000.123456789", "mtime=1700000000");
        expect_rejected("chunk=1048576", "chunk=1000");  /* not a power of two */
        expect_rejected("ranges=0+1048576", "ranges=0+0"); /* empty range */
        expect_rejected("ranges=0+1048576,", "ranges=3145728+10,0+5,"); /* unsorted */
        expect_rejected("ranges=0+1048576", "ranges=0+9999999"); /* past the end */
        expect_rejected("gid=100\n", "gid=100\ngid=100\n"); /* duplicate */
        expect_rejected("gid=100\n", "gid=100\nextra=1\n"); /* unknown key */
        expect_rejected("gid=100\n", "gid=100\nno equals\n");
        expect_rejected("gid=100", "gid=1\x01");        /* control byte */
}

/* The optional manifest root: kept across a round trip, checked when there. */
static void test_manifest(void **state) {
        struct stub a, b;
        char buf[STUB_TEXT_MAX], bad[STUB_TEXT_MAX + 16];
        const char *err = NULL;
        (void)state;
        sample(&a);
        int n = stub_format(&a, buf, sizeof(buf));
        assert_int_equal(stub_parse(buf, (size_t)n, &b, &err), 0);
        assert_false(b.has_manifest); /* a stub without one parses */
        stub_done(&b);
        a.has_manifest = true;
        memset(a.manifest, 0x5a, 32);
        n = stub_format(&a, buf, sizeof(buf));
        assert_non_null(strstr(buf, "manifest=5a5a"));
        assert_int_equal(stub_parse(buf, (size_t)n, &b, &err), 0);
        assert_true(b.has_manifest);
        assert_memory_equal(b.manifest, a.manifest, 32);
        stub_done(&b);
        snprintf(bad, sizeof(bad), "%smanifest=5a\n", buf); /* twice */
        assert_int_equal(stub_parse(bad, strlen(bad), &b, &err), -EINVAL);
        char *m = strstr(buf, "manifest=");
        m[9] = 'z';                                          /* not hex */
        assert_int_equal(stub_parse(buf, strlen(buf), &b, &err), -EINVAL);
        stub_done(&a);
}

/* ctime_max: written for an archived record only, kept across a round
 * trip; a ctime past it (a change tierd may not have heard of) is seen. */
static void test_ctime_max(void **state) {
        struct stub a, b;
        char buf[STUB_TEXT_MAX];
        const char *err = NULL;
        (void)state;
        sample(&a);
        a.state = STUB_ARCHIVED;
        range_set_clear(&a.populated);
        assert_false(stub_ctime_moved(&a, &(struct timespec){ .tv_sec = 2000000000 })); /* none: an older record */
        a.ctime_max = (struct timespec){ .tv_sec = 1700000000, .tv_nsec = 5 };
        int n = stub_format(&a, buf, sizeof(buf));
        assert_non_null(strstr(buf, "ctime_max=1700000000.000000005\n"));
        assert_int_equal(stub_parse(buf, (size_t)n, &b, &err), 0);
        assert_int_equal(b.ctime_max.tv_sec, 1700000000);
        assert_int_equal(b.ctime_max.tv_nsec, 5);
        assert_false(stub_ctime_moved(&b, &(struct timespec){ .tv_sec = 1700000000, .tv_nsec = 5 }));
        assert_true(stub_ctime_moved(&b, &(struct timespec){ .tv_sec = 1700000000, .tv_nsec = 6 }));
        assert_true(stub_ctime_moved(&b, &(struct timespec){ .tv_sec = 1700000001 }));
        /* The record's own write, within the slack: not moved. */
        assert_false(stub_ctime_moved(&b, &(struct timespec){ .tv_sec = 1699999999, .tv_nsec = 980000005 }));
        /* Far before it: the clock stepped back (or whole seconds only). */
        assert_true(stub_ctime_moved(&b, &(struct timespec){ .tv_sec = 1699999999, .tv_nsec = 900000000 }));
        stub_done(&b);
        /* Only an archived record carries one. */
        char *st = strstr(buf, "state=archived");
        assert_non_null(st);
        char bad[STUB_TEXT_MAX + 16];
        snprintf(bad, sizeof(bad), "%.*sstate=dirty%s", (int)(st - buf), buf, st + strlen("state=archived"));
        assert_int_equal(stub_parse(bad, strlen(bad), &b, &err), -EINVAL);
        a.state = STUB_DIRTY;
        n = stub_format(&a, buf, sizeof(buf));
        assert_null(strstr(buf, "ctime_max"));
        stub_done(&a);
}

/* checked: a partial record's only, kept across a round trip, refused
 * anywhere else or with another value; an archived record drops it. */
static void test_checked(void **state) {
        struct stub a, b;
        char buf[STUB_TEXT_MAX], bad[STUB_TEXT_MAX + 16];
        const char *err = NULL;
        (void)state;
        sample(&a);
        int n = stub_format(&a, buf, sizeof(buf));
        assert_null(strstr(buf, "checked"));
        assert_int_equal(stub_parse(buf, (size_t)n, &b, &err), 0);
        assert_false(b.checked); /* an older record: hashed whole once complete */
        stub_done(&b);
        a.checked = true;
        n = stub_format(&a, buf, sizeof(buf));
        assert_non_null(strstr(buf, "checked=1\n"));
        assert_int_equal(stub_parse(buf, (size_t)n, &b, &err), 0);
        assert_true(b.checked);
        stub_done(&b);
        char *c = strstr(buf, "checked=1\n");
        snprintf(bad, sizeof(bad), "%.*schecked=0\n%s", (int)(c - buf), buf, c + strlen("checked=1\n"));
        assert_int_equal(stub_parse(bad, strlen(bad), &b, &err), -EINVAL);
        assert_string_equal(err, "bad checked in stub");
        a.state = STUB_ARCHIVED;
        range_set_clear(&a.populated);
        n = stub_format(&a, buf, sizeof(buf));
        assert_null(strstr(buf, "checked"));
        snprintf(bad, sizeof(bad), "%schecked=1\n", buf);
        assert_int_equal(stub_parse(bad, strlen(bad), &b, &err), -EINVAL); /* not partial */
        stub_done(&a);
}

static void test_rejects_truncation(void **state) {
        struct stub a, b;
        char buf[STUB_TEXT_MAX];
        const char *err = NULL;
        (void)state;
        sample(&a);
        int n = stub_format(&a, buf, sizeof(buf));
        stub_done(&a);
        /* Every strict prefix is refused: no final newline, or keys missing. */
        for (int len = 0; len < n; len++)
                assert_int_equal(stub_parse(buf, (size_t)len, &b, &err), -EINVAL);
        assert_int_equal(stub_parse("v=1\0x\n", 6, &b, &err), -EINVAL); /* NUL */
}

static void test_states(void **state) {
        struct stub a;
        char buf[STUB_TEXT_MAX];
        const char *err;
        (void)state;
        sample(&a);
        a.state = STUB_ARCHIVED; /* ranges are for partial files only */
        int n = stub_format(&a, buf, sizeof(buf));
        struct stub b;
        assert_int_equal(stub_parse(buf, (size_t)n, &b, &err), 0);
        assert_int_equal(b.populated.n, 0);
        assert_true(stub_is_whole(&b));
        assert_int_equal(stub_resident_bytes(&b), 5000000);
        stub_done(&b);
        a.state = STUB_RELEASED;
        n = stub_format(&a, buf, sizeof(buf));
        assert_int_equal(stub_parse(buf, (size_t)n, &b, &err), 0);
        assert_false(stub_is_whole(&b));
        assert_int_equal(stub_resident_bytes(&b), 0);
        stub_done(&b);
        stub_done(&a);
        assert_string_equal(stub_state_to_string(STUB_DIRTY), "dirty");
}

static void test_too_many_ranges(void **state) {
        struct stub a;
        char buf[STUB_TEXT_MAX];
        (void)state;
        sample(&a);
        range_set_clear(&a.populated);
        a.size = 1ull << 40;
        for (uint64_t i = 0; i < STUB_MAX_RANGES + 1; i++)
                range_set_add(&a.populated, i * 8192, i * 8192 + 4096);
        assert_int_equal(stub_format(&a, buf, sizeof(buf)), -E2BIG);
        stub_done(&a);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_rejects_damage),
                cmocka_unit_test(test_rejects_truncation),
                cmocka_unit_test(test_manifest),
                cmocka_unit_test(test_ctime_max),
                cmocka_unit_test(test_checked),
                cmocka_unit_test(test_states),
                cmocka_unit_test(test_too_many_ranges),
        };
        return UNIT_RUN("stub", tests);
}
