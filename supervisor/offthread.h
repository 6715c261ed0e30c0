/* SPDX-License-Identifier: MIT */
/*
 * Long reads of a whole tree (a catalog snapshot, a collection's walk, an
 * audit's) on a thread of their own, so that the event loop keeps
 * answering readers meanwhile. The work must touch nothing but what it is
 * given: fds it reads through and its own results.
 */
#pragma once

#include <systemd/sd-event.h>

struct offthread;

/* Runs work(userdata) on a new thread; then, on the event loop,
 * done(userdata). *ret (if ret is given) is valid until then. */
int offthread_start(sd_event *event, void (*work)(void *userdata), void (*done)(void *userdata), void *userdata,
                    struct offthread **ret);
/* The caller will not want done() any more (it is going): the thread is
 * left to end, and then release(userdata) is called instead of done(). */
void offthread_abandon(struct offthread *o, void (*release)(void *userdata));
