/* SPDX-License-Identifier: MIT */
/*
 * tierd's log lines straight into the journal, with fields to filter on
 * (journalctl TENANT=alpha, journalctl -p err): what a line is about, from
 * the words tierd's messages name their subjects with: TENANT= the word
 * after "tenant ", CONTAINER= after "container ", OBJECT= the first object
 * key (sha256/...), PATH= the first absolute path (up to a space); and
 * ERRNO= for the *_errno lines.
 *
 * journald's native protocol (one datagram of fields on
 * /run/systemd/journal/socket), written here rather than sd_journal_send(),
 * which blocks while journald is behind: a log line must never hold up the
 * event loop. A datagram the socket cannot take now is dropped and
 * counted, and the next line that goes says how many.
 */
#include "journallog.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdio.h"
#include "log.h"

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

static int journal_fd = -1;
static unsigned long long dropped;

/* The first word (up to a space, ':', ',', ')' or a quote) that follows
 * "AFTER" (at the line's start or after a space or '('), or, with AFTER
 * "", that starts with PREFIX; "" if none. */
static void find_word(const char *line, const char *after, const char *prefix, char *out, size_t size) {
        const char *key = after[0] ? after : prefix;
        size_t skip = strlen(after);
        out[0] = 0;
        for (const char *p = line; (p = strstr(p, key)); p++) {
                if (p != line && p[-1] != ' ' && p[-1] != '(')
                        continue;
                size_t k = strcspn(p + skip, " :,)'\"");
                if (k > 0 && k < size)
                        snprintf(out, size, "%.*s", (int)k, p + skip);
                return;
        }
}

struct datagram {
        char buf[4096];
        size_t len;
        bool full;
};

static void put_binary(struct datagram *d, const char *name, const char *value);

/* NAME=VALUE\n; nothing if VALUE is "" (one with a newline goes in the
 * binary form: a newline would end the field). */
static void put(struct datagram *d, const char *name, const char *value) {
        if (!value[0])
                return;
        if (strchr(value, '\n')) {
                put_binary(d, name, value);
                return;
        }
        int k = snprintf(d->buf + d->len, sizeof(d->buf) - d->len, "%s=%s\n", name, value);
        if (k < 0 || (size_t)k >= sizeof(d->buf) - d->len)
                d->full = true;
        else
                d->len += (size_t)k;
}

/* The protocol's binary form (NAME\n, the length as 64-bit little-endian,
 * the bytes, \n): any byte may be in VALUE. */
static void put_binary(struct datagram *d, const char *name, const char *value) {
        size_t nl = strlen(name), vl = strlen(value);
        if (d->len + nl + 1 + 8 + vl + 1 > sizeof(d->buf)) {
                d->full = true;
                return;
        }
        memcpy(d->buf + d->len, name, nl);
        d->buf[d->len + nl] = '\n';
        d->len += nl + 1;
        for (int i = 0; i < 8; i++)
                d->buf[d->len++] = (char)(((uint64_t)vl >> (8 * i)) & 0xff);
        memcpy(d->buf + d->len, value, vl);
        d->len += vl;
        d->buf[d->len++] = '\n';
}

static int journal_sink(int level, int err, const char *ident, const char *line) {
        char num[32], tenant[80], container[80], object[160], path[512], message[2300];
        struct datagram d = { .len = 0 };

        /* The loop's thread only: offthread.c's threads have fd tables of
         * their own (unshare(CLONE_FILES)), where journal_fd is not the
         * socket; their lines go on the stream. */
        if (gettid() != getpid())
                return -1;
        if (journal_fd < 0 && (journal_fd = unix_connect(JOURNAL_SOCKET, SOCK_DGRAM | SOCK_NONBLOCK, 0)) < 0) {
                journal_fd = -1;
                return -1; /* no journald to talk to: the stream has the line */
        }
        if (dropped)
                snprintf(message, sizeof(message), "%s (%llu earlier line(s) dropped: the journal was behind)", line,
                         dropped);
        else
                snprintf(message, sizeof(message), "%s", line);
        find_word(line, "tenant ", "", tenant, sizeof(tenant));
        find_word(line, "container ", "", container, sizeof(container));
        find_word(line, "", "sha256/", object, sizeof(object));
        find_word(line, "", "/", path, sizeof(path));

        snprintf(num, sizeof(num), "%d", level);
        put(&d, "PRIORITY", num);
        put(&d, "SYSLOG_IDENTIFIER", ident);
        put(&d, "TENANT", tenant);
        put(&d, "CONTAINER", container);
        put(&d, "OBJECT", object);
        put(&d, "PATH", path);
        snprintf(num, sizeof(num), "%d", err);
        put(&d, "ERRNO", err > 0 ? num : "");
        put_binary(&d, "MESSAGE", message);
        if (d.full)
                return -1;
        if (send(journal_fd, d.buf, d.len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
                if (errno == EAGAIN) {
                        dropped++;
                        return 0;
                }
                close(journal_fd); /* journald restarted, say: connect again next time */
                journal_fd = -1;
                return -1;
        }
        dropped = 0;
        return 0;
}

void journallog_start(void) {
        if (log_stream_env())
                log_set_sink(journal_sink);
}
