/* SPDX-License-Identifier: MIT */
#include "autoarchive.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "fileops.h"
#include "log.h"
#include "macro.h"
#include "namer.h"
#include "usage.h"

#define TICK_MIN_USEC (1000 * 1000ull)   /* look at most once a second */
#define TICK_MAX_USEC (60 * 1000 * 1000ull)
#define IN_FLIGHT_MAX 4                   /* uploads at once per tenant */
#define PLAN_MAX 64

struct auto_item {
        struct tenant *tn;
        struct file_ref ref;
        size_t index; /* in the file table: not compacted while archives are in flight */
        uint64_t size;
};

static uint64_t tick_usec(const struct tenant *tn) {
        uint64_t t = tn->cfg->archive_after_usec / 4;
        return t < TICK_MIN_USEC ? TICK_MIN_USEC : t > TICK_MAX_USEC ? TICK_MAX_USEC : t;
}

static void on_archived(void *userdata, int error, const char *message) {
        struct auto_item *it = userdata;
        struct tenant *tn = it->tn;

        tn->auto_in_flight--;
        usage_unflag_index(tn, it->index, ENGINE_ARCHIVING);
        if (error < 0)
                usage_flag_index(tn, it->index, ENGINE_BUSY); /* not again at once: it would head every plan */
        if (error == 0) {
                tn->counters.auto_archives++;
                log_info("tenant %s: archived %s in the background (unchanged for archive_after)", tn->cfg->name,
                         it->ref.name);
        } else
                log_warning("tenant %s: background archive of %s: %s", tn->cfg->name, it->ref.name,
                            message ?: strerror(-error));
        file_ref_done(&it->ref);
        free(it);
}

static void on_named(void *userdata) {
        struct tenant *tn = userdata;
        if (tn->archive_src)
                (void)sd_event_source_set_time_relative(tn->archive_src, 0);
}

/* The file at index as a file_ref (its name beneath the subvolume);
 * -EAGAIN: its name is being found on a thread (namer.h), ask next time. */
static int ref_of_index(struct tenant *tn, size_t index, struct file_ref *ref) {
        char view[PATH_MAX + 32], msg[256];
        _cleanup_free_ char *rel = NULL;
        struct stat st;
        _cleanup_close_ int fd = usage_open_index(tn, index, O_PATH);
        if (fd < 0)
                return fd;
        int r = usage_name_of_fd(tn, fd, &rel);
        if (r == -EAGAIN) {
                /* Full, or no memory: the next tick asks again. Named,
                 * the file is picked at once, while the name is fresh. */
                if (namer_ask(tn, fd) == 0)
                        (void)namer_after_batch(tn, on_named, tn);
                return -EAGAIN;
        }
        if (r < 0 || !*rel || fstat(fd, &st) < 0)
                return -ENOENT; /* moved out of the tenant, or deleted */
        snprintf(view, sizeof(view), "%s/%s", tn->cfg->mount, rel);
        int k = file_ref_from_path(tn->t, view, ref, msg, sizeof(msg));
        if (k == -EAGAIN) {
                /* A directory of the name is not in the lookup cache: the
                 * job walks it on a thread, and opens the name only if it
                 * still leads to this inode. */
                ref->dev = st.st_dev, ref->ino = st.st_ino;
                return 0;
        }
        if (k < 0)
                return -ENOENT;
        /* A name found a while ago on a thread may have gone to another file since. */
        if (ref->dev != st.st_dev || ref->ino != st.st_ino) {
                file_ref_done(ref);
                return -ENOENT;
        }
        return 0;
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        struct tenant *tn = userdata;
        uint32_t out[PLAN_MAX];
        size_t n;
        (void)usec;

        sd_event_source_set_time_relative(s, tick_usec(tn));
        /* archive_rate: a token bucket of bytes, refilled with time (at most
         * a minute's worth), spent as uploads start; in debt, none starts. */
        uint64_t now = tierd_now_usec(tn->t);
        bool ready = rate_ready(&tn->archive_bucket, tn->cfg->archive_rate, 60, now);
        if (!tn->cfg->archive_after_usec || !usage_tracked(tn) || tn->auto_in_flight >= IN_FLIGHT_MAX || !ready)
                return 0;
        const struct engine_file *files = usage_files(tn, &n);
        size_t k = engine_plan_archive(files, n, (uint32_t)time(NULL), (uint32_t)(tn->cfg->archive_after_usec / 1000000),
                                       tn->cfg->archive_min_size, out, PLAN_MAX);
        for (size_t i = 0; i < k && tn->auto_in_flight < IN_FLIGHT_MAX; i++) {
                if (!rate_ready(&tn->archive_bucket, tn->cfg->archive_rate, 60, now))
                        break;
                struct auto_item *it = calloc(1, sizeof(*it));
                if (!it)
                        break;
                it->tn = tn;
                it->index = out[i];
                it->size = files[out[i]].size;
                int r = ref_of_index(tn, out[i], &it->ref);
                if (r < 0) {
                        if (r != -EAGAIN)
                                usage_flag_index(tn, out[i], ENGINE_BUSY); /* unreachable now: another time */
                        free(it);
                        continue;
                }
                tn->auto_in_flight++;
                rate_spend(&tn->archive_bucket, it->size);
                usage_flag_index(tn, out[i], ENGINE_ARCHIVING); /* not picked again while in flight */
                if (file_job_when_cached(tn->t, &it->ref, job_archive, on_archived, it) < 0)
                        on_archived(it, -ENOMEM, NULL);
        }
        return 0;
}

void autoarchive_update(struct tenant *tn) {
        if (!tn->cfg->archive_after_usec) {
                autoarchive_stop(tn);
                return;
        }
        if (tn->archive_src)
                return;
        int r = sd_event_add_time_relative(tn->t->event, &tn->archive_src, CLOCK_MONOTONIC, tick_usec(tn), 0, on_tick, tn);
        if (r >= 0)
                r = sd_event_source_set_enabled(tn->archive_src, SD_EVENT_ON);
        if (r < 0)
                log_error_errno(r, "tenant %s: cannot start background archive: %m", tn->cfg->name);
}

void autoarchive_stop(struct tenant *tn) {
        tn->archive_src = sd_event_source_unref(tn->archive_src);
}
