/* SPDX-License-Identifier: MIT */
/* Logging to stderr; *_errno variants set errno so "%m" prints the error.
 * On a terminal or a file: "IDENT[PID]: LEVEL: message". When stderr is a
 * journal stream (JOURNAL_STREAM, under systemd): "<PRIORITY>IDENT[PID]:
 * message", or whatever a sink (log_set_sink) sends in its place. */
#pragma once

#include <errno.h>

enum log_level { LOG_LVL_ERR = 3, LOG_LVL_WARN = 4, LOG_LVL_INFO = 6, LOG_LVL_DEBUG = 7 };

void log_set_ident(const char *ident);
void log_set_level(int level);
int log_get_level(void);
void log_msg_errno(int level, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define log_msg(level, ...) log_msg_errno(level, 0, __VA_ARGS__)

/* Sends one formatted line (err: its errno, or 0) to the journal itself,
 * with fields; a negative return falls back to the stream. */
typedef int (*log_sink_fn)(int level, int err, const char *ident, const char *line);
void log_set_sink(log_sink_fn sink);
/* "JOURNAL_STREAM=DEV:INO" while stderr is the journal stream it names
 * (for a child's environment: its stderr is the same), else NULL. */
const char *log_stream_env(void);

#define log_error(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_get_level() >= LOG_LVL_DEBUG) log_msg(LOG_LVL_DEBUG, __VA_ARGS__); } while (0)

/* Logs with errno set from r (a negative or positive errno), returns -|r|. */
#define log_full_errno(level, r, ...) ({ \
        int _e = (r) < 0 ? -(r) : (r); \
        errno = _e; \
        log_msg_errno(level, _e, __VA_ARGS__); \
        -_e; })
#define log_error_errno(r, ...) log_full_errno(LOG_LVL_ERR, r, __VA_ARGS__)
#define log_warning_errno(r, ...) log_full_errno(LOG_LVL_WARN, r, __VA_ARGS__)
