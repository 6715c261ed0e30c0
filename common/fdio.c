/* SPDX-License-Identifier: MIT */
#include "fdio.h"

#include <errno.h>
#include <unistd.h>

int write_full(int fd, const void *buf, size_t n) {
        for (size_t done = 0; done < n;) {
                ssize_t w = write(fd, (const char *)buf + done, n - done);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                if (w == 0)
                        return -EIO;
                done += (size_t)w;
        }
        return 0;
}
