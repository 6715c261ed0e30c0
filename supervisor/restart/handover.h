/* SPDX-License-Identifier: MIT */
/*
 * Where tierd takes over from its predecessor (killed, stopped or upgraded):
 * the groups and the in-flight record come back from the fd store, the
 * fd numbers of events the predecessor read but did not answer are reserved
 * before any new event is read, and those events are then served like new
 * ones and answered by number.
 */
#pragma once

#include "tierd.h"

/* First thing after the policy is read, before tierd opens anything that
 * lives: takes the store's fds and the in-flight record, reserves orphan numbers. */
int handover_begin(struct tierd *t, const char *holder_path, const char *holder_binary);
/* The group fd of fs from the store, or a new one (-ENOENT: make it and
 * handover_store_group() it). */
int handover_take_group(struct tierd *t, const char *kind, uint64_t fsid);
int handover_store_group(struct tierd *t, const char *kind, uint64_t fsid, int fd);
/* Once groups and workers are up, before events are read: serves every
 * orphan, and drops stored groups of filesystems no longer tiered. */
void handover_replay(struct tierd *t);
/* A stop for good (not a handover): the store forgets everything. */
void handover_forget_all(struct tierd *t);
/* A final stop: the groups go to tierd-holder's guard (holder/guard.c),
 * never closed while a stub could read as zeros. */
void handover_stop_for_good(struct tierd *t);
