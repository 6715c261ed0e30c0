/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>

/* SHA-256 of fd's bytes [0, size); -EIO if the file is shorter. */
int sha256_fd(int fd, uint64_t size, uint8_t out[32]);
/* SHA-256 of fd's bytes [off, off+len). each, if given, also gets every
 * block read (a copy to make, progress to report); its error ends the pass. A file shorter than
 * asked gives -EBADMSG (it shrank under us). */
int sha256_fd_range(int fd, uint64_t off, uint64_t len, uint8_t out[32], int (*each)(void *ctx, const void *buf, size_t n),
                    void *ctx);

static inline void evp_md_ctx_freep(EVP_MD_CTX **c) { EVP_MD_CTX_free(*c); }
#define _cleanup_md_ctx_ __attribute__((cleanup(evp_md_ctx_freep)))
