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
 *   "LIST"         -> "NAME name" for each held fd, then "END" (the guard
 *                    goes on)
 *   "RELEASE"      -> "OK": every held fd closed; the holder exits once
 *                    this client is gone (tierctl release-groups, after its
 *                    check that no stub is left not whole)
 * The holder serves one client at a time, so a new tierd's FETCH is answered
 * only once the previous tierd has gone: two never read one group.
 */
#pragma once

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOLDER_DEFAULT_SOCKET "/run/tierd/holder.sock"
#define HOLDER_MSG_MAX 512
#define HOLDER_NAME_MAX 255
#define HOLDER_MAX_FDS 4096
#define HOLDER_GUARD_AFTER_DEFAULT_MS 30000
#define HOLDER_GUARD_AFTER_MIN_MS 1000
#define HOLDER_GUARD_AFTER_MAX_MS 86400000

/* A group's name in the store: its kind ("pre", "notif", "use") and its
 * filesystem's id, "pre-0123456789abcdef". */
static inline void holder_group_name(char *buf, size_t size, const char *kind, uint64_t fsid) {
        snprintf(buf, size, "%s-%016" PRIx64, kind, fsid);
}

/* Is name a group of kind? Its filesystem's id in *fsid. */
static inline bool holder_group_fsid(const char *name, const char *kind, uint64_t *fsid) {
        size_t k = strlen(kind);
        char *end;
        if (strncmp(name, kind, k) != 0 || name[k] != '-' || strlen(name + k + 1) != 16)
                return false;
        *fsid = strtoull(name + k + 1, &end, 16);
        return *end == 0;
}
