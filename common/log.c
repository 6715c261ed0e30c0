/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The only process-wide state: what a log line is prefixed with, and how
 * verbose we are. Set once at start by each binary. */
static const char *log_ident = "tierd";
static int log_level = LOG_LVL_INFO;

void log_set_ident(const char *ident) { log_ident = ident; }
void log_set_level(int level) { log_level = level; }
int log_get_level(void) { return log_level; }

void log_msg(int level, const char *fmt, ...) {
        static const char *const names[] = { [LOG_LVL_ERR] = "error", [LOG_LVL_WARN] = "warning",
                                             [LOG_LVL_INFO] = "info", [LOG_LVL_DEBUG] = "debug" };
        int saved = errno;
        char line[2048];
        va_list ap;

        if (level > log_level)
                return;
        va_start(ap, fmt);
        errno = saved; /* vsnprintf's %m reads errno */
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        fprintf(stderr, "%s[%d]: %s: %s\n", log_ident, (int)getpid(), names[level] ? names[level] : "log", line);
        errno = saved;
}
