/* SPDX-License-Identifier: MIT */
/*
 * Namespace and mount uapi that Debian 12's 6.1 headers lack; checked on
 * the running 6.18 kernel. A mount namespace's id (NS_GET_MNTNS_ID, Linux
 * 6.12+) and a mount's unique id (STATX_MNT_ID_UNIQUE, 6.8+) are never
 * reused, unlike a namespace's inode number or a mount's plain id.
 */
#pragma once

#include <linux/nsfs.h>
#include <linux/stat.h>
#include <linux/types.h>

#ifndef NS_GET_MNTNS_ID
#define NS_GET_MNTNS_ID _IOR(NSIO, 0x5, __u64)
#endif
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif
