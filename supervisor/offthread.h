/* SPDX-License-Identifier: MIT */
/*
 * Long reads of a whole tree (a catalog snapshot, a collection's walk, an
 * audit's) on a thread of their own, so that the event loop keeps
 * answering readers meanwhile. The work must touch nothing but what it is
 * given: fds it reads through and its own results.
 *
 * The thread has an fd table of its own, with stdio and the fds in keep[]
 * (the same numbers) only: what it opens never takes an fd number the
 * event loop named in advance for an event. So an fd it opens cannot be
 * handed back to the loop, the fds it was given are its copies (closing
 * one leaves the loop's open), and /proc/thread-self/fd, not
 * /proc/self/fd, is where it finds them by path.
 */
#pragma once

#include <systemd/sd-event.h>

struct offthread;

/* Runs work(userdata) on a new thread that keeps the n_keep (at most 4)
 * fds of keep; then, on the event loop, done(userdata). *ret (if ret is
 * given) is valid until then. */
int offthread_start(sd_event *event, const int *keep, size_t n_keep, void (*work)(void *userdata),
                    void (*done)(void *userdata), void *userdata, struct offthread **ret);
/* The caller will not want done() any more (it is going): the thread is
 * left to end, and then release(userdata) is called instead of done(). */
void offthread_abandon(struct offthread *o, void (*release)(void *userdata));
/* Threads not joined yet (at an exit: nothing waits for them). */
unsigned offthread_running(void);

#ifdef TIERD_TEST_HOOKS
/* Test builds: runs work(userdata) on a thread set up as offthread_start's
 * are (keeping stdio only) and waits for it to end. */
int offthread_test_run(void (*work)(void *userdata), void *userdata);
/* Test builds: a thread's work that takes its time (a slow disk, a user
 * database that waits for the network): sleeps the milliseconds the
 * environment variable env says, if set, logging "test build: what
 * pauses N ms". */
void offthread_test_pause(const char *env, const char *what);
#else
static inline void offthread_test_pause(const char *env, const char *what) {
        (void)env, (void)what;
}
#endif
