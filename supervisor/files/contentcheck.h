/* SPDX-License-Identifier: MIT */
/*
 * Whether an archived file still holds the archived bytes, when a write
 * may have gone unheard (fs->writes_maybe_missed): checked by its SHA-256
 * on a thread, never on the event loop.
 */
#pragma once

#include <stdbool.h>
#include <sys/stat.h>

#include "stub.h"
#include "tierd.h"

/* What a check found for the file as st describes it now (its size, mtime
 * and ctime unchanged since the check began): 1 the archived bytes, 0 other
 * bytes, -ENOENT not checked in that state. */
int content_known(struct tenant *tn, const struct stat *st, const struct stub *s);
/* now describes the file as was did: the same inode, size, mtime and ctime
 * (a write moves mtime and ctime; a truncate, a mode or an xattr, ctime). */
bool content_stat_same(const struct stat *was, const struct stat *now);
/* Starts a check of the file behind fd (as st described it under the
 * release's write lease; call it after the lease is dropped: it opens the
 * file again, read-only), or joins the one queued for it: -EBUSY when the
 * tenant has too many queued. why (a static string) ends its log line. */
int content_check(struct tenant *tn, int fd, const struct stat *st, const struct stub *s, const char *why);
/* Runs callback(userdata) once the checks queued for the file behind fd
 * end: -ENOENT if none is queued. If they are dropped instead (the tenant
 * goes), drop(userdata) runs, if not NULL. */
int content_when_checked(struct tenant *tn, int fd, void (*callback)(void *userdata), void (*drop)(void *userdata),
                         void *userdata);
/* A check of the file behind fd is queued or running: it holds the file
 * open (a release's write lease would fail). */
bool content_check_queued(struct tenant *tn, int fd);
/* The tenant goes: its checks are dropped (their callbacks never run). */
void content_checks_stop(struct tenant *tn);
