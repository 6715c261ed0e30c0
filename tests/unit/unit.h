/* Common includes for the cmocka unit tests. */
#pragma once
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <stdlib.h>

static inline int unit_run(const char *name, const struct CMUnitTest *tests, size_t n) {
        cmocka_set_message_output(CM_OUTPUT_TAP);
        return _cmocka_run_group_tests(name, tests, n, NULL, NULL);
}
#define UNIT_RUN(name, tests) unit_run(name, tests, sizeof(tests) / sizeof((tests)[0]))
