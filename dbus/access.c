/* SPDX-License-Identifier: MIT */
/*
 * Who may change files: root, or a member of the policy's admin_group.
 * Who is asking comes from the bus (callers.c). Group membership comes
 * from the bus too where it says the groups the caller had when it
 * connected (UnixGroupIDs: dbus-daemon on a kernel with SO_PEERGROUPS);
 * else from the user database for the caller's uid.
 *
 * The user database may be a network service (LDAP, sssd): it is asked
 * on a thread, never on the loop that also answers every tenant's
 * readers, and the method waits aside as it does for the bus (callers.h).
 * What it says is kept a minute: admin_group's id (a gid changed or
 * reused may be trusted that long) and, per uid, whether it is a member
 * (someone added to the group or taken out of it may wait that long, as
 * with nscd or sssd's own caches; a lookup that failed, or was not
 * answered in 10 s, is kept 5 s and its callers told TryAgain). Any
 * local user may call: each costs one lookup a minute, for at most
 * VERDICTS_MAX users at once, with LOOKUPS_MAX threads at most.
 */
#include "access.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "callers.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "pathbus.h"

#define LOOKUP_TTL_USEC (60 * 1000000ULL)
#define FAILED_TTL_USEC (5 * 1000000ULL)
#define VERDICTS_MAX 64
#define LOOKUPS_MAX 4
/* A lookup not answered in 10 s counts as failed, its thread left to end
 * (a database that does not answer: LDAP down); once 4 are left so,
 * none is started until one ends. */
#define LOOKUP_TIMEOUT_USEC (10 * 1000000ULL)
#define STUCK_MAX 4
#define NAME_MAX_LEN 64

/* One question for the user database, on a thread: admin_group's id,
 * and (want_member) whether uid is in it. */
struct lookup {
        char group[NAME_MAX_LEN];
        bool want_member;
        uid_t uid;
        int group_found; /* results: 1, 0 (no such group), -1 (could not say) */
        gid_t gid;
        int member; /* 1, 0, -1: could not say */
        struct offthread *thread;
        sd_event_source *timeout_src;
        struct tierd *t;
};

static struct {
        char group[NAME_MAX_LEN];
        int found; /* as struct lookup's group_found */
        gid_t gid;
        uint64_t until; /* 0: not known */
} admin_gid;

static struct verdict {
        uid_t uid;
        char group[NAME_MAX_LEN];
        int member;     /* as struct lookup's */
        uint64_t until; /* 0: a free slot */
} verdicts[VERDICTS_MAX];

static struct lookup *lookups[LOOKUPS_MAX];
static unsigned stuck; /* lookups given up, their threads not ended yet */

/* getgrnam_r and the like, with a buffer grown until the entry fits
 * (a group of many members is long). */
#define NSS_RETRY(buf, size, call) \
        ({ \
                int r_; \
                for (size = 4096;; size *= 2) { \
                        free(buf); \
                        if (!(buf = malloc(size))) { r_ = ENOMEM; break; } \
                        r_ = (call); \
                        if (r_ != ERANGE || size >= (1U << 20)) break; \
                } \
                r_; \
        })

static int user_in_group_work(uid_t uid, gid_t gid) {
        _cleanup_free_ char *buf = NULL;
        _cleanup_free_ gid_t *groups = NULL;
        struct passwd pw, *res = NULL;
        int n = 64, k;
        size_t size;

        if (NSS_RETRY(buf, size, getpwuid_r(uid, &pw, buf, size, &res)) != 0 || !res)
                return -1;
        if (pw.pw_gid == gid)
                return 1;
        for (;;) { /* n grows to the user's count of groups */
                free(groups);
                if (n > 65536 || !(groups = calloc((size_t)n, sizeof(gid_t))))
                        return -1;
                k = n;
                if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) >= 0)
                        break;
                if (n <= k)
                        return -1;
        }
        for (int i = 0; i < n && i < k; i++)
                if (groups[i] == gid)
                        return 1;
        return 0;
}

/* On a thread: the user database may be a network service. */
static void lookup_work(void *userdata) {
        struct lookup *l = userdata;
        _cleanup_free_ char *buf = NULL;
        struct group gr, *res = NULL;
        size_t size;

        /* Test builds: a user database that takes its time (LDAP). */
        offthread_test_pause("TIERD_TEST_USERDB_PAUSE_MS", "the user database lookup");
        int r = NSS_RETRY(buf, size, getgrnam_r(l->group, &gr, buf, size, &res));
        l->group_found = r == 0 && res ? 1 : r == 0 || r == ENOENT ? 0 : -1;
        l->gid = l->group_found > 0 ? gr.gr_gid : (gid_t)-1;
        if (l->want_member)
                l->member = l->group_found > 0 ? user_in_group_work(l->uid, l->gid) : l->group_found;
}

static struct verdict *verdict_find(uid_t uid, const char *group) {
        for (size_t i = 0; i < VERDICTS_MAX; i++)
                if (verdicts[i].until && verdicts[i].uid == uid && strcmp(verdicts[i].group, group) == 0)
                        return &verdicts[i];
        return NULL;
}

/* Kept over the verdict soonest to expire. */
static void verdict_keep(const struct lookup *l, uint64_t now) {
        struct verdict *v = verdict_find(l->uid, l->group);
        if (!v) {
                v = &verdicts[0];
                for (size_t i = 1; i < VERDICTS_MAX; i++)
                        if (verdicts[i].until < v->until)
                                v = &verdicts[i];
        }
        *v = (struct verdict){ .uid = l->uid, .member = l->member };
        snprintf(v->group, sizeof(v->group), "%s", l->group);
        v->until = now + (l->member >= 0 ? LOOKUP_TTL_USEC : FAILED_TTL_USEC);
}

/* What the lookup said, kept; a failure does not replace what a lookup
 * that answered said of admin_group's id. */
static void lookup_keep(const struct lookup *l, uint64_t now) {
        bool same = strcmp(admin_gid.group, l->group) == 0;
        if (l->group_found >= 0 || !same || now >= admin_gid.until || admin_gid.found < 0) {
                snprintf(admin_gid.group, sizeof(admin_gid.group), "%s", l->group);
                admin_gid.found = l->group_found;
                admin_gid.gid = l->gid;
                admin_gid.until = now + (l->group_found >= 0 ? LOOKUP_TTL_USEC : FAILED_TTL_USEC);
        }
        if (l->want_member)
                verdict_keep(l, now);
}

static void lookup_forget(struct lookup *l) {
        for (size_t i = 0; i < LOOKUPS_MAX; i++)
                if (lookups[i] == l)
                        lookups[i] = NULL;
        l->timeout_src = sd_event_source_disable_unref(l->timeout_src);
}

static void lookup_done(void *userdata) {
        struct lookup *l = userdata;
        lookup_keep(l, tierd_now_usec(l->t));
        lookup_forget(l);
        free(l);
        callers_wake_all();
}

static void stuck_release(void *userdata) {
        free(userdata);
        stuck--;
}

static int on_lookup_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        struct lookup *l = userdata;
        /* Its inputs only: the thread may still write its results. */
        struct lookup failed = { .want_member = l->want_member, .uid = l->uid, .group_found = -1, .member = -1,
                                 .gid = (gid_t)-1 };
        (void)s;

        memcpy(failed.group, l->group, sizeof(failed.group));
        log_warning("the user database did not answer about group %s in 10 s: its callers are told to try again", l->group);
        lookup_keep(&failed, usec);
        lookup_forget(l);
        stuck++;
        offthread_abandon(l->thread, stuck_release);
        callers_wake_all();
        return 0;
}

static int lookup_new(struct tierd *t, const char *group, bool want_member, uid_t uid, struct lookup **ret) {
        struct lookup *l = calloc(1, sizeof(*l));
        int r = l ? 0 : -ENOMEM;
        if (l) {
                *l = (struct lookup){ .want_member = want_member, .uid = uid, .t = t };
                snprintf(l->group, sizeof(l->group), "%s", group);
                r = sd_event_add_time_relative(t->event, &l->timeout_src, CLOCK_MONOTONIC, LOOKUP_TIMEOUT_USEC, 0,
                                               on_lookup_timeout, l);
        }
        if (r >= 0)
                r = offthread_start(t->event, NULL, 0, lookup_work, lookup_done, l, &l->thread);
        if (r < 0 && l) {
                sd_event_source_disable_unref(l->timeout_src);
                free(l);
        }
        *ret = r < 0 ? NULL : l;
        return r;
}

/* Asks the user database (unless that is being asked already, or
 * LOOKUPS_MAX are), and puts m aside until it answers: 1, or < 0. */
static int lookup_start(struct tierd *t, sd_bus_message *m, const char *group, bool want_member, uid_t uid,
                        sd_bus_error *error) {
        struct lookup **slot = NULL;
        for (size_t i = 0; i < LOOKUPS_MAX; i++) {
                struct lookup *l = lookups[i];
                if (!l)
                        slot = slot ?: &lookups[i];
                else if (strcmp(l->group, group) == 0 && l->want_member == want_member && (!want_member || l->uid == uid))
                        return callers_wait(m, uid, error);
        }
        if (slot && stuck >= STUCK_MAX)
                return sd_bus_error_setf(error, ERROR_TRY_AGAIN, "the user database does not answer: cannot say "
                                         "whether uid %u is in group %s; try again later", (unsigned)uid, group);
        if (slot) {
                int r = lookup_new(t, group, want_member, uid, slot);
                if (r < 0)
                        return sd_bus_error_set_errnof(error, -r, "cannot look the caller up: %m");
        }
        return callers_wait(m, uid, error); /* woken when any lookup ends */
}

/* 0: a member of group; -EACCES (error not set): not; > 0: being looked
 * up (m aside); else < 0 with error set. */
static int check_group(struct tierd *t, sd_bus_message *m, const char *group, const struct caller_creds *cr,
                       sd_bus_error *error) {
        uint64_t now = tierd_now_usec(t);
        int member;

        if (!cr->have_groups) {
                const struct verdict *v = verdict_find(cr->uid, group);
                if (!v || now >= v->until)
                        return lookup_start(t, m, group, true, cr->uid, error);
                member = v->member;
        } else if (strcmp(admin_gid.group, group) != 0 || now >= admin_gid.until)
                return lookup_start(t, m, group, false, cr->uid, error);
        else
                member = admin_gid.found;
        if (member < 0)
                return sd_bus_error_setf(error, ERROR_TRY_AGAIN, "the user database did not say whether uid %u is in "
                                         "group %s: try again", (unsigned)cr->uid, group);
        if (!cr->have_groups)
                return member > 0 ? 0 : -EACCES;
        for (size_t i = 0; admin_gid.found > 0 && i < cr->n_groups; i++)
                if (cr->groups[i] == admin_gid.gid)
                        return 0;
        return -EACCES;
}

int bus_check_root(sd_bus_message *m, sd_bus_error *error) {
        const struct caller_creds *cr = NULL;
        int r = callers_lookup(m, &cr, error);
        if (r != 0)
                return r;
        if (cr->uid != 0)
                return sd_bus_error_setf(error, ERROR_ACCESS_DENIED, "only root may call %s (caller is uid %u)",
                                         sd_bus_message_get_member(m), (unsigned)cr->uid);
        return 0;
}

int bus_check_admin(struct tierd *t, sd_bus_message *m, sd_bus_error *error) {
        const struct caller_creds *cr = NULL;
        const char *group = t->policy->admin_group;
        int r = callers_lookup(m, &cr, error);

        if (r != 0 || cr->uid == 0)
                return r;
        if (!group)
                return sd_bus_error_setf(error, ERROR_ACCESS_DENIED, "only root may change files (caller is uid %u)",
                                         (unsigned)cr->uid);
        if ((r = check_group(t, m, group, cr, error)) != -EACCES || sd_bus_error_is_set(error))
                return r;
        return sd_bus_error_setf(error, ERROR_ACCESS_DENIED,
                                 "only root or members of group %s may change files (caller is uid %u)", group,
                                 (unsigned)cr->uid);
}

void access_close(void) {
        for (size_t i = 0; i < LOOKUPS_MAX; i++)
                if (lookups[i]) {
                        struct lookup *l = lookups[i];
                        lookup_forget(l);
                        offthread_abandon(l->thread, free);
                }
        admin_gid.until = 0;
        memset(verdicts, 0, sizeof(verdicts));
}
