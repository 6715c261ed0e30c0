/* S3's XML answers (worker/s3xml.c): records and the root's fields read
 * whatever their size and order, entities decoded; a record missing a
 * field or with one too long is skipped; not XML, another root, a cut
 * document or a top field too long: an error. */
#include "unit.h"
#include <errno.h>
#include <stdio.h>
#include "s3xml.h"

struct seen {
        char keys[8][64];
        int n;
        int fail_at; /* return -EINTR at this record (0: never) */
};

static int each(void *ctx, const struct s3xml_field *f, size_t n) {
        struct seen *s = ctx;
        assert_int_equal(n, 2);
        if (s->fail_at && s->n + 1 == s->fail_at)
                return -EINTR;
        snprintf(s->keys[s->n++], sizeof(s->keys[0]), "%s=%s", f[0].value, f[1].value);
        return 0;
}

static char key[64], size[16], truncated[8], token[32];

static int parse(const char *xml, struct seen *s) {
        static struct s3xml_field fields[] = { { "Key", key, sizeof(key), false }, { "Size", size, sizeof(size), false } };
        static struct s3xml_field top[] = { { "IsTruncated", truncated, sizeof(truncated), false },
                                            { "NextContinuationToken", token, sizeof(token), false } };
        struct s3xml_spec spec = { .root = "ListBucketResult", .record = "Contents", .fields = fields, .n_fields = 2,
                                   .each = each, .ctx = s, .top = top, .n_top = 2 };
        return s3xml_parse(xml, strlen(xml), &spec);
}

static void test_listing(void **state) {
        struct seen s = {};
        char big[6000], xml[8000];
        (void)state;
        /* A record over 4 KiB (a long owner name) is read like any other. */
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;
        snprintf(xml, sizeof(xml),
                 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                 "<Name>b</Name><NextContinuationToken>a&amp;b=</NextContinuationToken>"
                 "<Contents><Size>5</Size><Key>p/sha256/a&amp;b</Key><Owner><ID>o</ID></Owner></Contents>"
                 "<Contents><Key>p/two</Key><Owner><DisplayName>%s</DisplayName></Owner><Size>7</Size></Contents>"
                 "<Contents><Key>p/no-size</Key></Contents>"
                 "<IsTruncated>true</IsTruncated></ListBucketResult>",
                 big);
        assert_int_equal(parse(xml, &s), 0);
        assert_int_equal(s.n, 2);
        assert_string_equal(s.keys[0], "p/sha256/a&b=5");
        assert_string_equal(s.keys[1], "p/two=7");
        assert_string_equal(truncated, "true");
        assert_string_equal(token, "a&b=");
}

static void test_skipped_and_refused(void **state) {
        struct seen s = {};
        (void)state;
        /* A key longer than the buffer: not one of ours, skipped. */
        assert_int_equal(parse("<ListBucketResult><Contents><Key>"
                               "0123456789012345678901234567890123456789012345678901234567890123456789"
                               "</Key><Size>1</Size></Contents><Contents><Key>k</Key><Size>2</Size></Contents>"
                               "</ListBucketResult>",
                               &s),
                         0);
        assert_int_equal(s.n, 1);
        assert_string_equal(s.keys[0], "k=2");
        assert_int_equal(parse("<Error><Code>SlowDown</Code></Error>", &s), -EIO);
        assert_int_equal(parse("<ListBucketResult><Contents><Key>k</Key>", &s), -EIO); /* cut short */
        assert_int_equal(parse("not xml", &s), -EIO);
        assert_int_equal(parse("", &s), -EIO);
        assert_int_equal(parse("<ListBucketResult><NextContinuationToken>0123456789012345678901234567890123"
                               "</NextContinuationToken></ListBucketResult>",
                               &s),
                         -E2BIG);
        struct seen f = { .fail_at = 2 };
        assert_int_equal(parse("<ListBucketResult><Contents><Key>a</Key><Size>1</Size></Contents>"
                               "<Contents><Key>b</Key><Size>1</Size></Contents>"
                               "<Contents><Key>c</Key><Size>1</Size></Contents></ListBucketResult>",
                               &f),
                         -EINTR);
        assert_int_equal(f.n, 1);
        /* An entity bomb is refused by expat, not expanded. */
        assert_int_equal(parse("<!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">"
                               "<!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\"><!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\">"
                               "<!ENTITY e \"&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;\"><!ENTITY f \"&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;\">"
                               "<!ENTITY g \"&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;\"><!ENTITY h \"&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;\">]>"
                               "<ListBucketResult><Name>&h;</Name></ListBucketResult>",
                               &s),
                         -EIO);
}

static void test_root(void **state) {
        (void)state;
        const char *ok = "<CompleteMultipartUploadResult><ETag>\"x-2\"</ETag></CompleteMultipartUploadResult>";
        const char *err = "<?xml version=\"1.0\"?>\n<Error><Code>InternalError</Code></Error>";
        assert_true(s3xml_root_is(ok, strlen(ok), "CompleteMultipartUploadResult"));
        assert_false(s3xml_root_is(err, strlen(err), "CompleteMultipartUploadResult"));
        assert_false(s3xml_root_is(ok, strlen(ok) - 3, "CompleteMultipartUploadResult"));
        /* The whitespace S3 sends to keep a long completion alive. */
        const char *padded = "\n  \n <?xml version=\"1.0\"?>\n<CompleteMultipartUploadResult/>";
        assert_true(s3xml_root_is(padded, strlen(padded), "CompleteMultipartUploadResult"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_listing),
                cmocka_unit_test(test_skipped_and_refused),
                cmocka_unit_test(test_root),
        };
        return UNIT_RUN("s3xml", tests);
}
