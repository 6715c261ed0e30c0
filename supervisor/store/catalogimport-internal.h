/* SPDX-License-Identifier: MIT */
/*
 * Shared by the two halves of an import only: catalogimport.c reads the
 * catalog (leases, snapshots, journal), catalogmake.c takes the lease and
 * makes the tree.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog-internal.h"
#include "catalogtree.h"

struct catalog_tree_job;

struct catalog_import {
        struct catalog *c;
        uint64_t at_usec;
        uint64_t flags; /* CATALOG_IMPORT_* */
        void (*done)(void *userdata, int error, const char *message);
        void (*progress)(void *userdata, const char *phase, uint64_t done, uint64_t total);
        /* catalog_read_tree: the tree read is handed over, nothing made. */
        void (*tree_read)(void *userdata, int error, const char *message, struct catalog_entries *tree);
        void *userdata;
        bool running;
        uint64_t *epoch_start; /* epoch k starts at journal number epoch_start[k - 1] */
        uint32_t n_epochs;
        uint64_t seq; /* the next journal object to read */
        uint64_t snapshot_seq, journals_applied;
        uint32_t snapshot_epoch; /* 0: no snapshot, the journal from 1 */
        uint32_t index_epoch;    /* the list of snapshots read next */
        bool past_at; /* journal objects from here on are read only to find the last */
        char *lease_text; /* the lease object this import writes */
        struct catalog_entries all; /* in the order written; limits: IMPORT_*_MAX */
        /* A snapshot or journal object is decrypted and read on a thread
         * (store_get_worked: a snapshot may be a GiB): the key it is read
         * with, copied, and what the thread found. */
        struct catalog_key key;
        int read_error;
        const char *read_why;
        bool read_corrupt; /* its header: nothing of it was applied */
        struct catalog_tree_job *making; /* the tree made on a thread: a stop stops it */
        atomic_bool stop;                /* tierd stops: the catalog is read no further */
};

/* The import's answer, and the import freed; the writer does not go on
 * here (see import_fail). */
void catalog_import_finish(struct catalog *c, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Nothing was made: the writer goes on as before the import. */
#define import_fail(c, ...) (catalog_import_finish((c), __VA_ARGS__), catalog_writer_continue(c))
/* tierd stops: the import ends, and the writer does not go on (should a
 * mark be there, the next start imports again). */
#define import_stopped(c) \
        catalog_import_finish((c), -ECANCELED, "tierd stopped, or the tenant's catalog was turned off; an import " \
                                               "that had begun making the tree makes it again at tierd's next start")
void catalog_import_free(struct catalog_import *imp);

/* The catalog is read (catalogmake.c): the lease taken, then the tree made. */
void catalog_import_take_lease(struct catalog *c);
/* catalog_read_tree's: the tree read, to the caller. */
void catalog_import_hand_over(struct catalog *c);
