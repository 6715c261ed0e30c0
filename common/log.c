/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The only process-wide state: what a log line is prefixed with, how
 * verbose we are, and where stderr goes. Set once at start by each binary. */
static const char *log_ident = "tierd";
static int log_level = LOG_LVL_INFO;
static log_sink_fn log_sink;
/* "JOURNAL_STREAM=DEV:INO" when stderr is a journal stream, else "". */
static char stream_env[64];

/* Under systemd, stderr is a journal stream and JOURNAL_STREAM names its
 * device and inode; a child with stderr redirected elsewhere inherits the
 * variable but not the stream, hence the fstat. */
static void detect_stream(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        int n = 0;

        stream_env[0] = 0;
        if (e && sscanf(e, "%llu:%llu%n", &dev, &ino, &n) == 2 && e[n] == 0 && fstat(STDERR_FILENO, &st) == 0 &&
            (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino)
                snprintf(stream_env, sizeof(stream_env), "JOURNAL_STREAM=%llu:%llu", dev, ino);
}

void log_set_ident(const char *ident) {
        log_ident = ident;
        detect_stream();
}
void log_set_level(int level) { log_level = level; }
int log_get_level(void) { return log_level; }
void log_set_sink(log_sink_fn sink) { log_sink = sink; }
const char *log_stream_env(void) { return stream_env[0] ? stream_env : NULL; }

void log_msg_errno(int level, int err, const char *fmt, ...) {
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
        /* A journal stream: the priority as a "<N>" prefix (journald takes
         * it for the line's PRIORITY), and the sink, if any, sends the
         * line with its fields instead. Elsewhere: plain text. */
        if (!stream_env[0])
                fprintf(stderr, "%s[%d]: %s: %s\n", log_ident, (int)getpid(), names[level] ? names[level] : "log", line);
        else if (!log_sink || log_sink(level, err, log_ident, line) < 0)
                fprintf(stderr, "<%d>%s[%d]: %s\n", level, log_ident, (int)getpid(), line);
        errno = saved;
}
