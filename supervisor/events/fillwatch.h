/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

/* The fill mount: a second detached clone, through which only fill fds
 * are opened, and a notification group that hears every write through it
 * (FAN_MODIFY on a mount mark). Workers keep what they are lent: a write
 * a worker makes to a file with none of its fills in flight is a
 * violation (fillwatch.c). */

/* The watch group and its mount mark on the fill mount (fsgroup.c makes
 * it); the pre-content and notification groups ignore the fill mount as
 * they do the private mount. */
int fillwatch_open(struct tiered_fs *fs);
int fillwatch_attach(struct tiered_fs *fs);
void fillwatch_close(struct tiered_fs *fs);

struct tfile;
struct stub;
/* f was just recorded whole (s): a share of such files (the tenant's
 * fill_check) is hashed by tierd on a thread against s's SHA-256. */
void fillwatch_cross_check(struct tfile *f, const struct stub *s);

/* Handles the writes queued when called, not those that come meanwhile.
 * A fill's writes are queued before its worker replies, so draining
 * before a reply is taken blames no fill's own writes on nobody. */
void fillwatch_drain(struct tiered_fs *fs);
