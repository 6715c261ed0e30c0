/* SPDX-License-Identifier: MIT */
#include "tracework.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "inopath.h"
#include "macro.h"

char *trace_copy(const char *data, size_t len) {
        char *p = malloc(MAX(len, 1u));
        if (p && len)
                memcpy(p, data, len);
        return p;
}

/* The name of the touched file beneath the subvolume, if it still leads to
 * it (not a file deleted since, whose link reads "... (deleted)"). */
static char *name_of(const struct trace_save *sv, const struct trace_touch *t) {
        union file_handle_buf h = t->h;
        _cleanup_close_ int fd = open_by_handle_at(sv->root_fd, &h.fh, O_PATH | O_CLOEXEC);
        /* A connectable handle (trace.c) of a file moved since, its dentry
         * dropped: its recorded parent is no longer its own (ESTALE). The
         * file itself, with no parent asked, is named through the
         * subvolume (inopath.h). */
        if (fd < 0 && errno == ESTALE && (h.fh.handle_type & FILEID_IS_CONNECTABLE)) {
                h.fh.handle_type &= ~FILEID_IS_CONNECTABLE;
                fd = open_by_handle_at(sv->root_fd, &h.fh, O_PATH | O_CLOEXEC); /* the first failed: nothing to close */
        }
        _cleanup_free_ char *path = fd < 0 ? NULL : subvol_rel_of_fd(sv->subvol_rel, sv->subvol_fd, fd);
        struct stat st;
        if (!path || !*path || fstat(fd, &st) < 0 || !path_beneath_is(sv->subvol_fd, path, &st))
                return NULL;
        return TAKE_PTR(path);
}

/* Whole since before the run began (unchanged since: its ctime is older;
 * a restore in the run would have changed it, and a file made whole in the
 * run is heard, trace.h), or not a stub: no read of it could be heard. */
static bool whole_all_along(int subvol_fd, const char *path, const struct timespec *since) {
        _cleanup_close_ int fd = open_path_beneath(subvol_fd, path);
        _cleanup_(stub_done) struct stub s = {};
        const char *why = NULL;
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_ctim.tv_sec > since->tv_sec ||
            (st.st_ctim.tv_sec == since->tv_sec && st.st_ctim.tv_nsec >= since->tv_nsec))
                return false;
        int r = stub_read_fd(fd, &s, &why);
        return r == -ENODATA || (r == 0 && (s.state == STUB_ARCHIVED || s.state == STUB_DIRTY));
}

void trace_work_save(void *userdata) {
        struct trace_save *sv = userdata;
        _cleanup_(trace_done) struct trace run = { .runs = 1 }, all = {};
        int r = 0;

#ifdef TIERD_TEST_HOOKS
        /* Test builds: a slow merge, for two runs of one name to end while
         * the first is still being saved. */
        const char *pause = getenv("TIERD_TEST_TRACE_SAVE_PAUSE_MS");
        if (pause)
                usleep((useconds_t)atoi(pause) * 1000);
#endif
        snprintf(run.name, sizeof(run.name), "%s", sv->name);
        for (size_t i = 0; i < sv->n; i++) {
                const struct trace_touch *t = &sv->touches[i];
                _cleanup_free_ char *path = name_of(sv, t);
                /* Deleted since, or a name that is not UTF-8: not in the trace. */
                if (path && trace_add(&run, path, t->key, t->size, t->start, t->end, t->at_ms, t->resident) == 0)
                        sv->named++;
        }
        for (size_t i = 0; i < sv->n_ahead; i++)
                if (!trace_has_file(&run, sv->ahead[i].path))
                        sv->wasted += sv->ahead[i].bytes;
        if (sv->old && trace_parse(sv->old, sv->old_len, &all, &sv->old_refused) < 0) {
                sv->old_refused = sv->old_refused ?: "not a trace";
                trace_done(&all);
        }
        for (size_t i = 0; i < all.n_files; i++)
                all.files[i].unknown = whole_all_along(sv->subvol_fd, all.files[i].path, &sv->started);
        snprintf(all.name, sizeof(all.name), "%s", sv->name);
        if ((r = trace_merge(&all, &run)) < 0 || !(sv->text = trace_format(&all))) {
                sv->error = r < 0 ? r : -ENOMEM;
                return;
        }
        sv->runs = all.runs;
        sv->files = all.n_files;
        sv->ranges = trace_ranges(&all);
        sv->bytes = trace_bytes(&all);
}

static void look_up(const struct trace_lookup *lk, const struct trace_file *tf, struct prefetch_file *pf) {
        _cleanup_close_ int fd = open_path_beneath(lk->subvol_fd, tf->path);
        _cleanup_(stub_done) struct stub s = {};
        const char *why = NULL;
        struct stat st;
        int mount_id;

        pf->state = PF_GONE;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return;
        if (stub_read_fd(fd, &s, &why) < 0 || strcmp(s.key, tf->key) != 0 || s.size != tf->size) {
                pf->state = PF_CHANGED;
                return;
        }
        pf->h.fh.handle_bytes = MAX_HANDLE_SZ;
        if (name_to_handle_at(fd, "", &pf->h.fh, &mount_id, AT_EMPTY_PATH) < 0)
                return;
        pf->state = s.state == STUB_RELEASED || s.state == STUB_PARTIAL ? PF_FETCH : PF_RESIDENT;
        /* Whole where a reader's first access would fetch it whole too (preevent.c). */
        pf->whole = lk->restore_whole || s.size < lk->small_file || (s.mode & 0111) || (lk->verify && !s.has_manifest) ||
                    s.size < 2 * s.chunk;
}

void trace_work_lookup(void *userdata) {
        struct trace_lookup *lk = userdata;

        if ((lk->error = trace_parse(lk->data, lk->len, &lk->trace, &lk->why)) < 0 || lk->subvol_fd < 0)
                return;
        if (!(lk->files = calloc(MAX(lk->trace.n_files, 1u), sizeof(*lk->files)))) {
                lk->error = -ENOMEM;
                return;
        }
        for (size_t i = 0; i < lk->trace.n_files; i++)
                look_up(lk, &lk->trace.files[i], &lk->files[i]);
}
