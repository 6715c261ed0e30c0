/* The store's proxy from the environment, and no_proxy's matching. */
#include "unit.h"
#include <errno.h>
#include <stdlib.h>
#include "proxy.h"

static void clear_env(void) {
        const char *names[] = { "https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY",
                                "no_proxy", "NO_PROXY" };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                unsetenv(names[i]);
}

static void test_bypassed(void **state) {
        (void)state;
        assert_true(proxy_bypassed("*", "s3.example.com"));
        assert_true(proxy_bypassed("example.com", "s3.example.com"));
        assert_true(proxy_bypassed(".example.com", "s3.example.com"));
        assert_true(proxy_bypassed("other, example.com", "EXAMPLE.com"));
        assert_false(proxy_bypassed("example.com", "badexample.com"));
        assert_false(proxy_bypassed("s3.example.com", "example.com"));
        assert_true(proxy_bypassed("10.0.0.0/8", "10.1.2.3"));
        assert_false(proxy_bypassed("10.0.0.0/8", "11.1.2.3"));
        assert_true(proxy_bypassed("127.0.0.3", "127.0.0.3"));
        assert_false(proxy_bypassed("127.0.0.3", "127.0.0.33"));
        assert_true(proxy_bypassed("fd00::/8", "fd12::1"));
        assert_false(proxy_bypassed("fd00::/8", "fe80::1"));
        assert_false(proxy_bypassed("10.0.0.0/33", "10.0.0.1")); /* a range that cannot be */
        assert_false(proxy_bypassed("", "example.com"));
        assert_false(proxy_bypassed(NULL, "example.com"));
        assert_false(proxy_bypassed("*.example.com", "s3.example.com")); /* no wildcards but "*" alone, as curl */
        assert_false(proxy_bypassed("localhost,*", "s3.example.com"));
        assert_true(proxy_bypassed(" * ", "s3.example.com"));
        assert_false(proxy_bypassed("2.3", "10.1.2.3")); /* an address is matched by addresses only */
        assert_true(proxy_bypassed("example.com.", "s3.example.com"));
        assert_true(proxy_bypassed("example.com", "s3.example.com."));
        assert_false(proxy_bypassed(".", "example.com"));
}

static void test_for(void **state) {
        struct proxy p;
        const char *err = NULL;
        (void)state;
        clear_env();
        assert_int_equal(proxy_for("store.example", true, &p, &err), 0);
        setenv("HTTPS_PROXY", "proxy.example:3128", 1);
        assert_int_equal(proxy_for("store.example", true, &p, &err), 1);
        assert_string_equal(p.url, "http://proxy.example:3128");
        assert_string_equal(p.host, "proxy.example");
        assert_int_equal(p.port, 3128);
        /* http:// stores: http_proxy only, as curl (HTTP_PROXY is ignored). */
        assert_int_equal(proxy_for("store.example", false, &p, &err), 0);
        setenv("HTTP_PROXY", "http://ignored:1", 1);
        assert_int_equal(proxy_for("store.example", false, &p, &err), 0);
        setenv("http_proxy", "http://[::1]", 1);
        assert_int_equal(proxy_for("store.example", false, &p, &err), 1);
        assert_string_equal(p.url, "http://[::1]:1080");
        assert_string_equal(p.host, "::1");
        setenv("NO_PROXY", "example", 1);
        assert_int_equal(proxy_for("store.example", false, &p, &err), 0);
        clear_env();
        setenv("ALL_PROXY", "http://p:8080/", 1);
        assert_int_equal(proxy_for("store.example", true, &p, &err), 1);
        assert_int_equal(p.port, 8080);
        setenv("https_proxy", "socks5://p:1080", 1);
        assert_int_equal(proxy_for("store.example", true, &p, &err), -EINVAL);
        assert_non_null(err);
        setenv("https_proxy", "http://user:secret@p:3128", 1);
        assert_int_equal(proxy_for("store.example", true, &p, &err), -EINVAL);
        setenv("https_proxy", "http://p:3128/path", 1);
        assert_int_equal(proxy_for("store.example", true, &p, &err), -EINVAL);
        err = NULL;
        setenv("https_proxy", "http://p:0", 1);
        assert_int_equal(proxy_for("store.example", true, &p, &err), -EINVAL);
        assert_string_equal(err, "a proxy's port is from 1 to 65535");
        setenv("https_proxy", "HTTP://P:3128", 1);
        assert_int_equal(proxy_for("store.example", true, &p, &err), 1);
        assert_int_equal(p.port, 3128);
        clear_env();
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bypassed),
                cmocka_unit_test(test_for),
        };
        return UNIT_RUN("proxy", tests);
}
