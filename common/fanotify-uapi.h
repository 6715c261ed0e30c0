/* SPDX-License-Identifier: MIT */
/*
 * The fanotify uapi that Debian 12's 6.1 headers lack (pre-content events,
 * Linux 6.14+). This is the only place these are defined; values checked on
 * the running 6.18 kernel (shared/DESIGN.md, "Kernel facts").
 */
#pragma once

#include <linux/types.h>
#include <sys/fanotify.h>

#ifndef FAN_PRE_ACCESS
#define FAN_PRE_ACCESS 0x00100000
#endif

#ifndef FAN_EVENT_INFO_TYPE_RANGE
#define FAN_EVENT_INFO_TYPE_RANGE 6
struct fanotify_event_info_range {
        struct fanotify_event_info_header hdr;
        __u32 pad;
        __u64 offset;
        __u64 count;
};
#endif

#ifndef FAN_DENY_ERRNO
#define FAN_DENY_ERRNO(err) (FAN_DENY | ((((__u32)(err)) & 0xff) << 24))
#endif

#ifndef FAN_MARK_EVICTABLE
#define FAN_MARK_EVICTABLE 0x00000200
#endif

#ifndef FAN_MARK_IGNORE
#define FAN_MARK_IGNORE 0x00000400
#endif

#ifndef FAN_REPORT_TID
#define FAN_REPORT_TID 0x00000100
#endif

/* Everything tierd needs data for: reads and writes (pre-access) and opens. */
#define TIERD_PRE_CONTENT_MASK (FAN_PRE_ACCESS | FAN_OPEN_PERM)
