/* UTF-8 checks and escapes: what may go into a D-Bus string. */
#include "unit.h"
#include "utf8.h"

static void test_valid(void **state) {
        (void)state;
        static const char *const good[] = { "", "plain", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80" };
        static const char *const bad[] = { "\xff", "\xc3", "\xc0\xaf" /* overlong '/' */, "\xed\xa0\x80" /* surrogate */,
                                           "\xf4\x90\x80\x80" /* > U+10FFFF */, "a\xe2\x82",
                                           "\xef\xbf\xbe" /* U+FFFE */, "\xef\xb7\x90" /* U+FDD0 */,
                                           "\xf4\x8f\xbf\xbf" /* U+10FFFF */ };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                assert_true(utf8_valid(good[i], strlen(good[i])));
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_false(utf8_valid(bad[i], strlen(bad[i])));
}

static void test_escape(void **state) {
        (void)state;
        char *s = utf8_escape("a\xff/caf\xc3\xa9\n\xc0\xaf");
        assert_string_equal(s, "a\\xff/caf\xc3\xa9\\x0a\\xc0\\xaf");
        assert_true(utf8_valid(s, strlen(s)));
        free(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_valid),
                cmocka_unit_test(test_escape),
        };
        return UNIT_RUN("utf8", tests);
}
