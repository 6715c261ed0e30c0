/* SPDX-License-Identifier: MIT */
#pragma once

#include <fcntl.h>
#include <stdbool.h>
#include <string.h>

/* Room for any file handle name_to_handle_at() may return. */
union file_handle_buf {
        struct file_handle fh;
        char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
};

/* The same file, by the handles name_to_handle_at() gave (one mount's). */
static inline bool file_handle_equal(const struct file_handle *a, const struct file_handle *b) {
        return a->handle_type == b->handle_type && a->handle_bytes == b->handle_bytes &&
               memcmp(a->f_handle, b->f_handle, a->handle_bytes) == 0;
}

/* name_to_handle_at(): a handle that also names the parent, so that
 * open_by_handle_at() gives a path even when the file's dentry was dropped
 * (Linux 6.13; older kernels say EINVAL). Refused with AT_EMPTY_PATH. */
#ifndef AT_HANDLE_CONNECTABLE
#define AT_HANDLE_CONNECTABLE 0x002
#endif
/* The bit such a handle's type carries (the kernel's exportfs.h):
 * cleared, the handle opens the file whatever its parent is now. */
#ifndef FILEID_IS_CONNECTABLE
#define FILEID_IS_CONNECTABLE 0x10000
#endif
