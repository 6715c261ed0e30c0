/* Backend URLs and sizes. */
#include "unit.h"
#include <errno.h>
#include "size.h"
#include "url.h"

static void test_file_url(void **state) {
        struct backend_url u;
        const char *err = NULL;
        (void)state;
        assert_int_equal(backend_url_parse("file:///var/lib/tierd/store/", &u, &err), 0);
        assert_int_equal(u.kind, BACKEND_FILE);
        assert_string_equal(u.path, "/var/lib/tierd/store");
        backend_url_done(&u);
        assert_int_equal(backend_url_parse("file://relative", &u, &err), -EINVAL);
        assert_non_null(err);
        assert_int_equal(backend_url_parse("file:///a/../etc", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("ftp://x/y", &u, &err), -EINVAL);
}

static void test_s3_and_http_urls(void **state) {
        struct backend_url u;
        const char *err = NULL;
        (void)state;
        assert_int_equal(backend_url_parse("s3://my-bucket/tenants/alpha/", &u, &err), 0);
        assert_int_equal(u.kind, BACKEND_S3);
        assert_string_equal(u.bucket, "my-bucket");
        assert_string_equal(u.prefix, "tenants/alpha");
        backend_url_done(&u);
        assert_int_equal(backend_url_parse("s3://bkt", &u, &err), 0);
        assert_string_equal(u.prefix, "");
        backend_url_done(&u);
        assert_int_equal(backend_url_parse("https://store.example:8443/data/a", &u, &err), 0);
        assert_int_equal(u.kind, BACKEND_HTTP);
        assert_string_equal(u.base, "https://store.example:8443");
        assert_string_equal(u.prefix, "data/a");
        backend_url_done(&u);
        assert_int_equal(backend_url_parse("s3://Bad_Bucket/p", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("s3://ab", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("s3://bkt/a//b", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("s3://bkt/a/../b", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("s3://bkt/a b", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("http://user:pw@host/p", &u, &err), -EINVAL);
        assert_string_equal(err, "no user:password@ in a store's URL (credentials have keys of their own)");
        assert_int_equal(backend_url_parse("http:///p", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("http://host/p?x=1", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("http://host/p#f", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("http://ho st/p", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("http://host:99999/p", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("http://[::1/p", &u, &err), -EINVAL);
        assert_int_equal(backend_url_parse("http://[::1]:9000/objects/web", &u, &err), 0);
        assert_string_equal(u.base, "http://[::1]:9000");
        assert_string_equal(u.prefix, "objects/web");
        backend_url_done(&u);
}

/* curl_url() reads them: the host without brackets, the scheme's port. */
/* AWS's domain: the China regions' own. */
static void test_aws_domain(void **state) {
        (void)state;
        assert_string_equal(aws_domain("eu-west-1"), "amazonaws.com");
        assert_string_equal(aws_domain(NULL), "amazonaws.com");
        assert_string_equal(aws_domain("cn-north-1"), "amazonaws.com.cn");
        assert_string_equal(aws_domain("cn-northwest-1"), "amazonaws.com.cn");
        assert_string_equal(aws_domain("us-gov-west-1"), "amazonaws.com");
}

static void test_http_url(void **state) {
        struct http_url h;
        const char *err = NULL;
        (void)state;
        assert_int_equal(http_url_parse("https://s3.eu-west-1.amazonaws.com", &h, &err), 0);
        assert_string_equal(h.host, "s3.eu-west-1.amazonaws.com");
        assert_int_equal(h.port, 443);
        assert_true(h.tls);
        assert_string_equal(h.path, "");
        assert_string_equal(h.base, "https://s3.eu-west-1.amazonaws.com");
        http_url_done(&h);
        assert_int_equal(http_url_parse("http://[fd00::5]:8080/a/b", &h, &err), 0);
        assert_string_equal(h.host, "fd00::5");
        assert_int_equal(h.port, 8080);
        assert_false(h.tls);
        assert_string_equal(h.path, "a/b");
        http_url_done(&h);
        assert_int_equal(http_url_parse("http://127.0.0.1", &h, &err), 0);
        assert_int_equal(h.port, 80);
        http_url_done(&h);
        assert_int_equal(http_url_parse("ftp://host/", &h, &err), -EINVAL);
        assert_int_equal(http_url_parse("http://[fe80::1%25eth0]/", &h, &err), -EINVAL);
        assert_string_equal(err, "no IPv6 zone id in a store's URL");
        assert_int_equal(http_url_parse("http://u@host/", &h, &err), -EINVAL);
        assert_int_equal(http_url_parse("http://b\xc3\xbc" "cher.example/", &h, &err), -EINVAL);
        assert_string_equal(err, "a store's host is ASCII (an IDN in its punycode form: xn--...)");
}

static void test_sizes(void **state) {
        uint64_t v;
        (void)state;
        assert_int_equal(size_parse("4096", &v), 0);
        assert_int_equal(v, 4096);
        assert_int_equal(size_parse("512K", &v), 0);
        assert_int_equal(v, 512 * 1024);
        assert_int_equal(size_parse("10G", &v), 0);
        assert_int_equal(v, 10ull << 30);
        assert_int_equal(size_parse("1MiB", &v), 0);
        assert_int_equal(v, 1 << 20);
        assert_int_equal(size_parse("", &v), -EINVAL);
        assert_int_equal(size_parse("-1", &v), -EINVAL);
        assert_int_equal(size_parse("10X", &v), -EINVAL);
        assert_int_equal(size_parse("1.5G", &v), -EINVAL);
        assert_int_equal(size_parse("99999999999999999999", &v), -ERANGE);
        assert_int_equal(size_parse("17179869184G", &v), -ERANGE);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_file_url),
                cmocka_unit_test(test_s3_and_http_urls),
                cmocka_unit_test(test_http_url), cmocka_unit_test(test_aws_domain),
                cmocka_unit_test(test_sizes),
        };
        return UNIT_RUN("url", tests);
}
