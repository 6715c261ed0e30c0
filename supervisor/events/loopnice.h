/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * The thread that answers every tenant's readers runs ahead of them: on a
 * busy machine it otherwise waits for the CPU behind the readers it wakes
 * (each answer wakes every reader blocked on the group) and behind a
 * tenant's worker threads, and one tenant's storm becomes everyone's wait.
 * Only that thread: the threads and processes it starts go back.
 */

/* The event loop's nice value: weight 9548 against a reader's 1024. The
 * unit starts tierd there already (Nice=), without CAP_SYS_NICE. */
#define LOOP_NICE (-10)

/* Raise the calling thread to LOOP_NICE if it is below; warns if it may not. */
void loop_nice_raise(void);

/* Back to nice 0, for a thread or a forked child of the loop. Only from a
 * negative nice: from a positive one (tierd started niced) it would need
 * CAP_SYS_NICE, and the caller keeps tierd's nice then. Async-signal-safe. */
void loop_nice_leave(void);
