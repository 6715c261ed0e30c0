/* SPDX-License-Identifier: MIT */
/*
 * The nsfs ioctl that Debian 12's 6.1 headers lack. A mount namespace's id
 * (Linux 6.12+) is never reused, unlike its inode number; checked on the
 * running 6.18 kernel.
 */
#pragma once

#include <linux/nsfs.h>
#include <linux/types.h>

#ifndef NS_GET_MNTNS_ID
#define NS_GET_MNTNS_ID _IOR(NSIO, 0x5, __u64)
#endif
