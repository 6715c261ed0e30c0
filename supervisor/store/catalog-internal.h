/* SPDX-License-Identifier: MIT */
/*
 * Shared by the catalog writer (catalog.c: lease and state;
 * catalogsnapshot.c; catalogjournal.c; catalogstate.c), catalognote.c (what
 * it hears) and catalogimport.c only.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "catalog-format.h"
#include "catalog.h"

#define CATALOG_NODE_MAX 320
#define CATALOG_JOURNAL_MAX (64u << 20)   /* bytes of one journal object read back */
#define CATALOG_SNAPSHOT_MAX (1024u << 20) /* and of a snapshot */
#define CATALOG_INDEX_MAX (4u << 20)

enum catalog_state {
        CATALOG_STARTING, /* finding or taking the lease */
        CATALOG_READY,    /* the writer */
        CATALOG_FENCED,   /* another node writes it: nothing is released here */
};

struct catalog_import;

/* A change heard, waiting for a journal object; or (subtree) a directory
 * renamed or made whose entries are still to be walked (catalognote.c). */
struct catalog_pending {
        struct catalog_pending *next;
        struct catalog_entry e; /* subtree: only e.path */
        dev_t dev;
        ino_t ino;
        bool subtree;
};

/* Changes waiting at most (entries and subtrees): more are dropped, and a
 * snapshot has them instead. */
#define CATALOG_QUEUE_MAX 65536
#define CATALOG_QUEUE_MAX_BYTES (64u << 20) /* paths, targets and xattrs */
/* Snapshots for dropped changes: at most one this often. */
#define CATALOG_SNAPSHOT_SPILL_USEC (10 * 1000 * 1000ull)

struct catalog {
        struct tenant *tn;
        enum catalog_state state;
        char node[CATALOG_NODE_MAX]; /* machine-id:subvolume, in the epoch objects */
        uint32_t epoch;              /* ours, once ready */
        uint64_t next_seq;           /* the next journal object's number */
        bool busy;                   /* a request of the writer is in flight */
        /* A journal object read back after a put the store said exists
         * (catalogjournal.c), on a thread: with this key, found so. */
        struct catalog_key read_back_key;
        enum { CATALOG_READ_BACK_OTHER, CATALOG_READ_BACK_OURS, CATALOG_READ_BACK_NEWER } read_back;
        bool stopping;               /* catalog_stop() while busy: freed when it ends */
        bool counted_detached;       /* stopping with an import: in t->imports_detached */
        bool first_snapshot_done;    /* every file archived before this run is in the store */
        bool snapshot_due;
        bool unrecorded;             /* an entry could not be made: nothing is released until a clean snapshot */
        bool retry_pending;          /* a failed step waits for its backoff */
        uint64_t snapshot_after_usec; /* a due snapshot waits until then */
        struct catalog_pending *queue, **queue_tail, *sending;
        size_t n_queued;       /* in queue */
        size_t queued_bytes;   /* their catalog_entry_bytes() */
        bool spilled;          /* changes dropped: a snapshot is due, nothing queued until it is in */
        size_t n_subtrees;     /* of which subtrees not walked yet */
        uint64_t dropped_gen;  /* counts drops of the queue (snapshots taken before miss them) */
        char *sending_data; /* the journal object in flight */
        size_t sending_len;
        struct catalog_waiter *waiters;
        struct catalog_import *import; /* waiting for the writer to be idle, or running */
        sd_event_source *timer;
        uint64_t last_put_usec, backoff_usec, snapshot_usec;
        uint64_t journals_since_snapshot;
        uint32_t probe_epoch; /* discovery: the next epoch object to read */
        bool seq_known;       /* next_seq is the first number not in the store */
        uint64_t latest_start_seq;
        char latest_node[CATALOG_NODE_MAX];
        json_object *index; /* catalog/snapshots, once read */
};

void catalog_epoch_key(uint32_t epoch, char key[STUB_KEY_MAX]);
void catalog_journal_key(uint64_t seq, char key[STUB_KEY_MAX]);
/* A writer's objects carry its epoch: a fenced writer never overwrites its
 * successor's. */
void catalog_snapshot_key(uint64_t seq, uint32_t epoch, char key[STUB_KEY_MAX]);
void catalog_index_key(uint32_t epoch, char key[STUB_KEY_MAX]);
/* A small JSON object of the catalog's (a lease, a list of snapshots), read
 * the strict way (json-strict.h): the store is outside tierd. NULL if it
 * is not valid JSON. */
json_object *catalog_parse_json(const char *data, size_t len);
/* An epoch object: 0 and its start_seq and node, or -EBADMSG. */
int catalog_parse_epoch(const char *data, size_t len, uint32_t epoch, uint64_t *start_seq, char *node, size_t node_size);
char *catalog_format_epoch(uint32_t epoch, uint64_t start_seq, const char *node);

/* Every request's completion starts here: false if the catalog went
 * meanwhile (it is freed then). */
bool catalog_request_ended(struct catalog *c);
/* A request to the store was given (busy set before): if it could not
 * even start (r < 0), the step waits its backoff. */
void catalog_request_started(struct catalog *c, int r, const char *what);
/* A store error: the same step again later, waiting longer each time. */
void catalog_retry_later(struct catalog *c, int error, const char *what);
/* A step is done: those waiting for an entry to be written ask again. */
void catalog_wake_waiters(struct catalog *c);
uint64_t catalog_realtime_usec(void);
/* The last journal number written, kept across restarts (catalogstate.c,
 * with the import's mark). */
uint64_t catalog_seq_hint_load(struct tenant *tn);
void catalog_seq_hint_save(struct tenant *tn, uint64_t seq);
/* An import between its lease and its tree made: marked, so that a tierd
 * that dies there imports again when it starts. */
int catalog_import_mark(struct tenant *tn, uint64_t at_usec);
void catalog_import_unmark(struct tenant *tn);
/* The object of h->entries entries, which next() gives one by one. */
int catalog_encode_entries(const struct catalog_header *h, const struct catalog_key *key,
                           const struct catalog_entry *(*next)(void *ctx), void *ctx, char **ret, size_t *ret_len);
/* The writer's steps (catalogsnapshot.c, catalogjournal.c). */
void catalog_write_snapshot(struct catalog *c);
void catalog_check_fence_then_put(struct catalog *c);
/* A journal object was written: the lease is checked again after it. */
void catalog_check_fence_after_put(struct catalog *c);
/* The writer's next step, if it has one and is idle. */
void catalog_writer_continue(struct catalog *c);
/* The import has read the catalog and taken the lease (epoch, from
 * next_seq on): the writer goes on from there, a snapshot first. */
void catalog_writer_resume(struct catalog *c, uint32_t epoch, uint64_t next_seq);
/* Nothing is written or released (the tree on disk is not the catalog's:
 * an import that failed half way); the next import takes it back. */
void catalog_writer_fence(struct catalog *c, const char *why);
/* The writer is idle: an import waiting for that starts now. */
void catalog_import_run(struct catalog *c);
void catalog_import_abort(struct catalog *c);
/* The import ends at its next step (catalog_import_stop's, for a catalog
 * a reload turned off too). */
void catalog_import_stop_catalog(struct catalog *c);
/* At start: an import tierd did not finish is done again. */
int catalog_import_resume_if_marked(struct tenant *tn);

void catalog_pending_free_list(struct catalog_pending *p);
/* A file's entry made at its archive (catalog_note_archived) and held
 * back by catalogwatch_defer(), queued now (taken). */
void catalog_note_entry(struct tenant *tn, struct catalog_pending *p);
/* Every change waiting is dropped and a snapshot records them instead;
 * nothing is released until it is in the store. */
void catalog_note_spilled(struct tenant *tn, const char *why);
/* Every change waiting is dropped (nothing is released until a snapshot
 * written after this has them). */
void catalog_queue_drop(struct catalog *c);
/* Walks the subtrees waiting, on a thread; the writer is busy meanwhile. */
void catalog_subtrees_resolve(struct catalog *c);
