/* Range arithmetic: the populated record and fill rounding, and the
 * dispatcher's range bookkeeping (supervisor/events/dispatch.c): the populated
 * record limited to what a stub holds, and the "unverified" set. */
#include "unit.h"
#include <errno.h>
#include "ranges.h"
#include "stub.h"

static void test_add_merges(void **state) {
        struct range_set s = {};
        (void)state;
        assert_int_equal(range_set_add(&s, 10, 20), 0);
        assert_int_equal(range_set_add(&s, 30, 40), 0);
        assert_int_equal(s.n, 2);
        assert_int_equal(range_set_add(&s, 20, 30), 0); /* touching: one range */
        assert_int_equal(s.n, 1);
        assert_int_equal(s.r[0].start, 10);
        assert_int_equal(s.r[0].end, 40);
        assert_int_equal(range_set_add(&s, 0, 5), 0);
        assert_int_equal(range_set_add(&s, 50, 60), 0);
        assert_int_equal(range_set_add(&s, 3, 55), 0); /* swallows everything */
        assert_int_equal(s.n, 1);
        assert_int_equal(s.r[0].start, 0);
        assert_int_equal(s.r[0].end, 60);
        assert_int_equal(range_set_add(&s, 7, 7), 0); /* empty: no-op */
        assert_int_equal(s.n, 1);
        range_set_done(&s);
}

static void test_covers_and_missing(void **state) {
        struct range_set s = {}, m = {};
        (void)state;
        range_set_add(&s, 0, 100);
        range_set_add(&s, 200, 300);
        assert_true(range_set_covers(&s, 0, 100));
        assert_true(range_set_covers(&s, 250, 260));
        assert_false(range_set_covers(&s, 50, 250));
        assert_true(range_set_covers(&s, 5, 5));
        assert_true(range_set_overlaps(&s, 99, 101));
        assert_false(range_set_overlaps(&s, 100, 200));
        assert_int_equal(range_set_missing(&s, 50, 350, &m), 0);
        assert_int_equal(m.n, 2);
        assert_int_equal(m.r[0].start, 100);
        assert_int_equal(m.r[0].end, 200);
        assert_int_equal(m.r[1].start, 300);
        assert_int_equal(m.r[1].end, 350);
        assert_int_equal(range_set_total(&s), 200);
        range_set_done(&s);
        range_set_done(&m);
}

static void test_round_to_chunks(void **state) {
        uint64_t a, b;
        (void)state;
        a = 5000, b = 6000;
        assert_true(range_round_to_chunks(&a, &b, 4096, 1 << 20));
        assert_int_equal(a, 4096);
        assert_int_equal(b, 8192);
        a = 1000, b = 2000; /* clipped to the file size */
        assert_true(range_round_to_chunks(&a, &b, 1 << 20, 1500));
        assert_int_equal(a, 0);
        assert_int_equal(b, 1500);
        a = 2000, b = 3000; /* entirely past the end: nothing */
        assert_false(range_round_to_chunks(&a, &b, 4096, 1500));
        a = UINT64_MAX - 10, b = UINT64_MAX; /* no overflow */
        assert_true(range_round_to_chunks(&a, &b, 4096, UINT64_MAX));
        assert_int_equal(b, UINT64_MAX);
        assert_int_equal(round_up_u64(4097, 4096), 8192);
        assert_int_equal(round_up_u64(0, 4096), 0);
}

/* Sorted, disjoint, not touching (merged) and non-empty: what ranges.h
 * promises of every set, and what a stub's parser demands. */
static void assert_well_formed(const struct range_set *s) {
        for (size_t i = 0; i < s->n; i++) {
                assert_true(s->r[i].start < s->r[i].end);
                if (i > 0)
                        assert_true(s->r[i - 1].end < s->r[i].start);
        }
}

static bool has_range(const struct range_set *s, uint64_t start, uint64_t end) {
        for (size_t i = 0; i < s->n; i++)
                if (s->r[i].start == start && s->r[i].end == end)
                        return true;
        return false;
}

static void test_limit_forgets_the_smallest(void **state) {
        struct range_set s = {};
        (void)state;
        /* Sizes 5, 1, 4, 2, 3 (x 4096), a gap of 1 MiB between each. */
        const uint64_t size[] = { 5, 1, 4, 2, 3 };
        for (uint64_t i = 0; i < 5; i++)
                assert_int_equal(range_set_add(&s, i << 20, (i << 20) + size[i] * 4096), 0);
        assert_int_equal(s.n, 5);
        uint64_t total = range_set_total(&s);
        /* keep in no range (a gap): only the size decides. */
        range_set_limit(&s, 3, (1 << 20) + 8192);
        assert_int_equal(s.n, 3);
        assert_well_formed(&s);
        assert_false(has_range(&s, 1 << 20, (1 << 20) + 4096)); /* size 1: forgotten */
        assert_false(has_range(&s, 3 << 20, (3 << 20) + 2 * 4096)); /* size 2: forgotten */
        assert_true(has_range(&s, 0, 5 * 4096));
        assert_true(has_range(&s, 2 << 20, (2 << 20) + 4 * 4096));
        assert_true(has_range(&s, 4 << 20, (4 << 20) + 3 * 4096));
        assert_int_equal(range_set_total(&s), total - 3 * 4096);
        /* At or under the limit: nothing changes. */
        range_set_limit(&s, 3, 0);
        assert_int_equal(s.n, 3);
        range_set_limit(&s, 64, 0);
        assert_int_equal(s.n, 3);
        assert_int_equal(range_set_total(&s), total - 3 * 4096);
        range_set_done(&s);
}

static void test_limit_never_forgets_keep(void **state) {
        struct range_set s = {};
        (void)state;
        /* A record at the stub's limit, then one more fill completes (as
         * file_record_fill: add [fl->start, fl->end), limit with keep =
         * fl->start) while others are still in flight: the new range is the
         * smallest, and must stay, or its reader would never be let through. */
        for (uint64_t i = 0; i < STUB_MAX_RANGES; i++)
                assert_int_equal(range_set_add(&s, i << 20, (i << 20) + 65536 + i * 4096), 0);
        assert_int_equal(s.n, STUB_MAX_RANGES);
        uint64_t fl_start = (100ull << 20) + 4096, fl_end = fl_start + 4096;
        assert_int_equal(range_set_add(&s, fl_start, fl_end), 0);
        assert_int_equal(s.n, STUB_MAX_RANGES + 1);
        range_set_limit(&s, STUB_MAX_RANGES, fl_start);
        assert_int_equal(s.n, STUB_MAX_RANGES);
        assert_well_formed(&s);
        assert_true(range_set_covers(&s, fl_start, fl_end));
        assert_false(range_set_covers(&s, 0, 65536)); /* the smallest other went */
        assert_true(range_set_covers(&s, 1 << 20, (1 << 20) + 65536 + 4096));
        /* keep anywhere inside the range holds it, not only its start. */
        range_set_limit(&s, 2, fl_end - 1);
        assert_int_equal(s.n, 2);
        assert_true(range_set_covers(&s, fl_start, fl_end));
        /* A limit of 1 keeps keep's range alone, however small. */
        range_set_limit(&s, 1, fl_start);
        assert_int_equal(s.n, 1);
        assert_int_equal(s.r[0].start, fl_start);
        assert_int_equal(s.r[0].end, fl_end);
        range_set_done(&s);
}

static void test_limit_keep_in_a_merged_range(void **state) {
        struct range_set s = {};
        (void)state;
        /* The fill touches ranges already recorded: they merge, and keep
         * (the fill's start, not the merged range's) holds the merged range,
         * the smallest of all. */
        assert_int_equal(range_set_add(&s, 0, 4096), 0);
        assert_int_equal(range_set_add(&s, 1 << 20, 2 << 20), 0);
        assert_int_equal(range_set_add(&s, 4 << 20, (4 << 20) + 65536), 0);
        assert_int_equal(range_set_add(&s, 8192, 12288), 0);
        assert_int_equal(s.n, 4);
        assert_int_equal(range_set_add(&s, 4096, 8192), 0); /* bridges [0,4K) and [8K,12K) */
        assert_int_equal(s.n, 3);
        assert_true(has_range(&s, 0, 12288));
        range_set_limit(&s, 2, 4096);
        assert_int_equal(s.n, 2);
        assert_true(has_range(&s, 0, 12288));
        assert_true(has_range(&s, 1 << 20, 2 << 20));
        assert_false(range_set_overlaps(&s, 4 << 20, (4 << 20) + 65536));
        range_set_done(&s);
}

static void test_limit_range_at_the_file_end(void **state) {
        struct range_set s = {};
        const uint64_t size = (3 << 20) + 1000; /* the last chunk is 1000 bytes */
        (void)state;
        assert_int_equal(range_set_add(&s, 0, 1 << 20), 0);
        assert_int_equal(range_set_add(&s, 2 << 20, (2 << 20) + 65536), 0);
        assert_int_equal(range_set_add(&s, 3 << 20, size), 0);
        range_set_limit(&s, 2, 3 << 20); /* the fill of the short last chunk */
        assert_int_equal(s.n, 2);
        assert_true(has_range(&s, 3 << 20, size));
        assert_true(has_range(&s, 0, 1 << 20));
        /* Half-open: an offset at a range's end is not in it. keep = size
         * holds nothing, and the short last range is the smallest. */
        assert_int_equal(range_set_add(&s, 2 << 20, (2 << 20) + 65536), 0);
        range_set_limit(&s, 2, size);
        assert_int_equal(s.n, 2);
        assert_false(range_set_overlaps(&s, 3 << 20, size));
        /* The chunk rounding of a read there stops at the file's end. */
        uint64_t a = size - 10, b = size + 4096;
        assert_true(range_round_to_chunks(&a, &b, 1 << 20, size));
        assert_int_equal(a, 3 << 20);
        assert_int_equal(b, size);
        range_set_done(&s);
}

static void test_limit_empty_and_single(void **state) {
        struct range_set s = {};
        (void)state;
        range_set_limit(&s, STUB_MAX_RANGES, 0); /* empty: nothing to do, no crash */
        assert_int_equal(s.n, 0);
        range_set_limit(&s, 1, 12345);
        assert_int_equal(s.n, 0);
        assert_int_equal(range_set_total(&s), 0);
        assert_false(range_set_covers(&s, 0, 1));
        assert_true(range_set_covers(&s, 7, 7)); /* an empty range is always covered */
        assert_false(range_set_overlaps(&s, 0, UINT64_MAX));
        assert_int_equal(range_set_add(&s, 10, 20), 0);
        range_set_limit(&s, 1, 99); /* keep elsewhere: one range is at the limit already */
        assert_int_equal(s.n, 1);
        range_set_done(&s);
        assert_int_equal(s.n, 0);
        assert_null(s.r);
}

/* After the limit, the record fits a stub: written and read back the same,
 * the range holding keep included, even with the longest numbers. */
static void test_limit_fits_a_stub(void **state) {
        struct stub a = { .state = STUB_PARTIAL, .size = UINT64_MAX / 2, .mode = 0100644, .chunk = 1 << 20 }, b = {};
        char buf[STUB_TEXT_MAX];
        const char *err = NULL;
        (void)state;
        strcpy(a.tenant, "alpha");
        memset(a.sha256, 0xcd, 32);
        stub_key_for_hash(a.sha256, a.key);
        const uint64_t base = 1ull << 62; /* 19-digit offsets */
        for (uint64_t i = 0; i < STUB_MAX_RANGES + 8; i++)
                assert_int_equal(range_set_add(&a.populated, base + i * 3 * 1000000007ull,
                                               base + i * 3 * 1000000007ull + 1000000007ull + (i == 5 ? 0 : i)), 0);
        assert_int_equal(stub_format(&a, buf, sizeof(buf)), -E2BIG);
        uint64_t keep = base + 5 * 3 * 1000000007ull + 17; /* in one of the two smallest */
        range_set_limit(&a.populated, STUB_MAX_RANGES, keep);
        assert_int_equal(a.populated.n, STUB_MAX_RANGES);
        int n = stub_format(&a, buf, sizeof(buf));
        assert_true(n > 0);
        assert_int_equal(stub_parse(buf, (size_t)n, &b, &err), 0);
        assert_int_equal(b.populated.n, STUB_MAX_RANGES);
        for (size_t i = 0; i < b.populated.n; i++) {
                assert_int_equal(b.populated.r[i].start, a.populated.r[i].start);
                assert_int_equal(b.populated.r[i].end, a.populated.r[i].end);
        }
        assert_true(range_set_covers(&b.populated, keep, keep + 1));
        assert_false(range_set_overlaps(&b.populated, base, base + 1)); /* i = 0, the smallest, went */
        stub_done(&a);
        stub_done(&b);
}

/* The dispatcher's "unverified" set (struct tfile): ranges filled without a
 * manifest to check them, waiting for the whole file's SHA-256. Built the way
 * dispatch.c builds it: in_flight() (not to fetch again) and all_in() (time
 * for the whole-file check) are unions of plain range sets. */
static void union_into(struct range_set *out, const struct range_set *a) {
        for (size_t i = 0; i < a->n; i++)
                assert_int_equal(range_set_add(out, a->r[i].start, a->r[i].end), 0);
}

static void test_unverified_bookkeeping(void **state) {
        struct range_set populated = {}, unverified = {}, fills = {}, busy = {}, fresh = {}, in = {};
        const uint64_t M = 1 << 20, size = 5 * M + 1000;
        (void)state;
        /* Fills complete out of order; adjacent ones merge into one range. */
        assert_int_equal(range_set_add(&unverified, 2 * M, 3 * M), 0);
        assert_int_equal(range_set_add(&unverified, 4 * M, size), 0); /* the short last chunk */
        assert_int_equal(range_set_add(&unverified, 3 * M, 4 * M), 0);
        assert_int_equal(unverified.n, 1);
        assert_true(has_range(&unverified, 2 * M, size));
        assert_well_formed(&unverified);
        assert_int_equal(range_set_add(&populated, 0, M), 0); /* recorded before (a manifest-less partial) */
        assert_int_equal(range_set_add(&fills, M, M + 4096), 0); /* in flight */

        /* A reader of [0, size): only what is neither present, nor in
         * flight, nor unverified is fetched. */
        union_into(&busy, &fills);
        union_into(&busy, &unverified);
        struct range_set missing = {}, gaps = {};
        assert_int_equal(range_set_missing(&populated, 0, size, &missing), 0);
        for (size_t i = 0; i < missing.n; i++)
                assert_int_equal(range_set_missing(&busy, missing.r[i].start, missing.r[i].end, &gaps), 0);
        for (size_t i = 0; i < gaps.n; i++)
                assert_int_equal(range_set_missing(&populated, gaps.r[i].start, gaps.r[i].end, &fresh), 0);
        assert_int_equal(fresh.n, 1);
        assert_true(has_range(&fresh, M + 4096, 2 * M));

        /* Unverified bytes are no reader's: the populated record alone
         * says what a reader may see. */
        assert_false(range_set_covers(&populated, 2 * M, 2 * M + 4096));

        /* all_in: not while a gap is left ... */
        union_into(&in, &populated);
        union_into(&in, &unverified);
        assert_false(range_set_covers(&in, 0, size));
        /* ... then the in-flight fill and the gap come in unverified. */
        assert_int_equal(range_set_add(&unverified, M, M + 4096), 0);
        assert_int_equal(range_set_add(&unverified, M + 4096, 2 * M), 0);
        assert_int_equal(unverified.n, 1);
        assert_true(has_range(&unverified, M, size));
        range_set_clear(&in);
        union_into(&in, &populated);
        union_into(&in, &unverified);
        assert_int_equal(in.n, 1);
        assert_true(range_set_covers(&in, 0, size));
        assert_int_equal(range_set_total(&in), size);

        /* A failed whole-file check punches it all back: cleared, nothing
         * in flight or in (range_set_clear keeps the memory for reuse). */
        range_set_clear(&unverified);
        assert_int_equal(unverified.n, 0);
        assert_int_equal(range_set_total(&unverified), 0);
        assert_false(range_set_overlaps(&unverified, 0, size));
        assert_int_equal(range_set_add(&unverified, 0, 10), 0);
        assert_int_equal(unverified.n, 1);

        range_set_done(&populated);
        range_set_done(&unverified);
        range_set_done(&fills);
        range_set_done(&busy);
        range_set_done(&fresh);
        range_set_done(&in);
        range_set_done(&missing);
        range_set_done(&gaps);
}

/* range_set_missing appends to out: what dispatch.c's waiter_dispatch
 * relies on when it gathers the gaps of several pieces into one set. */
static void test_missing_appends(void **state) {
        struct range_set s = {}, out = {};
        (void)state;
        assert_int_equal(range_set_missing(&s, 100, 200, &out), 0); /* empty set: all missing */
        assert_int_equal(out.n, 1);
        assert_true(has_range(&out, 100, 200));
        assert_int_equal(range_set_missing(&s, 200, 300, &out), 0); /* touching: merged */
        assert_int_equal(out.n, 1);
        assert_true(has_range(&out, 100, 300));
        assert_int_equal(range_set_missing(&s, 50, 50, &out), 0); /* empty range: nothing */
        assert_int_equal(out.n, 1);
        assert_int_equal(range_set_add(&s, 0, 1000), 0);
        assert_int_equal(range_set_missing(&s, 10, 900, &out), 0); /* all present: nothing */
        assert_int_equal(out.n, 1);
        assert_int_equal(range_set_missing(&s, 900, 1100, &out), 0);
        assert_int_equal(out.n, 2);
        assert_true(has_range(&out, 1000, 1100));
        assert_well_formed(&out);
        range_set_done(&s);
        range_set_done(&out);
}

static void test_add_set(void **state) {
        struct range_set a = {}, b = {};
        (void)state;
        assert_int_equal(range_set_add_set(&a, NULL), 0); /* none: nothing */
        assert_int_equal(a.n, 0);
        assert_int_equal(range_set_add(&a, 0, 100), 0);
        assert_int_equal(range_set_add(&b, 100, 200), 0);
        assert_int_equal(range_set_add(&b, 500, 600), 0);
        assert_int_equal(range_set_add_set(&a, &b), 0);
        assert_int_equal(a.n, 2); /* [0, 200) merged, [500, 600) */
        assert_true(has_range(&a, 0, 200));
        assert_true(has_range(&a, 500, 600));
        assert_int_equal(b.n, 2); /* from is left as it was */
        assert_well_formed(&a);
        range_set_done(&a);
        range_set_done(&b);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_add_merges),
                cmocka_unit_test(test_covers_and_missing),
                cmocka_unit_test(test_round_to_chunks),
                cmocka_unit_test(test_limit_forgets_the_smallest),
                cmocka_unit_test(test_limit_never_forgets_keep),
                cmocka_unit_test(test_limit_keep_in_a_merged_range),
                cmocka_unit_test(test_limit_range_at_the_file_end),
                cmocka_unit_test(test_limit_empty_and_single),
                cmocka_unit_test(test_limit_fits_a_stub),
                cmocka_unit_test(test_unverified_bookkeeping),
                cmocka_unit_test(test_missing_appends),
                cmocka_unit_test(test_add_set),
        };
        return UNIT_RUN("ranges", tests);
}
