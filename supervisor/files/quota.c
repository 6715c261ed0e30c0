/* SPDX-License-Identifier: MIT */
#include "quota.h"

#include <errno.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "catalog.h"
#include "contentcheck.h"
#include "dispatch.h"
#include "engine.h"
#include "face.h"
#include "fileops.h"
#include "log.h"
#include "macro.h"
#include "namer.h"
#include "remotecheck.h"
#include "usage.h"

#define PLAN_MAX 64       /* files released per plan; plans repeat while they free something */
#define PLAN_ROUNDS 16
#define PRESSURE_EVERY_USEC (1000 * 1000ull) /* QuotaPressure at most once a second per tenant */
#define BUSY_RETRY_USEC (60 * 1000 * 1000ull) /* files in use are tried again after this */
#define STUCK_USEC (10 * 1000 * 1000ull)      /* the watermark rests this long after freeing nothing */

static struct engine_limits limits_of(const struct tenant *tn) {
        return (struct engine_limits){ .quota = tn->cfg->quota, .high = tn->cfg->high_watermark,
                                       .low = tn->cfg->low_watermark };
}

/* Extents shared with a snapshot or a reflink: releasing frees nothing. */
static bool extents_shared(int fd) {
        union {
                struct fiemap fm;
                char buf[sizeof(struct fiemap) + 32 * sizeof(struct fiemap_extent)];
        } u;
        uint64_t start = 0;

        for (;;) {
                memset(&u, 0, sizeof(u));
                u.fm.fm_start = start;
                u.fm.fm_length = FIEMAP_MAX_OFFSET - start;
                u.fm.fm_extent_count = 32;
                if (ioctl(fd, FS_IOC_FIEMAP, &u.fm) < 0 || u.fm.fm_mapped_extents == 0)
                        return false;
                for (unsigned i = 0; i < u.fm.fm_mapped_extents; i++) {
                        const struct fiemap_extent *e = &u.fm.fm_extents[i];
                        if (e->fe_flags & FIEMAP_EXTENT_SHARED)
                                return true;
                        if (e->fe_flags & FIEMAP_EXTENT_LAST)
                                return false;
                        start = e->fe_logical + e->fe_length;
                }
        }
}

/* All read-back checks done: files that waited for theirs may go now, and
 * fills that waited for room try again (they get EDQUOT if still none). */
static int on_checks_done(sd_event_source *s, void *userdata) {
        struct tenant *tn = userdata;
        (void)s;
        usage_clear_flag(tn, ENGINE_BUSY);
        quota_candidates_changed(tn);
        dispatch_quota_retry(tn);
        return 0;
}

static void on_copy_checked(void *userdata, int error, const char *msg) {
        struct tenant *tn = userdata;
        (void)error, (void)msg; /* remembered by remotecheck.c, and logged */

        if (--tn->quota_checks > 0)
                return;
        /* Deferred: this may run inside a release plan. */
        int r = tierd_defer_once(tn->t->event, &tn->quota_retry_src, on_checks_done, tn);
        if (r < 0)
                log_error_errno(r, "tenant %s: cannot schedule the releases after a check: %m", tn->cfg->name);
}

static void on_content_checked(void *userdata) { on_copy_checked(userdata, 0, NULL); }

static void on_catalog_written(void *userdata) {
        struct tenant *tn = userdata;
        tn->quota_catalog_wait = false;
        on_copy_checked(tn, 0, NULL);
}

/* Files whose catalog entries are not in the store yet wait for the next
 * journal object (a second or so), and so do fills that need their room. */
static void wait_for_catalog(struct tenant *tn) {
        if (tn->quota_catalog_wait || catalog_when_written(tn, on_catalog_written, tn) < 0)
                return;
        tn->quota_catalog_wait = true;
        tn->quota_checks++;
}

/* A release punches the only local copy: the store must still hold the
 * archived one (remotecheck.h). Known from a check or an archive a moment
 * ago, or asked now: the file waits for the answer (flagged busy meanwhile),
 * and so does a fill that needs its room. */
static bool copy_known_good(struct tenant *tn, int fd, size_t index) {
        _cleanup_(stub_done) struct stub s = {};
        const char *err = "";
        int r;

        if (stub_read_fd(fd, &s, &err) < 0 || s.state != STUB_ARCHIVED)
                return true; /* job_release_fd says why not, or punches no only copy */
        r = remote_check_recent(tn, &s);
        if (r > 0)
                return true;
        usage_flag_index(tn, index, ENGINE_BUSY);
        if (r < 0)
                return false; /* logged when found */
        tn->quota_checks++;
        r = remote_check(tn, &s, on_copy_checked, tn);
        if (r < 0) {
                tn->quota_checks--;
                log_error_errno(r, "tenant %s: cannot check an archived copy before a release: %m", tn->cfg->name);
        }
        return false;
}

static void on_named(void *userdata) {
        struct tenant *tn = userdata;
        tn->quota_name_wait = false;
        on_copy_checked(tn, 0, NULL);
}

/* The globs of "pin" and the catalog's limits need the file's name. A
 * cold file's dentry may have been dropped: its name is then found on a
 * thread (namer.h), and the file waits for it (flagged busy meanwhile), as
 * a fill that needs its room does: until the batch on the thread ends
 * (the file's, or one before it: the plan runs again either way). */
static bool named_now(struct tenant *tn, int fd, size_t index) {
        _cleanup_free_ char *rel = NULL;
        if (!tn->cfg->pin[0] && !tn->cfg->catalog)
                return true;
        int r = usage_name_of_fd(tn, fd, &rel);
        /* No name to be found: btrfs's thread found none (moved meanwhile:
         * another time), or xfs and ext4, which keep none: the table's
         * pin, from its name when last seen, holds (the plan skips pinned). */
        if (!usage_name_unknown(r) || (r == -ESTALE && !namer_can_name(tn)))
                return true;
        usage_flag_index(tn, index, ENGINE_BUSY);
        if (r == -EAGAIN)
                (void)namer_ask(tn, fd); /* full: the batch running now ends first, and the plan asks again */
        if (r == -EAGAIN && !tn->quota_name_wait && namer_after_batch(tn, on_named, tn) == 0) {
                tn->quota_name_wait = true;
                tn->quota_checks++;
        }
        return false;
}

/* Releases the file at index; false if it could not be (in use, shared...). */
static bool release_index(struct tenant *tn, size_t index, const char *why) {
        char msg[512] = "", name[64];
        bool busy = false;
        int fd = usage_open_index(tn, index, O_RDWR);

        if (fd < 0) {
                usage_flag_index(tn, index, ENGINE_BUSY);
                return false;
        }
        if (extents_shared(fd)) {
                usage_flag_index(tn, index, ENGINE_SHARED);
                close(fd);
                return false;
        }
        if (!named_now(tn, fd, index)) {
                close(fd);
                return false;
        }
        /* Pins by glob follow the name now (a file renamed into a pinned
         * place is pinned). */
        if (usage_pinned_fd(tn, fd)) {
                usage_flag_index(tn, index, ENGINE_PINNED);
                close(fd);
                return false;
        }
        if (!copy_known_good(tn, fd, index)) {
                close(fd);
                return false;
        }
        snprintf(name, sizeof(name), "file #%zu of tenant %s", index, tn->cfg->name);
        int r = job_release_fd(tn, fd, name, msg, sizeof(msg), &busy);
        if (r == -EINPROGRESS)
                wait_for_catalog(tn);
        /* Its bytes are being checked on a thread: fills that need the
         * room wait for the answer, and the plan runs again after. */
        if (r == -EAGAIN) {
                tn->quota_checks++;
                if (content_when_checked(tn, fd, on_content_checked, NULL, tn) < 0)
                        tn->quota_checks--;
        }
        if (r == 0) {
                usage_update_fd(tn, fd);
                tn->counters.quota_releases++;
                log_info("tenant %s: released for %s (least recently used)", tn->cfg->name, why);
        } else {
                usage_flag_index(tn, index, ENGINE_BUSY);
                log_debug("tenant %s: not released for %s: %s", tn->cfg->name, why, msg);
        }
        close(fd);
        return r == 0;
}

/* Local bytes, and bytes admitted for fills still in flight. */
static uint64_t committed(const struct tenant *tn) {
        return usage_used(tn) + tn->quota_reserved;
}

/* Plans and releases until used + need is under the target or nothing more
 * can go; how many files went. */
static unsigned release_for(struct tenant *tn, uint64_t need, size_t skip, const char *why) {
        struct engine_limits l = limits_of(tn);
        uint32_t out[PLAN_MAX];
        unsigned total = 0;
        size_t n;

        if (tierd_now_usec(tn->t) - tn->busy_cleared_usec > BUSY_RETRY_USEC) {
                usage_clear_flag(tn, ENGINE_BUSY); /* in use a while ago: worth another try */
                tn->busy_cleared_usec = tierd_now_usec(tn->t);
        }
        for (int round = 0; round < PLAN_ROUNDS; round++) {
                const struct engine_file *files = usage_files(tn, &n);
                uint64_t freed;
                size_t k = engine_plan_release(files, n, &l, committed(tn), need, skip, out, PLAN_MAX, &freed);
                unsigned released = 0;
                if (k == 0)
                        break;
                for (size_t i = 0; i < k; i++)
                        released += release_index(tn, out[i], why);
                total += released;
        }
        return total;
}

static void pressure(struct tenant *tn, uint64_t need) {
        uint64_t now = tierd_now_usec(tn->t);
        tn->counters.quota_denials++;
        if (tn->quota_pressure_usec && now - tn->quota_pressure_usec < PRESSURE_EVERY_USEC)
                return;
        tn->quota_pressure_usec = now;
        log_warning("tenant %s: quota pressure: %llu bytes local, quota %llu, a fill of %llu bytes denied (EDQUOT): "
                    "nothing more can be released (pinned, dirty, in use or never archived)",
                    tn->cfg->name, (unsigned long long)usage_used(tn), (unsigned long long)tn->cfg->quota,
                    (unsigned long long)need);
        tenant_set_last_error(tn, "quota: a fill of %llu bytes denied with %llu of %llu bytes local",
                              (unsigned long long)need, (unsigned long long)usage_used(tn),
                              (unsigned long long)tn->cfg->quota);
        FACE_TELL(tn->t, tenant_quota_pressure, tn, need);
}

bool quota_room(struct tenant *tn, uint64_t need) {
        struct engine_limits l = limits_of(tn);
        uint64_t used = committed(tn);
        /* Under the high watermark too: above it, the planner releases. */
        return !usage_tracked(tn) || !l.quota || (engine_fits(&l, used, need) && !engine_over_high(&l, used + need));
}

int quota_admit(struct tenant *tn, int fd, uint64_t need) {
        struct engine_limits l = limits_of(tn);

        if (!usage_tracked(tn) || !l.quota || engine_fits(&l, committed(tn), need))
                return 0;
        release_for(tn, need, usage_index_of_fd(tn, fd), "a fill over quota");
        if (engine_fits(&l, committed(tn), need))
                return 0;
        if (tn->quota_checks)
                return -EAGAIN; /* room may come once the store answers */
        pressure(tn, need);
        return -EDQUOT;
}

static int on_high_watermark(sd_event_source *s, void *userdata) {
        struct tenant *tn = userdata;
        (void)s;
        if (release_for(tn, 0, SIZE_MAX, "the high watermark") == 0)
                tn->quota_stuck_until = tierd_now_usec(tn->t) + STUCK_USEC; /* do not retry after every fill */
        return 0;
}

void quota_candidates_changed(struct tenant *tn) {
        tn->quota_stuck_until = 0;
        quota_check_high(tn);
}

void quota_check_high(struct tenant *tn) {
        struct engine_limits l = limits_of(tn);

        if (!usage_tracked(tn) || !engine_over_high(&l, committed(tn)) || tierd_now_usec(tn->t) < tn->quota_stuck_until)
                return;
        int r = tierd_defer_once(tn->t->event, &tn->quota_src, on_high_watermark, tn);
        if (r < 0)
                log_error_errno(r, "tenant %s: cannot schedule a release: %m", tn->cfg->name);
}

void quota_stop(struct tenant *tn) {
        tn->quota_src = sd_event_source_unref(tn->quota_src);
        tn->quota_retry_src = sd_event_source_unref(tn->quota_retry_src);
}
