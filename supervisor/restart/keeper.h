/* SPDX-License-Identifier: MIT */
/*
 * The keeper: a process sharing tierd's fd table (CLONE_FILES) and doing
 * nothing else. If tierd is killed between reading events and recording
 * them in the in-flight record, their fds survive in the keeper, and the next tierd
 * fetches them (pidfd_getfd) by the numbers the record said the read would
 * give: no event is lost, so no reader gets EIO for tierd's death.
 */
#pragma once

#include "tierd.h"

/* Starts this tierd's keeper and puts its pidfd in the fd store. */
int keeper_start(struct tierd *t);
/* A clean exit: the in-flight record is complete, the keeper is not needed. */
void keeper_stop(struct tierd *t);
