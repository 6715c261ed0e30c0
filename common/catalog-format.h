/* SPDX-License-Identifier: MIT */
/*
 * The catalog's format: what tierd writes into a tenant's store so that its
 * tree can be found again without the node's disk. An object is JSON lines:
 *
 *   {"tierd_catalog":1,"kind":"journal","epoch":E,"seq":S,"time":USEC,"entries":N}
 *   one line per entry (N of them)
 *   {"hmac-sha256":"<HMAC-SHA256 of every byte above this line>"}
 *
 * The HMAC's key is the tenant's catalog key ("catalog_key" in the policy),
 * which is never in the store: whoever can write the store (another node,
 * a compromised store) cannot make an object an import takes.
 *
 * A path (relative to the subvolume) and a symlink target are bytes: a
 * valid UTF-8 one is written as a string, any other as "path_hex" /
 * "target_hex". Extended attributes (user.* and POSIX ACLs) are pairs of
 * hex strings. Decoding checks all of it: the store is outside tierd.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CATALOG_PATH_MAX 4096
#define CATALOG_XATTRS_MAX 64
#define CATALOG_XATTR_NAME_MAX 255
#define CATALOG_XATTR_VALUE_MAX 65536

/* A catalog key: the bytes of the tenant's key file. */
#define CATALOG_KEY_MIN 32
struct catalog_key {
        uint8_t bytes[256];
        size_t len;
};
/* Given as the key to catalog_decode: the trailer is not checked (any
 * well-formed one passes). Only for readers whose use of an object can
 * only keep more (gc's mark): an object under an old key, or from before
 * keys, still names what must stay. */
extern const struct catalog_key catalog_key_unchecked;
/* HMAC-SHA256 of data with key: -EINVAL for a key shorter than CATALOG_KEY_MIN. */
int catalog_mac(const struct catalog_key *key, const void *data, size_t len, uint8_t out[32]);

enum catalog_kind { CATALOG_JOURNAL = 1, CATALOG_SNAPSHOT = 2 };
enum catalog_op { CATALOG_PUT = 1, CATALOG_DEL = 2 };
enum catalog_type { CATALOG_FILE = 1, CATALOG_DIR = 2, CATALOG_SYMLINK = 3 };

struct catalog_header {
        enum catalog_kind kind;
        uint32_t epoch;     /* the writer's lease */
        uint64_t seq;       /* journal: its number; snapshot: the last journal object it holds */
        uint64_t time_usec; /* CLOCK_REALTIME when written */
        uint64_t entries;
};

struct catalog_xattr {
        char *name; /* NUL-terminated, never empty */
        uint8_t *value;
        size_t len;
};

struct catalog_entry {
        enum catalog_op op;
        enum catalog_type type; /* PUT; DEL of a directory: all beneath it goes too */
        char *path;             /* NUL-terminated; no NUL inside, no "." or ".." part, relative */
        size_t path_len;
        uint64_t size;
        uint32_t mode, uid, gid;
        int64_t mtime_sec;
        uint32_t mtime_nsec;
        /* Files: the object's SHA-256 (its key: stub_key_for_hash), and the
         * chunk manifest if it has one. An empty file has no object. */
        uint8_t sha256[32];
        bool has_manifest;
        uint8_t manifest[32];
        uint64_t chunk;
        char *target; /* symlinks */
        size_t target_len;
        struct catalog_xattr *xattrs;
        size_t n_xattrs;
};

void catalog_entry_done(struct catalog_entry *e);
/* The memory an entry holds, roughly: paths, target and xattrs. */
size_t catalog_entry_bytes(const struct catalog_entry *e);

/* Is path a name the catalog may hold (and an import may create)? */
bool catalog_path_valid(const char *path, size_t len);

/* The extended attributes a catalog keeps (and an import sets): user.* and
 * POSIX ACLs; never security.*, trusted.* or tierd's own. */
bool catalog_xattr_name_allowed(const char *name);

/* Writing: the header, the entries, then the trailer; the bytes go to out
 * (an open_memstream), and the trailer's HMAC covers everything before it,
 * which the writer feeds as it goes. */
struct catalog_writer;
int catalog_writer_new(FILE *out, const struct catalog_header *h, const struct catalog_key *key,
                       struct catalog_writer **ret);
int catalog_writer_add(struct catalog_writer *w, const struct catalog_entry *e);
/* Writes the trailer and frees w; fails if fewer or more entries than the
 * header announced were added. */
int catalog_writer_finish(struct catalog_writer *w);
void catalog_writer_free(struct catalog_writer *w);

/* Reading a whole object: its trailer's HMAC (with key) is checked first, then each()
 * is called for every entry in order (the entry is freed after the call;
 * each() stops the walk with a negative errno). -EBADMSG with *why set
 * (static text) when anything is wrong: an entry that fails its checks
 * after others were passed can only come from a writer's bug, as the hash
 * matched. */
int catalog_decode(const char *data, size_t len, const struct catalog_key *key, struct catalog_header *h,
                   int (*each)(void *userdata, const struct catalog_entry *e), void *userdata, const char **why);
