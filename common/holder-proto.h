/* SPDX-License-Identifier: MIT */
/*
 * tierd-holder's protocol: a SOCK_SEQPACKET socket, one client at a time,
 * each request answered before the next. A request is one text record:
 *   "STORE name"  with one fd (SCM_RIGHTS)  -> "OK" | "ERR reason"
 *   "REMOVE name"                          -> "OK" | "ERR reason"
 *   "FETCH"        -> "FD name" with one fd, for each held fd, then "END"
 *   "GUARD-AFTER ms"  -> "OK" | "ERR reason": once this client is gone and
 *                    none follows within ms, the holder guards the groups
 *                    (holder/guard.c)
 *   "GUARD"        -> "OK": once this client is gone, guard at once
 * The holder serves one client at a time, so a new tierd's FETCH is answered
 * only once the previous tierd has gone: two never read one group.
 */
#pragma once

#define HOLDER_DEFAULT_SOCKET "/run/tierd/holder.sock"
#define HOLDER_MSG_MAX 512
#define HOLDER_NAME_MAX 255
#define HOLDER_MAX_FDS 4096
#define HOLDER_GUARD_AFTER_DEFAULT_MS 30000
#define HOLDER_GUARD_AFTER_MIN_MS 1000
#define HOLDER_GUARD_AFTER_MAX_MS 86400000
