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

/* The worker's end of its control socket: tierd puts it there before exec. */
#define PROTO_CONTROL_FD 3
#define PROTO_URL_MAX 1024
#define PROTO_HEADERS_MAX 4096

enum proto_type {
        PROTO_CONFIG = 1,      /* first message; fd: the store directory (file://) */
        PROTO_FILL = 2,        /* fetch [offset, offset+length) of key, write it through fd */
        PROTO_VERIFY = 3,      /* hash the whole file through fd; punch it back on mismatch */
        PROTO_ARCHIVE = 4,     /* read fd whole, store it content-addressed */
        PROTO_CREDENTIALS = 5, /* S3 keys: after the config, and whenever they change */
        PROTO_CHECK = 6,       /* before a release: is key in the store, of `size` bytes? (no fd) */
        /* Small objects tierd keeps in the store itself (the catalog). fd is
         * a memfd of tierd's: */
        PROTO_GET = 7, /* write the whole object key, at most `length` bytes, to fd */
        PROTO_PUT = 8, /* store fd's `size` bytes (hashing to sha256) as key */
        /* Garbage collection (supervisor/store/gc.c): */
        PROTO_LIST = 9,    /* the objects of kind `offset` (enum proto_object_kind), as
                            * struct proto_object records written to fd (a memfd of
                            * tierd's), at most `length` bytes of them */
        PROTO_DELETE = 10, /* remove key unless it is newer than `offset` (seconds since
                            * the epoch, the store's clock) or not of `size` bytes: -EBUSY */
        PROTO_SYNC = 11,   /* fdatasync fd: what fills wrote through it is durable before
                            * tierd records it (fills themselves do not sync) */
        PROTO_HEADERS = 12, /* struct proto_text: the configured headers again, "@FILE"s
                             * read anew, whenever one of those files changes (a rotated token) */
        PROTO_RESOLVE = 13, /* struct proto_text: the store's host's addresses again
                             * ("HOST:PORT:ADDR,ADDR...", as CURLOPT_RESOLVE takes them),
                             * whenever tierd's lookup finds them changed */
        PROTO_PROMOTE = 14, /* struct proto_request, `id` only: a prefetch fill a reader now
                             * waits for goes with the readers' fills, if not started yet
                             * (no reply, no fd) */
};

/* What tierd keeps in a store, by key: a listing names only these. */
enum proto_object_kind {
        PROTO_OBJECT_DATA = 1,     /* sha256/<64 hex> */
        PROTO_OBJECT_MANIFEST = 2, /* manifest/<64 hex> */
        PROTO_OBJECT_JOURNAL = 3,  /* catalog/journal/<16 hex> */
        PROTO_OBJECT_SNAPSHOT = 4, /* catalog/snapshot/<16 hex>.<8 hex> */
        PROTO_OBJECT_TRACE = 5,    /* trace/<64 hex>: the SHA-256 of an access trace's name */
};

/* One object of a listing: its key in parts, never as text, so tierd
 * parses nothing the store made up. */
struct proto_object {
        uint32_t kind;
        uint32_t epoch;      /* snapshot */
        uint64_t seq;        /* journal, snapshot */
        uint8_t hash[32];    /* data, manifest */
        uint64_t size;
        int64_t mtime;       /* last modified, seconds since the epoch */
};

enum proto_flags {
        /* The fill covers the whole object: check the SHA-256 of what was
         * fetched before answering, punch the file back on mismatch. */
        PROTO_FILL_WHOLE = 1u << 0,
        /* Verify every chunk fetched against the manifest (root in
         * `manifest`, chunk size in `chunk`) before a byte of it is written. */
        PROTO_FILL_MANIFEST = 1u << 1,
        /* Reply to an archive: `manifest` holds the root of the manifest
         * stored with the object (files of two chunks or more). */
        PROTO_REPLY_MANIFEST = 1u << 2,
        /* PROTO_PUT only if key is not there yet, else -EEXIST: a
         * conditional PUT (If-None-Match: *). */
        PROTO_PUT_IF_ABSENT = 1u << 3,
        /* PROTO_GET of nothing but the object's size (in bytes): a HEAD. */
        PROTO_GET_SIZE_ONLY = 1u << 4,
        /* A fill ahead of readers (a trace's prefetch): after every fill a
         * reader waits for, on at most all threads but one. */
        PROTO_FILL_PREFETCH = 1u << 5,
};

/* A fill's error: the object's manifest is not in the store (lost, or a
 * store that never kept it). tierd then restores the file whole, which
 * the whole-file hash checks, rather than fail every read of it. */
#define PROTO_ENOMANIFEST ENOMSG

/* Everything a worker knows, from tierd, never from argv or environment. */
struct proto_config {
        uint32_t type;
        uint32_t threads;
        char tenant[STUB_TENANT_MAX];
        char backend[PROTO_URL_MAX];
        char endpoint[PROTO_URL_MAX]; /* "" for AWS's regional endpoint */
        char region[64];
        char ca_file[PROTO_URL_MAX];
        char sse[16];
        char kms_key_id[256];
        char headers[PROTO_HEADERS_MAX]; /* "Name: value" lines, files already read */
        char resolve[PROTO_URL_MAX]; /* "HOST:PORT:ADDR" for CURLOPT_RESOLVE: no DNS in the worker */
        char proxy[300];             /* "http://HOST:PORT" the store is reached through; "" directly */
        uint32_t virtual_hosted;
        uint32_t uid, gid;  /* the worker's own ids */
        uint32_t net_port;  /* the only TCP port it may connect to; 0: none */
        uint32_t resolve_needed; /* its store's host is a name (not an address): no request without resolve */
        uint64_t connect_timeout_usec, stall_timeout_usec;
        uint64_t multipart_threshold, part_size;
        uint64_t manifest_cache; /* bytes of verified manifest parts kept */
        uint32_t landlock_optional; /* 1: start without Landlock (warned); 0: refuse to */
};

/* Secrets travel only here: never argv, environment, logs or D-Bus. */
struct proto_credentials {
        uint32_t type;
        char access_key[128];
        char secret_key[256];
        char session_token[4096];
};

/* PROTO_HEADERS, PROTO_RESOLVE: replaces the config's headers ("Name:
 * value" lines) or resolve for every later request. */
struct proto_text {
        uint32_t type;
        char text[PROTO_HEADERS_MAX];
};

struct proto_request {
        uint32_t type;
        uint32_t flags;
        uint64_t id;
        uint64_t offset, length;
        uint64_t size; /* object size */
        char key[STUB_KEY_MAX];
        uint8_t sha256[32];
        uint64_t chunk;       /* archive: the manifest's chunk size; fill: the stub's */
        uint8_t manifest[32]; /* fill with PROTO_FILL_MANIFEST: its root */
};

/* A reply with this id is no answer: the worker reports that its seccomp
 * filter stopped it, with the system call number in bytes. */
#define PROTO_ID_SECCOMP UINT64_MAX
/* Nor this: request `bytes` is still moving (sent at most once a second
 * while it does), so tierd does not take a long transfer for a hang. */
#define PROTO_ID_PROGRESS (UINT64_MAX - 1)

struct proto_reply {
        uint64_t id;
        int32_t error; /* 0 or a negative errno */
        uint32_t flags; /* PROTO_REPLY_MANIFEST */
        uint64_t bytes; /* fetched (fill, get) or stored (archive) */
        uint64_t size;  /* archive: bytes hashed */
        uint8_t sha256[32];
        uint8_t manifest[32];
};

/* Sends one record, with fd attached unless fd < 0. */
int proto_send(int sock, const void *msg, size_t size, int fd);
/* The peer can pass no fd to sock (SO_PASSRIGHTS off: its sendmsg with
 * SCM_RIGHTS fails with EPERM); -ENOPROTOOPT before Linux 6.16. */
int proto_refuse_fds(int sock);
/* Receives one record of at most size bytes (its length in *len; with len
 * NULL it must be exactly size, else -EBADMSG), and at
 * most one fd (*fd = -1 if none). flags as for recvmsg (MSG_DONTWAIT).
 * Returns 0, -EAGAIN, or 1 at end of stream. */
int proto_recv(int sock, void *msg, size_t size, size_t *len, int *fd, int flags);
