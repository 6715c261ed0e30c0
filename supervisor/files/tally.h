/* SPDX-License-Identifier: MIT */
/*
 * A tenant's tallies for status (resident, released and archived bytes,
 * files by state), read in O(1) by TenantStatus, the tenant's properties,
 * GetManagedObjects and tierctl metrics. Kept up to date by every stub
 * tierd writes (tally_stub_write), corrected by a count of the whole tree
 * on a thread (treewalk.h) at a bounded rate, one tenant at a time, and
 * saved in the state directory so a restart starts from the last counts.
 * No status call walks a tree on the event loop.
 */
#pragma once

#include <stdint.h>

#include "stub.h"

struct tenant;

enum { USAGE_RESIDENT, USAGE_ARCHIVED, USAGE_PARTIAL, USAGE_RELEASED, USAGE_DIRTY, _USAGE_MAX };
struct tenant_usage {
        uint64_t files[_USAGE_MAX];
        uint64_t resident_bytes, released_bytes;
        uint64_t archived_bytes; /* content with a copy in the store, local or not */
};

/* The last counts, at once; starts a count in the background when they
 * are older than the bound (TALLY_RECOUNT_MIN, longer for trees that take
 * long to count). */
const struct tenant_usage *tally_read(struct tenant *tn);
/* stub_write_fd, and the tallies follow the change (the stub fd had
 * before, or its size as a file without one). */
int tally_stub_write(struct tenant *tn, int fd, const struct stub *s);
/* The same in two steps, for a stub written elsewhere (a thread,
 * inodework.h): what the file was, read before; then the tallies follow
 * once s is written. */
struct tally_prior {
        struct stub before;
        int had; /* 0: before; -ENODATA: no stub; else unknown */
        uint64_t size;
        bool sized;
};
void tally_prior_read(int fd, struct tally_prior *p);
void tally_count_written(struct tenant *tn, const struct tally_prior *p, const struct stub *s);
void tally_prior_done(struct tally_prior *p);

/* Loads the counts a clean stop saved (else counts in the background). */
void tally_start(struct tenant *tn);
/* Saves the counts, leaves a count in progress to end on its own. */
void tally_stop(struct tenant *tn);
