/* SPDX-License-Identifier: MIT */
/* Logging to stderr; *_errno variants set errno so "%m" prints the error. */
#pragma once

#include <errno.h>

enum log_level { LOG_LVL_ERR = 3, LOG_LVL_WARN = 4, LOG_LVL_INFO = 6, LOG_LVL_DEBUG = 7 };

void log_set_ident(const char *ident);
void log_set_level(int level);
int log_get_level(void);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_get_level() >= LOG_LVL_DEBUG) log_msg(LOG_LVL_DEBUG, __VA_ARGS__); } while (0)

/* Logs with errno set from r (a negative or positive errno), returns -|r|. */
#define log_full_errno(level, r, ...) ({ \
        int _e = (r) < 0 ? -(r) : (r); \
        errno = _e; \
        log_msg(level, __VA_ARGS__); \
        -_e; })
#define log_error_errno(r, ...) log_full_errno(LOG_LVL_ERR, r, __VA_ARGS__)
#define log_warning_errno(r, ...) log_full_errno(LOG_LVL_WARN, r, __VA_ARGS__)
