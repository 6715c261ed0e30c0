/* SPDX-License-Identifier: MIT */
#include "hash.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "macro.h"

#define HASH_BUF (1u << 20)

int sha256_fd(int fd, uint64_t size, uint8_t out[32]) { return sha256_fd_range(fd, 0, size, out, NULL, NULL); }

int sha256_fd_range(int fd, uint64_t off, uint64_t size, uint8_t out[32], int (*each)(void *ctx, const void *buf, size_t n),
                    void *ctx) {
        _cleanup_md_ctx_ EVP_MD_CTX *md = EVP_MD_CTX_new();
        _cleanup_free_ uint8_t *buf = malloc(HASH_BUF);
        uint64_t pos = 0;

        if (!md || !buf || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
                return -ENOMEM;
        while (pos < size) {
                ssize_t n = pread(fd, buf, (size_t)MIN((uint64_t)HASH_BUF, size - pos), (off_t)(off + pos));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -EBADMSG;
                EVP_DigestUpdate(md, buf, (size_t)n);
                if (each) {
                        int r = each(ctx, buf, (size_t)n);
                        if (r < 0)
                                return r;
                }
                pos += (uint64_t)n;
        }
        return EVP_DigestFinal_ex(md, out, NULL) ? 0 : -EIO;
}
