/* SPDX-License-Identifier: MIT */
#pragma once

#include <fcntl.h>

/* Room for any file handle name_to_handle_at() may return. */
union file_handle_buf {
        struct file_handle fh;
        char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
};
