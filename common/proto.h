/* SPDX-License-Identifier: MIT */
/*
 * tierd <-> tierd-worker messages over a SOCK_SEQPACKET socketpair. Fixed-size
 * records: tierd parses nothing variable from a worker. A request may carry
 * one fd (SCM_RIGHTS): the fill fd, or the file to archive.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "stub.h"

#define PROTO_URL_MAX 1024

enum proto_type {
        PROTO_CONFIG = 1,  /* first message; fd: the store directory (file://) */
        PROTO_FILL = 2,    /* fetch [offset, offset+length) of key, write it through fd */
        PROTO_VERIFY = 3,  /* hash the whole file through fd; punch it back on mismatch */
        PROTO_ARCHIVE = 4, /* read fd whole, store it content-addressed */
};

enum proto_flags {
        /* The fill covers the whole object: check the SHA-256 of what was
         * fetched before answering, punch the file back on mismatch. */
        PROTO_FILL_WHOLE = 1u << 0,
};

struct proto_config {
        uint32_t type;
        uint32_t threads;
        char tenant[STUB_TENANT_MAX];
        char backend[PROTO_URL_MAX];
};

struct proto_request {
        uint32_t type;
        uint32_t flags;
        uint64_t id;
        uint64_t offset, length;
        uint64_t size; /* object size */
        char key[STUB_KEY_MAX];
        uint8_t sha256[32];
};

struct proto_reply {
        uint64_t id;
        int32_t error; /* 0 or a negative errno */
        uint32_t reserved;
        uint64_t bytes; /* fetched (fill) or stored (archive) */
        uint64_t size;  /* archive: bytes hashed */
        uint8_t sha256[32];
};

/* Sends one record, with fd attached unless fd < 0. */
int proto_send(int sock, const void *msg, size_t size, int fd);
/* Receives one record of exactly size bytes (-EBADMSG otherwise), and at
 * most one fd (*fd = -1 if none). flags as for recvmsg (MSG_DONTWAIT).
 * Returns 0, -EAGAIN, or 1 at end of stream. */
int proto_recv(int sock, void *msg, size_t size, int *fd, int flags);
