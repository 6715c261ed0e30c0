/* Checks of what a remote store answers: hostile headers and ranges. */
#include "unit.h"
#include <errno.h>
#include "http-check.h"

static struct http_meta parse(const char *const *lines) {
        struct http_meta m = {};
        for (; *lines; lines++)
                http_meta_header(&m, *lines, strlen(*lines));
        return m;
}

static void test_ranged_answer(void **state) {
        (void)state;
        const char *ok[] = { "HTTP/1.1 206 Partial Content\r\n", "Content-Length: 4096\r\n",
                             "Content-Range: bytes 1048576-1052671/10485760\r\n", "x-amz-meta-sha256: abc\r\n",
                             "ETag: \"e1\"\r\n", NULL };
        struct http_meta m = parse(ok);
        assert_true(m.have_range);
        assert_int_equal(m.range_start, 1048576);
        assert_int_equal(m.range_end, 1052672);
        assert_string_equal(m.meta_sha256, "abc");
        assert_string_equal(m.etag, "\"e1\"");
        assert_true(http_range_answer_ok(206, &m, 1048576, 1052672));
        assert_false(http_range_answer_ok(206, &m, 1048576, 1052673)); /* not what was asked */
        assert_false(http_range_answer_ok(206, &m, 0, 4096));
        assert_false(http_range_answer_ok(500, &m, 1048576, 1052672));
}

static void test_last_modified(void **state) {
        (void)state;
        const char *h[] = { "HTTP/1.1 200 OK", "Last-Modified: Wed, 21 Oct 2015 07:28:00 GMT\r\n", NULL };
        assert_int_equal(parse(h).last_modified, 1445412480);
        const char *bad[] = { "HTTP/1.1 200 OK", "Last-Modified: yesterday-ish", NULL };
        assert_int_equal(parse(bad).last_modified, 0); /* not said: a collection then deletes nothing */
        const char *reset[] = { "Last-Modified: Wed, 21 Oct 2015 07:28:00 GMT", "HTTP/1.1 200 OK", NULL };
        assert_int_equal(parse(reset).last_modified, 0);
}

static void test_whole_answer(void **state) {
        (void)state;
        const char *whole[] = { "HTTP/1.1 200 OK", "content-length: 100", NULL };
        struct http_meta m = parse(whole);
        assert_true(http_range_answer_ok(200, &m, 0, 100));
        assert_false(http_range_answer_ok(200, &m, 0, 50));  /* a server that ignored Range */
        assert_false(http_range_answer_ok(200, &m, 10, 100));
        const char *nolen[] = { "HTTP/1.1 200 OK", NULL };
        m = parse(nolen);
        assert_false(http_range_answer_ok(200, &m, 0, 100));
}

static void test_hostile_headers(void **state) {
        (void)state;
        const char *bad[][3] = {
                { "HTTP/1.1 206 x", "Content-Range: bytes -1-5/10", NULL },
                { "HTTP/1.1 206 x", "Content-Range: bytes 5-4/10", NULL },
                { "HTTP/1.1 206 x", "Content-Range: bytes 0-18446744073709551615/10", NULL },
                { "HTTP/1.1 206 x", "Content-Range: bytes 0-99999999999999999999999/10", NULL },
                { "HTTP/1.1 206 x", "Content-Range: items 0-5/10", NULL },
                { "HTTP/1.1 206 x", "Content-Range: bytes 0-5", NULL },
                { "HTTP/1.1 206 x", "Content-Range: bytes */10", NULL },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct http_meta m = parse(bad[i]);
                assert_false(m.have_range);
                assert_false(http_range_answer_ok(206, &m, 0, 6));
        }
        const char *len[] = { "HTTP/1.1 200 OK", "Content-Length: -5", NULL };
        struct http_meta m = parse(len);
        assert_false(m.have_length);
        /* A second response (after 100-continue) forgets the first. */
        const char *two[] = { "HTTP/1.1 206 x", "Content-Range: bytes 0-5/10", "HTTP/1.1 500 oops", NULL };
        m = parse(two);
        assert_false(m.have_range);
        /* A 206 whose length disagrees with its range. */
        const char *lies[] = { "HTTP/1.1 206 x", "Content-Range: bytes 0-5/10", "Content-Length: 7", NULL };
        m = parse(lies);
        assert_false(http_range_answer_ok(206, &m, 0, 6));
}

static void test_s3_urls(void **state) {
        char u[128];
        (void)state;
        assert_int_equal(s3_bucket_url("http://127.0.0.1:9000", "bkt", false, u, sizeof(u)), 0);
        assert_string_equal(u, "http://127.0.0.1:9000/bkt/");
        assert_int_equal(s3_bucket_url("https://s3.eu-west-1.amazonaws.com", "bkt", true, u, sizeof(u)), 0);
        assert_string_equal(u, "https://bkt.s3.eu-west-1.amazonaws.com/");
        assert_int_equal(s3_bucket_url("no-scheme", "bkt", true, u, sizeof(u)), -EINVAL);
        assert_int_equal(s3_bucket_url("http://h", "bkt", false, u, 8), -E2BIG);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ranged_answer),
                cmocka_unit_test(test_whole_answer),
                cmocka_unit_test(test_last_modified),
                cmocka_unit_test(test_hostile_headers),
                cmocka_unit_test(test_s3_urls),
        };
        return UNIT_RUN("http-check", tests);
}
