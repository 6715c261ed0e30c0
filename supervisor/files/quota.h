/* SPDX-License-Identifier: MIT */
/*
 * Quotas: where the policy engine's release decisions are carried out.
 * A fill that would take a tenant over its quota first releases its least
 * recently used files; if that cannot make room the reader gets EDQUOT and
 * the manager signals QuotaPressure. Above the high watermark, files are
 * released down to the low one.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "tierd.h"

/* May need more bytes be filled into the file open as fd? 0, -EDQUOT, or
 * -EAGAIN: ask again after dispatch_quota_retry() (the store is being asked
 * whether files that would make room may be released).
 * Admitted bytes count against the quota until their fill is done
 * (tn->quota_reserved): concurrent fills cannot overshoot it. */
int quota_admit(struct tenant *tn, int fd, uint64_t need);
/* Would need more bytes fit without releasing anything, under the high
 * watermark too? (Work done ahead of readers, a trace's prefetch or a
 * hydration, takes only room that is free.) */
bool quota_room(struct tenant *tn, uint64_t need);
/* After a fill or an archive: above the high watermark, release soon (from
 * the event loop). */
void quota_check_high(struct tenant *tn);
/* A file became releasable (archived, unpinned): the watermark tries
 * again at once, even if it found nothing to release a moment ago. */
void quota_candidates_changed(struct tenant *tn);
void quota_stop(struct tenant *tn);
