/* SPDX-License-Identifier: MIT */
/*
 * tierd-holder's protocol: a SOCK_SEQPACKET socket, one client at a time,
 * each request answered before the next. A request is one text record:
 *   "STORE name"  with one fd (SCM_RIGHTS)  -> "OK" | "ERR reason"
 *   "REMOVE name"                          -> "OK" | "ERR reason"
 *   "FETCH"        -> "FD name" with one fd, for each held fd, then "END"
 * The holder serves one client at a time, so a new tierd's FETCH is answered
 * only once the previous tierd has gone: two never read one group.
 */
#pragma once

#define HOLDER_DEFAULT_SOCKET "/run/tierd/holder.sock"
#define HOLDER_MSG_MAX 512
#define HOLDER_NAME_MAX 255
#define HOLDER_MAX_FDS 4096
