/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

int worker_start(struct worker *w);
/* Closes the control socket (the worker exits at end of stream) and waits. */
void worker_stop(struct worker *w);
/* New settings: the worker is replaced; nothing in flight is lost or
 * blamed. */
void worker_restart_planned(struct worker *w);
/* Handover: kills it at once and answers nothing. */
void worker_abandon(struct worker *w);
/* Kills from at once and gives what it had in flight to to (a container's
 * worker going away: the tenant's host worker finishes its work). */
void worker_hand_over(struct worker *from, struct worker *to);
/* Takes ownership of req (and req->fd). On a failed worker, or if it cannot
 * be sent, req->done runs at once with -EIO. */
void worker_submit(struct worker *w, struct request *req);
/* req, a prefetch fill (PROTO_FILL_PREFETCH), has a reader waiting for it
 * now: from here on it is a reader's fill (sent again so after a crash),
 * in the worker too if it has not started there. */
void worker_promote(struct worker *w, struct request *req);
bool worker_idle(const struct worker *w);
/* Hands what changed of the tenant's (UPDATE_*: credentials, header lines,
 * its store's addresses) to a running worker; one that starts later gets
 * them with its config. */
void worker_send_update(struct worker *w, unsigned what);
const char *worker_state_to_string(enum worker_state s);

struct request *request_new(int type, int fd, void (*done)(struct request *, const struct proto_reply *),
                            void *userdata);
/* The same, but fd stays the caller's and must outlive the request. */
struct request *request_new_borrowing(int type, int fd, void (*done)(struct request *, const struct proto_reply *),
                                      void *userdata);
