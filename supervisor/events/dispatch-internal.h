/* SPDX-License-Identifier: MIT */
/*
 * What dispatch.c (waiters and fills), fillrecord.c (a completed fill:
 * shown, synced, recorded) and preevent.c (a pre-content event: allowed
 * at once or parked) share: the per-file entry and its waiters and fills.
 * Everything here runs on tierd's event loop, under the rule written at
 * the top of dispatch.c.
 */
#pragma once

#include <fcntl.h> /* struct file_handle */
#include <stdbool.h>
#include <stdint.h>

#include "dispatch.h"
#include "ranges.h"
#include "stub.h"
#include "tierd.h"
#include "workers.h"

struct waiter {
        struct waiter *next;
        uint64_t start, end; /* needed (reads) */
        uint64_t want_end;   /* plus read-ahead */
        uint64_t parked_usec; /* when the reader started waiting (monotonic) */
        bool whole, dirty;
        /* Answered only once what it needs is recorded, not as soon as it
         * is written: a writer (its file becomes dirty), an open that waits
         * for the whole file (what it stats after must not change) and
         * tierd's own jobs, which read the record next. */
        bool needs_record;
        uint64_t route; /* the reader's container (its serial), 0: the host */
        bool ahead;     /* no reader yet: a trace's prefetch (PROTO_FILL_PREFETCH) */
        int event_fd; /* a parked kernel event, or -1 */
        struct tiered_fs *event_fs;
        void (*callback)(void *userdata, int error);
        void *userdata;
        int error;
};

struct fill {
        struct fill *next;
        struct tfile *file;
        uint64_t start, end;
        bool whole_verified; /* PROTO_FILL_WHOLE: checked against the SHA-256 */
        bool verify;         /* a PROTO_VERIFY of the whole file */
        bool sync;           /* a PROTO_SYNC: then what was syncing is recorded */
        unsigned gen;        /* the file's sync_gen when sent */
        uint64_t reserved;   /* counted against the tenant's quota until done */
        bool unverified;     /* a ranged fill no manifest checks (see struct tfile) */
        bool checked;        /* a ranged fill the manifest checks, chunk by chunk */
        uint64_t route;      /* the container whose worker runs it, 0: the host worker */
        struct request *req; /* its request, until its worker replied (it may stay
                              * in flight after, for its put-back or record);
                              * PROTO_FILL_PREFETCH in its flags while no reader
                              * waits for it */
};

struct idle_callback {
        struct idle_callback *next;
        void (*callback)(void *userdata);
        void *userdata;
};

struct tfile {
        struct tfile *next;
        struct inode_attrs attrs; /* as its owner last set them, before our fills */
        struct idle_callback *idle; /* to run once nothing is in flight */
        struct tiered_fs *fs;
        struct tenant *tenant;
        union {
                struct file_handle fh;
                char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
        } h;
        int fd; /* the fill fd: O_WRONLY through the private mount */
        struct fill *fills;
        struct waiter *waiters;
        struct inode_job *inode_last; /* its last put-back or record, until done (fillrecord.c) */
        /* Filled by ranged fills nothing checked (a file without a manifest,
         * verify on): not recorded as populated, so no reader is let
         * through to them, until the whole file passes its SHA-256. */
        struct range_set unverified;
        /* Durability off the reader's path: what fills wrote and checked is
         * shown to readers at once (written), and recorded in the stub only
         * after a PROTO_SYNC made it durable (syncing: one sync in flight per
         * file, for all that was written before it was sent). A crash or a
         * power cut in between loses the record, never bytes a record
         * vouches for; a refill writes over what readers saw, never punches
         * it (worker/fill.c). Their quota stays reserved until recorded. */
        struct range_set written, syncing;
        bool whole_written, whole_syncing;
        /* A ranged fill no manifest checked ("verify": false) was written:
         * the stub's record loses "checked", and the complete file is
         * hashed whole. */
        bool unchecked_written;
        uint64_t written_reserved;
        /* Bumped by a failed sync: the write error it reported may have
         * been another fill's, so nothing in flight then is recorded. */
        unsigned sync_gen;
        bool quota_wait; /* a waiter waits for room (quota.c checks copies before it releases), or its turn */
        uint64_t paced_seq; /* parked by restore_rate (restorepace.c): its place in the queue; 0: not */
        bool hydrate_asked; /* "restore": "progressive": queued to come whole (traces/hydrate.c) */
};

/* restorepace.c */
/* A reader's fill of f may start now under restore_rate: 0; or
 * -EINPROGRESS: f is parked, in its tenant's queue (f->quota_wait then:
 * the queue's turn, or dispatch_quota_retry, brings it back). */
int restore_paced(struct tfile *f);
/* It started: bytes spent from the tenant's bucket. */
void restore_spend(struct tenant *tn, uint64_t bytes);
/* f leaves the queue (it goes, or it is freed). */
void restore_unpark(struct tfile *f);

/* dispatch.c */
/* fd's handle (fh has room for MAX_HANDLE_SZ bytes). */
int file_handle_of(int fd, struct file_handle *fh);
/* The file's entry, made (with its fill fd) if it has none. */
int tfile_get(struct tenant *tn, int any_fd, struct tfile **ret);
struct waiter *tfile_waiter_new(void);
void tfile_add_waiter(struct tfile *f, struct waiter *w);
/* Re-evaluates every waiter of f: answer those whose data is in, start
 * fills for the others; frees f once nothing is left. */
void tfile_progress(struct tfile *f);

/* fillrecord.c */
int tfile_written(const struct tfile *f, const struct stub *s, struct range_set *out);
bool tfile_data_fills_in_flight(const struct tfile *f);
void tfile_in_flight(const struct tfile *f, struct range_set *out);
bool tfile_all_in(const struct tfile *f, const struct stub *s);
/* Every byte recorded, and every chunk of it checked against the manifest
 * on its way in (and synced before it was recorded): the file is whole as
 * it is, no second pass over its bytes needed. */
bool tfile_chunks_checked(const struct tfile *f, const struct stub *s);
/* Records such a file whole (archived). */
int tfile_record_checked(struct tfile *f, struct stub *s);
unsigned tfile_fills_in_flight(const struct tfile *f);
bool tfile_verify_in_flight(const struct tfile *f);
/* A fill's (or a verification's, or a sync's) reply. */
void tfile_fill_done(struct request *req, const struct proto_reply *rep);
/* The entry of the file fh names on fs, if anything is in flight for it. */
struct tfile *tfile_find(struct tierd *t, struct tiered_fs *fs, const struct file_handle *fh);
