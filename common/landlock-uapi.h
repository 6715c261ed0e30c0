/* SPDX-License-Identifier: MIT */
/*
 * The Landlock uapi past ABI 2 that Debian 12's linux/landlock.h lacks
 * (truncate: ABI 3, TCP ports: ABI 4, ioctl on devices: ABI 5, scopes:
 * ABI 6). Defined here once; the worker asks the kernel for its ABI and
 * uses what it has.
 */
#pragma once

#include <linux/landlock.h>
#include <linux/types.h>

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_RULE_NET_PORT
#define LANDLOCK_RULE_NET_PORT 2
struct landlock_net_port_attr {
        __u64 allowed_access;
        __u64 port;
};
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* struct landlock_ruleset_attr as of ABI 6; pass the size the ABI knows. */
struct tierd_landlock_ruleset_attr {
        __u64 handled_access_fs;
        __u64 handled_access_net; /* ABI 4 */
        __u64 scoped;             /* ABI 6 */
};
