/* SPDX-License-Identifier: MIT */
/*
 * Who is asking, learnt without waiting: the bus's record of each caller,
 * asked once per connection and never waited for (callers.c), and the
 * methods put aside until it is in.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

struct caller_creds {
        uid_t uid;        /* the bus's UnixUserID: the caller's euid when it connected */
        bool have_groups; /* the bus said them (UnixGroupIDs) */
        size_t n_groups;
        gid_t *groups;
};

/* The sender of m, as the bus recorded it. 0 and *ret (valid until the
 * handler returns): known. > 0: being asked; m is put aside and will be
 * dispatched again when the answer is in (the handler returns 1 at once,
 * having done and replied nothing). < 0: not known (error set). */
int callers_lookup(sd_bus_message *m, const struct caller_creds **ret, sd_bus_error *error);
/* Puts m, whose caller is uid, aside until callers_wake_all (a lookup of
 * another kind: access.c's, in the user database): 1, or < 0 with error
 * set (too many of uid's, or of all, put aside). */
int callers_wait(sd_bus_message *m, uid_t uid, sd_bus_error *error);
/* Dispatches again every method put aside (their handlers run anew). */
void callers_wake_all(void);
/* The bus is closing: every method put aside is answered ShuttingDown,
 * and what was learnt is forgotten (a new connection's names may repeat). */
void callers_close(void);
