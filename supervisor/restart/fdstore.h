/* SPDX-License-Identifier: MIT */
/*
 * Where tierd keeps the fds that must outlive it (fanotify groups, the
 * in-flight record): systemd's fd store when systemd runs tierd
 * ($NOTIFY_SOCKET; the next tierd gets them as $LISTEN_FDS), otherwise
 * tierd-holder on a unix socket (started by tierd when none listens).
 * A holder that listens is used even under systemd: only it can guard the
 * groups while no tierd runs (holder/guard.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fdstore_kind { FDSTORE_NONE, FDSTORE_SYSTEMD, FDSTORE_HOLDER };

struct fdstore_entry {
        char *name;
        int fd; /* -1 once taken */
};

struct fdstore {
        enum fdstore_kind kind;
        int holder_sock;
        const char *holder_path, *holder_binary; /* NULL: no holder (--no-holder) */
        struct fdstore_entry *inherited; /* handed over by the predecessor */
        size_t n_inherited;
};

/* Is tierd run by systemd with an fd store? */
bool systemd_fd_store_usable(void);

/* Connects to the store and collects what it holds. holder_path NULL: no
 * store (a warning says what that costs). holder_binary: started when no
 * holder listens on holder_path. */
int fdstore_open(struct fdstore *s, const char *holder_path, const char *holder_binary);
/* The inherited fd stored under name (the caller owns it; it stays stored),
 * or -ENOENT. */
int fdstore_take(struct fdstore *s, const char *name);
/* Stores a copy of fd under name. Done before tierd relies on it. */
int fdstore_put(struct fdstore *s, const char *name, int fd);
/* Drops name from the store (its fd closes there). */
int fdstore_forget(struct fdstore *s, const char *name);
/* The holder's guard starts after usec without a tierd (nothing to do
 * with systemd's store, which has no guard). */
int fdstore_guard_after(struct fdstore *s, uint64_t usec);
/* From systemd's store to tierd-holder (started if none listens), for
 * what is stored from now on: systemd empties its store when the unit
 * stops for good. */
int fdstore_to_holder(struct fdstore *s);
/* This tierd serves: the holder's guard_after counts from its death. */
void fdstore_ready(struct fdstore *s);
/* The holder guards the groups at once when this tierd is gone. */
int fdstore_guard(struct fdstore *s);
/* Moves every fd the store module holds to numbers at or above min. */
int fdstore_move_above(struct fdstore *s, int min);
/* Closes inherited fds nobody took. */
void fdstore_done(struct fdstore *s);
