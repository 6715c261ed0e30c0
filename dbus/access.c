/* SPDX-License-Identifier: MIT */
/*
 * Who is asking, from the bus's own record of the caller
 * (GetConnectionCredentials), never /proc: a process may exit and its pid be
 * reused between its call and our look. The bus gives the uid; it gives the
 * groups too from dbus 1.15 (UnixGroupIDs). With an older bus (Debian 12's
 * 1.14) group membership comes from the user database for that uid.
 *
 * The user database may be a network service (LDAP, sssd), and the loop
 * that asks it also answers every tenant's readers: so admin_group's id
 * is asked once a minute at most (a gid changed or reused may be
 * trusted that long), and a caller the database says is outside the group
 * is not asked about again for a minute (someone added to the group may
 * wait that long; someone taken out is refused at once, as a member is
 * looked up each time; a lookup that failed is not remembered). Any local
 * user may call; they cost one lookup a minute each, for at most 64 users
 * at a time.
 */
#include "access.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"

static void creds_unrefp(sd_bus_creds **c) { sd_bus_creds_unref(*c); }

#define LOOKUP_TTL_USEC (60 * 1000000ULL)
#define OUTSIDE_MAX 64

static struct {
        char name[64];
        bool found;
        gid_t gid;
        uint64_t until;
} admin_gid;

static struct {
        uid_t uid;
        gid_t gid;
        uint64_t until; /* 0: free */
} outside[OUTSIDE_MAX];
static unsigned outside_next;

/* admin_group's id: 0, or -ENOENT (no such group). */
static int group_gid(const char *group, uint64_t now, gid_t *ret) {
        if (strcmp(admin_gid.name, group) != 0 || now >= admin_gid.until) {
                struct group gr, *res = NULL;
                char buf[4096];
                snprintf(admin_gid.name, sizeof(admin_gid.name), "%s", group);
                admin_gid.found = getgrnam_r(group, &gr, buf, sizeof(buf), &res) == 0 && res;
                admin_gid.gid = admin_gid.found ? gr.gr_gid : (gid_t)-1;
                admin_gid.until = now + LOOKUP_TTL_USEC;
        }
        *ret = admin_gid.gid;
        return admin_gid.found ? 0 : -ENOENT;
}

static bool known_outside(uid_t uid, gid_t gid, uint64_t now) {
        for (size_t i = 0; i < OUTSIDE_MAX; i++)
                if (outside[i].until > now && outside[i].uid == uid && outside[i].gid == gid)
                        return true;
        return false;
}

static void note_outside(uid_t uid, gid_t gid, uint64_t now) {
        outside[outside_next] = (typeof(outside[0])){ .uid = uid, .gid = gid, .until = now + LOOKUP_TTL_USEC };
        outside_next = (outside_next + 1) % OUTSIDE_MAX;
}

/* 1: a member, 0: not (the database said so), -1: not known (no such
 * user, a lookup that failed, more groups than room). */
static int user_in_group(uid_t uid, gid_t gid) {
        struct passwd pw, *res = NULL;
        char buf[4096];
        gid_t groups[256];
        int n = ARRAY_SIZE(groups);

        if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
                return -1;
        if (pw.pw_gid == gid)
                return 1;
        if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
                return -1;
        for (int i = 0; i < n; i++)
                if (groups[i] == gid)
                        return 1;
        return 0;
}

static bool creds_in_group(sd_bus_creds *c, uid_t uid, gid_t gid, uint64_t now) {
        const gid_t *gids;
        gid_t egid;
        int n = sd_bus_creds_get_supplementary_gids(c, &gids);

        if (n < 0) { /* the bus does not say: the user database does, once a minute for one outside */
                if (known_outside(uid, gid, now))
                        return false;
                int k = user_in_group(uid, gid);
                if (k == 0)
                        note_outside(uid, gid, now);
                return k > 0;
        }
        if (sd_bus_creds_get_egid(c, &egid) >= 0 && egid == gid)
                return true;
        for (int i = 0; i < n; i++)
                if (gids[i] == gid)
                        return true;
        return false;
}

static int caller_creds(sd_bus_message *m, sd_bus_creds **ret, uid_t *uid, sd_bus_error *error) {
        int r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID | SD_BUS_CREDS_EGID | SD_BUS_CREDS_SUPPLEMENTARY_GIDS, ret);
        if (r >= 0)
                r = sd_bus_creds_get_euid(*ret, uid);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "cannot identify the caller: %m");
        return 0;
}

int bus_check_root(sd_bus_message *m, sd_bus_error *error) {
        _cleanup_(creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t uid = (uid_t)-1;
        int r = caller_creds(m, &creds, &uid, error);
        if (r < 0)
                return r;
        if (uid != 0)
                return sd_bus_error_setf(error, ERROR_ACCESS_DENIED, "only root may call %s (caller is uid %u)",
                                         sd_bus_message_get_member(m), (unsigned)uid);
        return 0;
}

int bus_check_admin(struct tierd *t, sd_bus_message *m, sd_bus_error *error) {
        _cleanup_(creds_unrefp) sd_bus_creds *creds = NULL;
        const char *group = t->policy->admin_group;
        uid_t uid = (uid_t)-1;
        int r = caller_creds(m, &creds, &uid, error);

        if (r < 0)
                return r;
        if (uid == 0)
                return 0;
        if (group) {
                uint64_t now = tierd_now_usec(t);
                gid_t gid;
                if (group_gid(group, now, &gid) == 0 && creds_in_group(creds, uid, gid, now))
                        return 0;
                return sd_bus_error_setf(error, ERROR_ACCESS_DENIED,
                                         "only root or members of group %s may change files (caller is uid %u)", group,
                                         (unsigned)uid);
        }
        return sd_bus_error_setf(error, ERROR_ACCESS_DENIED, "only root may change files (caller is uid %u)",
                                 (unsigned)uid);
}
