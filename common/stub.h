/* SPDX-License-Identifier: MIT */
/*
 * The stub record kept in the xattr "security.tierd" (readable by anyone,
 * writable only with CAP_SYS_ADMIN). A versioned text record, one
 * "key=value" per line, so `getfattr -n security.tierd` shows it plainly:
 *
 *   v=1                         format version (first line)
 *   tenant=alpha                who owns the object
 *   state=released              archived | partial | released | dirty
 *   key=sha256/<hex>            object key under the tenant's backend
 *   size=5242880                content size at archive
 *   sha256=<64 hex>             SHA-256 of the content
 *   mode=100755 uid=0 gid=0     (one per line) owner and mode at archive
 *   mtime=1700000000.123456789  mtime at archive (fills change it: put back)
 *   chunk=1048576               fill granularity this file was archived with
 *   fcaps=<hex>                 security.capability at archive (may be empty)
 *   ranges=0+1048576,...        populated ranges (offset+length), partial only
 *   manifest=<64 hex>           optional: the root of the chunk manifest
 *                               (common/manifest.h), object "manifest/<root>"
 *   ctime_max=1700000000.1234   optional, archived only: the latest ctime the
 *                               file can have if nothing touched it since
 *                               this record was written (which itself sets
 *                               ctime); a later ctime means a change tierd
 *                               may not have heard of (older records: none)
 *   checked=1                   optional, partial only: every populated
 *                               range was checked against the manifest on
 *                               its way in, so the complete file needs no
 *                               whole-file hash (without it: hashed whole)
 *
 * Which ranges are populated is tierd's own record, not the extent map:
 * holes can be real zeros.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "ranges.h"

#define STUB_XATTR "security.tierd"
/* The pin mark: present (any value) means never release. A second
 * attribute of the stub record, so that a file never archived can be
 * pinned too, and rewriting the record cannot drop it. */
#define STUB_PIN_XATTR "security.tierd.pin"
#define STUB_VERSION 1
#define STUB_TENANT_MAX 64
#define STUB_KEY_MAX 128
#define STUB_FCAPS_MAX 64
#define STUB_MAX_RANGES 64 /* more would not fit an ext4 xattr: fill whole */
#define STUB_TEXT_MAX 4000

enum stub_state {
        STUB_ARCHIVED, /* whole locally, and a verified copy in the store */
        STUB_PARTIAL,  /* some ranges local */
        STUB_RELEASED, /* no data local */
        STUB_DIRTY,    /* whole locally, changed since archive */
        _STUB_STATE_MAX,
};

struct stub {
        char tenant[STUB_TENANT_MAX];
        enum stub_state state;
        char key[STUB_KEY_MAX];
        uint64_t size;
        uint8_t sha256[32];
        mode_t mode;
        uid_t uid;
        gid_t gid;
        struct timespec mtime;
        uint64_t chunk;
        uint8_t fcaps[STUB_FCAPS_MAX];
        size_t fcaps_len;
        struct range_set populated; /* meaningful in STUB_PARTIAL only */
        bool has_manifest;          /* archived with a chunk manifest */
        uint8_t manifest[32];       /* its root */
        struct timespec ctime_max;  /* {0, 0}: none recorded */
        /* Partial only: every populated range was checked against the
         * manifest on its way in, and that is all a complete file needs;
         * without it (a range filled with "verify": false, or a record an
         * older tierd wrote) the complete file is hashed whole. */
        bool checked;
};

/* How long after stub_write_fd reads the clock its own write may still set
 * ctime (nothing of tierd's touches an archived file after its record is
 * written). Too short costs a check of the bytes at release; a change
 * within it is caught by the change notification only. */
#define STUB_CTIME_SLACK_NSEC 20000000ll
/* How far behind the clock a coarse ctime may lag (a tick, 4 ms at HZ=250;
 * with margin). */
#define STUB_CTIME_TICK_NSEC 30000000ll

/* The file's ctime is past what its archived record allows (something
 * changed it, a write, a chmod, a touch, that tierd may not have heard of),
 * or so far before it that the clock stepped back or the filesystem keeps
 * whole seconds (a change could hide below the mark): either way its bytes
 * must be checked. */
bool stub_ctime_moved(const struct stub *s, const struct timespec *ctime);

const char *stub_state_to_string(enum stub_state s);
void stub_done(struct stub *s);

/* Strict parser: every required key once, nothing unknown, every value
 * checked. On -EINVAL *error says what is wrong. */
int stub_parse(const char *text, size_t len, struct stub *ret, const char **error);
/* Writes the record into buf (STUB_TEXT_MAX bytes); returns its length or
 * -E2BIG when the ranges do not fit. */
int stub_format(const struct stub *s, char *buf, size_t size);

/* Whole locally: no fill is ever needed. */
bool stub_is_whole(const struct stub *s);
/* Bytes of content present locally according to the record. */
uint64_t stub_resident_bytes(const struct stub *s);

/* The xattr on an open file (an O_PATH fd too, for reading).
 * stub_read returns -ENODATA for no stub. */
int stub_read_fd(int fd, struct stub *ret, const char **error);
/* An archived record is written with ctime_max set from the clock. */
int stub_write_fd(int fd, const struct stub *s);

/* The pin mark on an open file (or O_PATH fd): 1 pinned, 0 not, or a
 * negative errno. */
int stub_pinned_fd(int fd);
int stub_set_pinned_fd(int fd, bool pinned);

/* Content-addressed object key for a SHA-256 ("sha256/<hex>"). */
void stub_key_for_hash(const uint8_t sha256[32], char key[STUB_KEY_MAX]);
/* The manifest object's key for its root ("manifest/<hex>"). */
void stub_manifest_key(const uint8_t root[32], char key[STUB_KEY_MAX]);
