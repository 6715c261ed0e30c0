/* SPDX-License-Identifier: MIT */
/*
 * tierd's one context: everything the daemon knows hangs off struct tierd.
 *
 * supervisor/ in families, one folder each:
 *   events/   the event path: read, decide, answer, record (preevent.c,
 *             dispatch.c, fillrecord.c), the groups and marks (fsgroup.c)
 *   files/    what tierd does to files: archive, release, restore, pin
 *             (fileops.c, release.c), batches of them (batch.c), and the
 *             local policy carried out: quotas, background archive, counts
 *   store/    the catalog and the store's upkeep: catalog*.c, gc, audit
 *   workers/  the tenants' workers and what they are given: credentials,
 *             headers, the store's addresses
 *   views/    tenant views on the host and in containers
 *   restart/  restarts without a gap: handover, fd store, keeper
 *   (top)     start, serve, stop (daemon.c, setup.c; main: cmd/tierd.c),
 *             policy reloads, systemd, logs, threads (offthread.c)
 *
 * Where things happen:
 *   events are served          events/preevent.c    (dispatch_pre_content_event)
 *   fills are decided          events/dispatch.c    (tfile_progress)
 *   fills are written          worker/fill.c        (in tierd-worker)
 *   fills are synced, recorded events/fillrecord.c  (tfile_fill_done)
 *   accessors are classified   common/readeraccess.c
 *   archive/release/restore    files/fileops.c      (release.c; paths found: fileref.c;
 *                                                    many files, or a long task: batch.c)
 *   a D-Bus method             dbus/managerbus.c    (every method in its vtable; a file per
 *                                                    object: tenantbus.c, jobbus.c...;
 *                                                    supervisor/ tells dbus/ by face.h)
 *   the policy is read         policy/policy.c      (watched: policywatch.c)
 *   the policy is decided      policy/engine.c      (carried out: files/quota.c,
 *                                                    files/autoarchive.c; file tables: usage.c)
 *   the catalog is kept        store/catalog.c      (snapshots: catalogsnapshot.c, journal
 *                                                    objects: catalogjournal.c; imported:
 *                                                    catalogimport.c)
 *   the store is collected     store/gc.c           (audited: store/audit.c)
 *   status is counted          files/tally.c        (trees walked off the loop: treewalk.c)
 *   fills are checked          worker/verify.c      (chunk manifests, common/manifest.c)
 *   systemd and the journal    sdstatus.c (STATUS=), journallog.c (log fields)
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "catalog-format.h"
#include "fdstore.h"
#include "policy.h"
#include "proto.h"
#include "ratebucket.h"

struct tierd;
struct tenant;
struct request;

struct tiered_fs {
        struct tierd *t;
        char *mountpoint; /* where the filesystem is mounted on the host */
        char *fstype;
        uint64_t fsid; /* statfs f_fsid of the mount point: names its groups in the fd store */
        int mnt_fd;   /* mounted by tierd ("filesystems"), still detached until marked; else -1 */
        bool boot_owned; /* mounted by this tierd or a predecessor it took over from: unmounted at a final stop */
        uint64_t mnt_id; /* the mount tree_fd clones (mountinfo's id): gc's walk finds it again (wholefs.h) */
        int tree_fd;  /* tierd's private mount: a detached clone (O_PATH) */
        int root_fd;  /* a directory fd on its root, the mount fd for handles */
        int fill_tree_fd, fill_root_fd; /* the fill mount: another such clone, for fill fds only */
        uint64_t atime_attr; /* the mount's own atime mode (MOUNT_ATTR_*): the clones are noatime, views keep it */
        int watch_fd; /* FAN_MODIFY through the fill mount: events/fillwatch.c */
        sd_event_source *watch_src;
        int pre_fd;   /* pre-content group: FAN_PRE_ACCESS | FAN_OPEN_PERM */
        int notif_fd; /* FAN_REPORT_FID notification group: FAN_CLOSE_WRITE */
        sd_event_source *pre_src, *notif_src;
        int use_fd; /* opens, writes, deletes for the file tables: usegroup.c */
        int catalog_fd; /* creates, deletes, renames for the catalogs: catalogwatch.c */
        uint64_t renames; /* heard by catalog_fd, anywhere on the filesystem (and overflows): gc.c's walk */
        sd_event_source *catalog_src;
        struct catalog_changes *catalog_changes; /* heard, not applied yet: catalogwatch.c */
        bool writes_maybe_missed; /* a notification queue overflowed: release checks content */
        sd_event_source *use_src;
};

enum worker_state { WORKER_STOPPED, WORKER_RUNNING, WORKER_RESTARTING, WORKER_FAILED };

struct container;

/* What a running worker is handed when it changes (worker_send_update). */
#define UPDATE_CREDENTIALS 1u
#define UPDATE_HEADERS 2u
#define UPDATE_RESOLVE 4u

struct worker {
        struct tenant *tenant;
        struct container *container; /* NULL: the tenant's host worker */
        pid_t pid;
        int sock;
        sd_event_source *io_src, *child_src, *restart_src, *fail_src, *stall_src;
        struct request *requests; /* in flight: re-sent to a replacement */
        unsigned restarts;        /* recent, for crash-loop detection */
        uint64_t restarts_total;  /* every death not of our doing */
        bool serial;              /* suspects run one at a time: workers.c */
        bool planned_restart;     /* killed by us for new settings */
        bool out_blocked;         /* its socket is full: what is unsent waits for EPOLLOUT */
        uint64_t blocked_usec;    /* since when */
        unsigned updates_due;     /* UPDATE_*: changed, not handed to it yet */
        uint64_t started_usec;
        uint64_t died_usec; /* the last death, until a replacement serves */
        enum worker_state state;
};

/* How long readers waited for their bytes: a histogram (cumulative counts
 * per upper bound, the last +Inf), which nodes can aggregate. */
#define LATENCY_BUCKETS 13
extern const double latency_bounds[LATENCY_BUCKETS];

struct wait_histogram {
        uint64_t buckets[LATENCY_BUCKETS]; /* not cumulative: one count per bucket */
        uint64_t count;
        double seconds;
};
void wait_histogram_add(struct wait_histogram *h, double seconds);

struct tenant_counters {
        uint64_t fills, fill_bytes, fill_errors, archives, releases;
        uint64_t quota_releases, quota_denials, auto_archives;
        uint64_t reads_denied; /* readers answered with an error */
        /* Traces (traces/): bytes fetched ahead, reads a trace heard find
         * their bytes here, and bytes fetched ahead that no read of the
         * run touched. */
        uint64_t prefetched_bytes, prefetch_hits, prefetch_wasted_bytes;
        uint64_t hydrated_files; /* "restore": "progressive": files read in part, then fetched whole */
        struct wait_histogram wait;
        char last_error[256];
};

/* A reader let go after seconds, with error (0: its bytes) or not: counted
 * for its tenant and, if route names one, its container. */
void tenant_record_wait(struct tenant *tn, uint64_t route, double seconds, int error);
void tenant_set_last_error(struct tenant *tn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct tenant_net;
struct tenant_aws;
struct trace_recording;
struct prefetch;
struct namer;

struct tenant {
        struct tierd *t;
        const struct policy_tenant *cfg;
        struct tiered_fs *fs;
        char *subvol_rel; /* the subvolume's path relative to fs->mountpoint */
        int subvol_fd;    /* the subvolume through the private mount */
        int store_fd;     /* file:// store directory handed to the worker */
        uid_t worker_uid; /* the worker's own uid and gid, from "worker_uids" */
        bool view_mounted;
        struct proto_credentials cred; /* s3: from the credentials file */
        bool have_cred;
        struct timespec cred_ctime; /* the credentials file last tried */
        off_t cred_size;
        ino_t cred_ino;
        char headers[PROTO_HEADERS_MAX]; /* http: configured headers, files read */
        uint64_t headers_stamp;          /* the "@FILE" header files last tried (secrets.c) */
        struct catalog_key catalog_key;  /* "catalog_key": authenticates its catalog objects */
        struct tenant_net *net;          /* its store's host, resolved for the workers: resolver.c */
        struct tenant_aws *aws;          /* s3: where its keys come from, fetched when temporary: awscreds.c */
        struct worker worker;
        struct tenant_counters counters;
        unsigned n_containers; /* attached, each with its own worker */
        struct trace_recording *recording; /* its host readers' trace: traces/trace.c */
        struct prefetch *prefetch;         /* a trace fetched ahead of its host readers: traces/prefetch.c */
        struct hydrate *hydrate;           /* files read in part, fetched whole next: traces/hydrate.c */
        struct pathwarm *pathwarm;         /* jobs waiting for a thread to walk their paths: files/pathwarm.c */
        struct namer *namer;               /* names of files whose dentries were dropped: files/namer.c */
        unsigned recordings;               /* open, its containers' and its own */
        struct trace_recording *saving;    /* runs being saved, one a trace name: trace.c */
        struct usage *usage; /* the file table, with a quota or archive_after: usage.c */
        sd_event_source *quota_src, *archive_src, *usage_save_src;
        uint64_t quota_pressure_usec, quota_stuck_until, busy_cleared_usec;
        uint64_t quota_reserved; /* bytes of fills admitted and not done yet */
        unsigned quota_checks;   /* read-back checks before quota releases, in flight */
        bool quota_catalog_wait; /* one of them: for the catalog to write entries */
        bool quota_name_wait;    /* one of them: for files' names (files/namer.h) */
        sd_event_source *quota_retry_src;
        struct checked_objects *checked; /* what recent checks found: remotecheck.c */
        struct catalog *catalog;         /* "catalog": true: catalog.c */
        struct gc_run *gc;               /* tierctl gc, while it runs: gc.c */
        struct audit_run *audit;         /* tierctl audit, while it runs: audit.c */
        struct tally *tally;             /* counts for status, read in O(1): tally.c */
        struct contentchecks *contentchecks; /* bytes against SHA-256 on a thread: contentcheck.c */
        struct inode_lane *inode_lane;       /* what takes an inode lock, on threads: events/inodework.c */
        bool inode_work_over;                /* it stopped: such work runs on the loop */
        unsigned auto_in_flight; /* background archives: autoarchive.c */
        struct rate_bucket archive_bucket;  /* archive_rate's: autoarchive.c */
        struct rate_bucket prefetch_bucket; /* prefetch_rate's: traces/pace.c */
        struct rate_bucket restore_bucket;  /* restore_rate's: events/restorepace.c */
        sd_event_source *restore_pace_src;  /* the turn of the files it parked */
        unsigned paced_files;               /* parked, waiting for their turn */
        uint64_t paced_next_seq, paced_asks;
};

/* A container the tenant's view is attached to (supervisor/views/containers.c):
 * its view sits in the container's mount namespace and its own worker
 * serves the container's readers. */
struct container {
        struct container *next;
        struct tenant *tenant;
        uint64_t serial; /* never reused: fills name their container by it */
        char *id, *rootfs, *mount_path, *k8s_namespace;
        char *cgroup;      /* its cgroup v2 path, if it has one of its own: routes events */
        uint64_t mntns_id; /* NS_GET_MNTNS_ID of its init: routes events without a cgroup */
        pid_t pid;
        uint64_t start_time; /* of its init (/proc/PID/stat): the same process after a restart */
        int pidfd, mntns_fd;
        sd_event_source *exit_src;
        uint64_t view_mnt_id; /* the placed view, to unmount only it */
        bool read_only, idmapped;
        uint64_t attached_usec;     /* CLOCK_REALTIME */
        uint64_t attach_took_usec;  /* from the request to the view served */
        uint64_t fills, fill_bytes, fill_errors;
        uint64_t prefetched_bytes, prefetch_hits, prefetch_wasted_bytes; /* its trace's, as a tenant's */
        struct wait_histogram wait; /* its readers' */
        struct trace_recording *recording; /* its readers' first touches: traces/trace.c */
        struct prefetch *prefetch;         /* its trace, fetched ahead of them: traces/prefetch.c */
        struct worker worker;
};

struct tfile;   /* a file with fills or waiters in flight: dispatch.c */
struct inflight; /* the in-flight record: common/inflight.c */
struct batch;   /* many files, or one long task: batch.c */
struct tierd_face; /* what is told to the face over supervisor/: face.h */

struct tierd {
        sd_event *event;
        sd_bus *bus;
        char *policy_path;
        const char *state_dir; /* last uses kept across restarts: usage.c */
        char *worker_path;
        struct policy *policy;
        struct tiered_fs *fss;
        size_t n_fss;
        struct tenant *tenants;
        size_t n_tenants;
        struct tfile *files;
        struct inode_work *inodework; /* events/inodework.c: its threads' results, to the loop */
        struct unsettled *unsettled, **unsettled_tail; /* settle.c: accessors not asleep yet */
        sd_event_source *settle_src;
        uint64_t next_request_id;
        struct fdstore store;    /* keeps groups and in-flight record across restarts */
        struct inflight *inflight; /* every event read and not yet answered */
        int keeper_pidfd;        /* shares our fd table: keeper.c */
        unsigned n_orphans;      /* events a predecessor left, until replayed */
        unsigned nofile;         /* RLIMIT_NOFILE */
        unsigned fds_in_flight;  /* event fds and fill fds held */
        unsigned fd_budget;      /* stop reading events beyond this */
        bool reading_paused;
        unsigned tallies_counting; /* tally.c: counts of whole trees running (at most one) */
        struct container *containers; /* attached: supervisor/views/containers.c */
        uint64_t last_container_serial;
        struct batch *batches; /* in the order they run: batch.c */
        uint32_t last_batch_id;
        unsigned batch_files_running;
        unsigned path_calls;   /* D-Bus calls by path waiting for their walks: dbus/pathbus.c */
        unsigned status_calls; /* FileStatusFds calls waiting for their stubs' reads: dbus/statusbus.c */
        unsigned imports_detached; /* catalogs turned off by a reload, an import's request still in flight */
        sd_event_source *batches_src;
        bool batches_pumping;
        const struct tierd_face *face; /* dbus/'s, once the bus is open; else NULL */
        bool stopping;
        bool handing_over; /* SIGTERM with a store: leave everything pending */
        sd_event_source *stop_src, *secrets_src, *resolver_src;
        sd_event_source *idle_src; /* a stop's check for idleness, after the callback at hand */
        int policy_inotify_fd; /* policywatch.c */
        sd_event_source *policy_watch_src, *policy_debounce_src, *sighup_src;
        uint64_t policy_hash; /* of the bytes last applied: the same bytes are not applied twice */
        sd_event_source *status_src; /* sdstatus.c: systemd's STATUS= */
        char status[200];            /* the line last sent */
};

/* A message to a worker and what to do with its reply. fd stays open in
 * tierd until the reply, so the request can be re-sent to a replacement. */
struct request {
        struct request *next;
        struct proto_request msg;
        int fd;
        bool fd_borrowed;       /* fd is the caller's: not closed here */
        uint64_t progress_usec; /* last heard moving */
        bool started;           /* the worker took it up (not queued behind others) */
        unsigned stalls;        /* workers killed while stuck on it */
        unsigned crashes;       /* workers that died while it alone was in progress */
        bool sent;              /* given to the current worker */
        bool suspect;           /* in progress with others at a death */
        void (*done)(struct request *req, const struct proto_reply *rep);
        void *userdata;
};

struct tenant *tierd_find_tenant(struct tierd *t, const char *name);
/* The event loop's monotonic clock (this iteration's time), in µs. */
static inline uint64_t tierd_now_usec(const struct tierd *t) {
        uint64_t now = 0;
        sd_event_now(t->event, CLOCK_MONOTONIC, &now);
        return now;
}

/* After the failures-th failure in a row: 1 s, doubling up to max_usec. */
static inline uint64_t retry_backoff_usec(unsigned failures, uint64_t max_usec) {
        unsigned shift = failures ? failures - 1 : 0;
        uint64_t usec = 1000 * 1000ull << (shift < 30 ? shift : 30);
        return usec < max_usec ? usec : max_usec;
}
/* handler(userdata) runs once from the loop, after the callback at hand
 * (*src is made the first time and kept: its owner frees it). */
static inline int tierd_defer_once(sd_event *e, sd_event_source **src, sd_event_handler_t handler, void *userdata) {
        int r = *src ? 0 : sd_event_add_defer(e, src, handler, userdata);
        return r < 0 ? r : sd_event_source_set_enabled(*src, SD_EVENT_ONESHOT);
}
/* Stop when idle: used by SIGTERM and checked whenever work completes. */
void tierd_check_idle(struct tierd *t);
