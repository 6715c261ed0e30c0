/* SPDX-License-Identifier: MIT */
/*
 * What a tenant's catalog keeps in tierd's state directory: the last
 * journal number written, and the mark of an import between its lease and
 * its tree made.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog-internal.h"
#include "fdio.h"
#include "log.h"
#include "macro.h"

/* The last journal number written, kept across restarts. */
static char *seq_hint_path(struct tenant *tn) {
        char *p = NULL;
        return asprintf(&p, "%s/%s.catalog-seq", tn->t->state_dir, tn->cfg->name) < 0 ? NULL : p;
}

uint64_t catalog_seq_hint_load(struct tenant *tn) {
        _cleanup_free_ char *path = seq_hint_path(tn);
        unsigned long long v = 0;
        FILE *f = path ? fopen(path, "re") : NULL;
        if (f) {
                if (fscanf(f, "%llu", &v) != 1)
                        v = 0;
                fclose(f);
        }
        return v;
}

void catalog_seq_hint_save(struct tenant *tn, uint64_t seq) {
        _cleanup_free_ char *path = seq_hint_path(tn);
        FILE *f = path ? fopen(path, "we") : NULL;
        if (f) {
                fprintf(f, "%llu\n", (unsigned long long)seq);
                fclose(f);
        }
}

/* Between the lease and the tree made, a mark in the state directory: a
 * tierd that dies there imports again when it starts, before its writer
 * would take the half-made tree for the truth. */
static char *import_mark_path(struct tenant *tn) {
        char *p = NULL;
        return asprintf(&p, "%s/%s.catalog-import", tn->t->state_dir, tn->cfg->name) < 0 ? NULL : p;
}

int catalog_import_mark(struct tenant *tn, uint64_t at_usec) {
        _cleanup_free_ char *path = import_mark_path(tn);
        FILE *f;
        if (!path)
                return -ENOMEM;
        (void)mkdir(tn->t->state_dir, 0700);
        if (!(f = fopen(path, "we")))
                return -errno;
        fprintf(f, "%llu\n", (unsigned long long)at_usec);
        int r = fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : -errno;
        fclose(f);
        /* The mark is its name: lost in a power cut unless its directory
         * is synced, and then a half-made tree would pass for the truth. */
        return r < 0 ? r : fsync_dir_of(path);
}

void catalog_import_unmark(struct tenant *tn) {
        _cleanup_free_ char *path = import_mark_path(tn);
        if (path)
                unlink(path);
}

static void on_resumed_import(void *userdata, int error, const char *message) {
        (void)userdata, (void)error, (void)message; /* logged by import_end */
}

int catalog_import_resume_if_marked(struct tenant *tn) {
        _cleanup_free_ char *path = import_mark_path(tn);
        unsigned long long at = 0;
        FILE *f = path ? fopen(path, "re") : NULL;
        if (!f)
                return 0;
        if (fscanf(f, "%llu", &at) != 1)
                at = 0;
        fclose(f);
        log_warning("tenant %s: an import did not finish (tierd stopped during it): importing again", tn->cfg->name);
        /* Without the flags it was asked with: setuid bits dropped, the safe side. */
        return catalog_import(tn, at, CATALOG_IMPORT_RESUMED, on_resumed_import, NULL, NULL);
}
