/* SPDX-License-Identifier: MIT */
#include "prefetch.h"

#include <errno.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "containers.h"
#include "dispatch.h"
#include "handle.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "storeio.h"
#include "traceformat.h"

enum prefetch_file_state { PF_FETCH, PF_RESIDENT, PF_GONE, PF_CHANGED };

struct prefetch_file {
        union file_handle_buf h;
        enum prefetch_file_state state;
        bool whole;     /* its stub restores only whole (no manifest, or small) */
        unsigned pending; /* ranges in flight */
        int fd;           /* O_PATH, while they are */
};

struct prefetch {
        struct tenant *tn;
        struct container *c; /* NULL: the host's readers */
        char name[TRACE_NAME_MAX + 1];
        struct trace trace;
        struct prefetch_file *files; /* per trace file */
        struct offthread *thread;
        int subvol_fd;
        bool cancelled, getting; /* getting: the object is on its way (store_get) */
        size_t next;          /* the next file to start */
        unsigned running;     /* files in flight */
        uint64_t started_usec, bytes;
        size_t fetched, resident, skipped, failed;
};

static struct prefetch **owner_of(struct prefetch *p) { return p->c ? &p->c->prefetch : &p->tn->prefetch; }

static void prefetch_free(struct prefetch *p) {
        trace_done(&p->trace);
        free(p->files);
        free(p);
}

/* On its own thread: each traced path opened beneath the subvolume (never
 * through a link, never out of it), its stub read and compared. */
static void look_up_files(void *userdata) {
        struct prefetch *p = userdata;
        for (size_t i = 0; i < p->trace.n_files; i++) {
                const struct trace_file *tf = &p->trace.files[i];
                struct prefetch_file *pf = &p->files[i];
                struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                                                   RESOLVE_NO_XDEV };
                _cleanup_close_ int fd = (int)syscall(SYS_openat2, p->subvol_fd, tf->path, &how, sizeof(how));
                _cleanup_(stub_done) struct stub s = {};
                const char *why = NULL;
                struct stat st;
                int mount_id;

                pf->state = PF_GONE;
                if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (stub_read_fd(fd, &s, &why) < 0 || strcmp(s.key, tf->key) != 0 || s.size != tf->size) {
                        pf->state = PF_CHANGED;
                        continue;
                }
                pf->h.fh.handle_bytes = MAX_HANDLE_SZ;
                if (name_to_handle_at(fd, "", &pf->h.fh, &mount_id, AT_EMPTY_PATH) < 0)
                        continue;
                pf->state = s.state == STUB_RELEASED || s.state == STUB_PARTIAL ? PF_FETCH : PF_RESIDENT;
                pf->whole = !s.has_manifest || s.size < 2 * s.chunk;
        }
}

static void pump(struct prefetch *p);

static void prefetch_finish(struct prefetch *p) {
        log_info("tenant %s: trace %s fetched ahead of %s in %llu ms: %zu files (%llu bytes), %zu already here, "
                 "%zu skipped, %zu failed",
                 p->tn->cfg->name, p->name, p->c ? p->c->id : "the host",
                 (unsigned long long)((tierd_now_usec(p->tn->t) - p->started_usec) / 1000), p->fetched,
                 (unsigned long long)p->bytes, p->resident, p->skipped, p->failed);
        *owner_of(p) = NULL;
        prefetch_free(p);
}

static void on_range(void *userdata, int error);

struct range_done {
        struct prefetch *p;
        size_t file;
};

static void file_done(struct prefetch *p, struct prefetch_file *pf) {
        pf->fd = safe_close(pf->fd);
        p->running--;
        if (p->cancelled) {
                if (!p->running)
                        prefetch_free(p);
                return;
        }
        pump(p);
}

static void on_range(void *userdata, int error) {
        struct range_done *d = userdata;
        struct prefetch *p = d->p;
        struct prefetch_file *pf = &p->files[d->file];

        free(d);
        if (error < 0 && !p->cancelled) {
                p->failed++;
                log_error_errno(error, "tenant %s: trace %s: cannot fetch %s ahead: %m", p->tn->cfg->name, p->name,
                                p->trace.files[pf - p->files].path);
        }
        if (--pf->pending == 0)
                file_done(p, pf);
}

/* The file's ranges to dispatch.c: a reader of them meanwhile waits for
 * these fills. 1: all in already (nothing in flight), 0: started. */
static int file_start(struct prefetch *p, size_t i) {
        const struct trace_file *tf = &p->trace.files[i];
        struct prefetch_file *pf = &p->files[i];
        uint64_t route = p->c ? p->c->serial : 0;

        pf->fd = open_by_handle_at(p->tn->fs->root_fd, &pf->h.fh, O_PATH | O_CLOEXEC);
        if (pf->fd < 0)
                return -errno;
        pf->pending = 1; /* until every range is started: a fill done at once frees nothing */
        p->running++;
        for (size_t j = 0; j < (pf->whole ? 1 : tf->n); j++) {
                struct range_done *d = malloc(sizeof(*d));
                uint64_t start = pf->whole ? 0 : tf->r[j].start, end = pf->whole ? tf->size : tf->r[j].end;
                if (!d) {
                        p->failed++;
                        break;
                }
                *d = (struct range_done){ .p = p, .file = i };
                pf->pending++;
                int r = dispatch_prefetch(p->tn, pf->fd, start, end, pf->whole, route, on_range, d);
                if (r < 0) {
                        free(d);
                        pf->pending--;
                        p->failed++;
                        log_error_errno(r, "tenant %s: trace %s: cannot fetch %s ahead: %m", p->tn->cfg->name,
                                        p->name, tf->path);
                        break;
                }
                p->bytes += end - start;
        }
        p->fetched++;
        if (--pf->pending > 0)
                return 0;
        pf->fd = safe_close(pf->fd);
        p->running--;
        return 1;
}

/* Starts files in trace order while fewer than PREFETCH_FILES are in flight. */
static void pump(struct prefetch *p) {
        while (!p->cancelled && p->running < PREFETCH_FILES && p->next < p->trace.n_files) {
                size_t i = p->next++;
                struct prefetch_file *pf = &p->files[i];
                if (pf->state == PF_RESIDENT) {
                        p->resident++;
                        continue;
                }
                if (pf->state != PF_FETCH) {
                        p->skipped++;
                        log_info("tenant %s: trace %s: %s skipped: %s since the trace", p->tn->cfg->name, p->name,
                                 p->trace.files[i].path, pf->state == PF_GONE ? "gone" : "its content changed");
                        continue;
                }
                int r = file_start(p, i);
                if (r < 0) {
                        p->failed++;
                        log_error_errno(r, "tenant %s: trace %s: cannot open %s: %m", p->tn->cfg->name, p->name,
                                        p->trace.files[i].path);
                }
        }
        if (!p->cancelled && !p->running && p->next == p->trace.n_files)
                prefetch_finish(p);
}

static void on_looked_up(void *userdata) {
        struct prefetch *p = userdata;
        p->thread = NULL;
        close(p->subvol_fd);
        p->subvol_fd = -1;
        pump(p);
}

static void on_looked_up_abandoned(void *userdata) {
        struct prefetch *p = userdata;
        close(p->subvol_fd);
        prefetch_free(p);
}

static void on_trace(void *userdata, int error, const char *data, size_t len) {
        struct prefetch *p = userdata;
        const char *why = NULL;
        int r = error;

        p->getting = false;
        if (p->cancelled) {
                prefetch_free(p);
                return;
        }
        if (r == -ENOENT)
                log_info("tenant %s: trace %s: none stored yet: nothing to fetch ahead", p->tn->cfg->name, p->name);
        else if (r < 0)
                log_error_errno(r, "tenant %s: trace %s: cannot read it: %m", p->tn->cfg->name, p->name);
        else if ((r = trace_parse(data, len, &p->trace, &why)) < 0)
                log_error("tenant %s: trace %s in the store is refused: %s", p->tn->cfg->name, p->name,
                          why ?: strerror(-r));
        else if (!(p->files = calloc(MAX(p->trace.n_files, 1u), sizeof(*p->files))))
                r = -ENOMEM;
        else if ((p->subvol_fd = fcntl(p->tn->subvol_fd, F_DUPFD_CLOEXEC, 3)) < 0)
                r = -errno;
        else if ((r = offthread_start(p->tn->t->event, &p->subvol_fd, 1, look_up_files, on_looked_up, p,
                                      &p->thread)) < 0)
                p->subvol_fd = safe_close(p->subvol_fd);
        if (r < 0) {
                *owner_of(p) = NULL;
                prefetch_free(p);
        }
}

int prefetch_start(struct tenant *tn, struct container *c, const char *name) {
        struct prefetch **owner = c ? &c->prefetch : &tn->prefetch;
        char key[TRACE_NAME_MAX + 16];
        struct prefetch *p;
        int r;

        if ((r = trace_store_key(name, key, sizeof(key))) < 0)
                return r;
        if (*owner)
                return -EBUSY;
        if (!(p = calloc(1, sizeof(*p))))
                return -ENOMEM;
        *p = (struct prefetch){ .tn = tn, .c = c, .subvol_fd = -1, .getting = true,
                                .started_usec = tierd_now_usec(tn->t) };
        snprintf(p->name, sizeof(p->name), "%s", name);
        if ((r = store_get(tn, key, TRACE_OBJECT_MAX, on_trace, p)) < 0) {
                free(p);
                return r;
        }
        *owner = p;
        return 0;
}

void prefetch_cancel(struct prefetch *p) {
        *owner_of(p) = NULL;
        p->cancelled = true;
        if (p->thread)
                offthread_abandon(p->thread, on_looked_up_abandoned);
        else if (!p->getting && !p->running)
                prefetch_free(p);
        /* else: the last callback frees it */
}
