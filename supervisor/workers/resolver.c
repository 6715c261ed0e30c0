/* SPDX-License-Identifier: MIT */
/*
 * The store's host name (or its proxy's, proxy.h: what the workers connect
 * to), resolved for the workers, which ask no DNS server (their sandbox
 * reads no /etc/resolv.conf). A lookup runs on a thread: a
 * DNS server is the network's to stall, and the event loop waits on
 * nothing the network controls. Every address the name gives goes to the
 * workers (curl tries them in turn), and the name is looked up again:
 * - every RESOLVE_EVERY (getaddrinfo does not say a TTL; the host's
 *   resolver cache keeps to it);
 * - soon after a request failed (RESOLVE_AFTER_FAILURE), the store may
 *   have moved;
 * - after a failed lookup, with a backoff from 1 s to RESOLVE_RETRY_MAX,
 *   until it answers: a store whose name does not resolve at boot heals by
 *   itself.
 * A changed answer reaches the running workers (PROTO_RESOLVE). Until the
 * first lookup ends, a worker's requests wait (workers.c): a fill sent
 * before would fail its reader for want of an address.
 */
#include "resolver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "containers.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "proxy.h"
#include "proto.h"
#include "url.h"
#include "workers.h"

#define RESOLVE_EVERY_USEC (60 * 1000 * 1000ull)
#define RESOLVE_AFTER_FAILURE_USEC (5 * 1000 * 1000ull)
#define RESOLVE_RETRY_MAX_USEC (10 * 1000 * 1000ull)
#define RESOLVE_TICK_USEC (500 * 1000ull)

struct lookup {
        char host[256];
        unsigned port;
        char answer[PROTO_URL_MAX]; /* "HOST:PORT:ADDR,..." */
        int gai_error;
        struct tenant *tn;
};

struct tenant_net {
        char host[256];
        unsigned port;
        char answer[PROTO_URL_MAX];
        bool answered;  /* the first lookup ended, well or not */
        bool failing;   /* the last lookup failed (logged once) */
        unsigned failures;
        uint64_t next_usec, last_usec;
        struct offthread *thread; /* a lookup in flight */
        struct lookup *lookup;
        char proxy_said[300]; /* the proxy (or why none) last logged */
        /* What its workers connect to, from resolver_target when its
         * settings last changed (workerspawn.c reads it at each start). */
        bool target_ok, target_tls, target_is_address;
        unsigned target_port;
        char target_proxy[300];
};

int resolver_endpoint(const struct policy_tenant *p, char *host, size_t size, unsigned *port, bool *tls) {
        struct backend_url url;
        struct http_url h;
        char base[PROTO_URL_MAX] = "", bucket[72] = ""; /* 63 characters and a dot */
        int r;

        if (backend_url_parse(p->backend, &url, NULL) < 0)
                return -EINVAL;
        if (url.kind == BACKEND_S3 && p->endpoint)
                snprintf(base, sizeof(base), "%s", p->endpoint);
        else if (url.kind == BACKEND_S3) /* the worker's default: AWS's regional endpoint */
                snprintf(base, sizeof(base), "https://s3.%s.%s", p->region ?: "us-east-1", aws_domain(p->region));
        else if (url.kind == BACKEND_HTTP)
                snprintf(base, sizeof(base), "%s", url.base);
        if (url.kind == BACKEND_S3 && p->virtual_hosted)
                snprintf(bucket, sizeof(bucket), "%s.", url.bucket);
        backend_url_done(&url);
        if (!base[0] || (r = http_url_parse(base, &h, &(const char *){ NULL })) < 0)
                return -EINVAL;
        snprintf(host, size, "%s%s", bucket, h.host);
        *port = h.port;
        *tls = h.tls;
        http_url_done(&h);
        return 0;
}

int resolver_target(const struct policy_tenant *p, char *host, size_t size, unsigned *port, bool *tls,
                    struct proxy *proxy, const char **error) {
        int r = resolver_endpoint(p, host, size, port, tls);
        *error = NULL;
        *proxy = (struct proxy){};
        if (r < 0)
                return r;
        r = proxy_for(host, *tls, proxy, error);
        if (r < 0) /* never around a proxy that cannot be used */
                return -EINVAL;
        if (r == 0)
                return 0;
        snprintf(host, size, "%s", proxy->host);
        *port = proxy->port;
        return 1;
}

/* On the thread: every address of the name, once each, in its order. */
static void lookup_work(void *userdata) {
        struct lookup *l = userdata;
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
        size_t n = (size_t)snprintf(l->answer, sizeof(l->answer), "%s:%u:", l->host, l->port), first = n;

        if ((l->gai_error = getaddrinfo(l->host, NULL, &hints, &res)) != 0)
                return;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                char addr[INET6_ADDRSTRLEN + 2], text[INET6_ADDRSTRLEN];
                const void *a = ai->ai_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr
                                                          : (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr;
                if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
                    !inet_ntop(ai->ai_family, a, text, sizeof(text)))
                        continue;
                snprintf(addr, sizeof(addr), ai->ai_family == AF_INET6 ? "[%s]" : "%s", text);
                /* Once each: getaddrinfo gives one per socket type it could. */
                char *dup = strstr(l->answer + first, addr);
                size_t alen = strlen(addr);
                if (dup && (dup[alen] == ',' || dup[alen] == '\0') && (dup[-1] == ',' || dup[-1] == ':'))
                        continue;
                if (n + alen + 2 > sizeof(l->answer))
                        break;
                n += (size_t)snprintf(l->answer + n, sizeof(l->answer) - n, "%s%s", n > first ? "," : "", addr);
        }
        freeaddrinfo(res);
        if (n == first)
                l->gai_error = EAI_NONAME;
}

static void lookup_release(void *userdata) { free(userdata); }

static void handover_answer(struct tenant *tn) {
        worker_send_update(&tn->worker, UPDATE_RESOLVE);
        containers_send_update(tn, UPDATE_RESOLVE);
}

/* On the loop. */
static void lookup_done(void *userdata) {
        struct lookup *l = userdata;
        struct tenant *tn = l->tn;
        struct tenant_net *net = tn->net;
        uint64_t now = tierd_now_usec(tn->t);
        bool first = !net->answered, changed = false;

        net->thread = NULL;
        net->lookup = NULL;
        if (strcmp(l->host, net->host) != 0 || l->port != net->port) {
                free(l); /* the store moved meanwhile (reload): the next lookup is due */
                return;
        }
        if (l->gai_error) {
                net->failures++;
                net->next_usec = now + retry_backoff_usec(net->failures, RESOLVE_RETRY_MAX_USEC);
                if (!net->failing)
                        log_warning("tenant %s: cannot resolve %s: %s (%s); trying again", tn->cfg->name, l->host,
                                    gai_strerror(l->gai_error), net->answer[0] ? "keeping its last addresses" :
                                                                               "its fills fail until it resolves");
                net->failing = true;
        } else {
                net->failures = 0;
                net->next_usec = now + RESOLVE_EVERY_USEC;
                changed = strcmp(l->answer, net->answer) != 0;
                if (changed || net->failing)
                        log_info("tenant %s: %s", tn->cfg->name, l->answer);
                net->failing = false;
                if (changed)
                        snprintf(net->answer, sizeof(net->answer), "%s", l->answer);
        }
        net->answered = true;
        free(l);
        /* The first answer, even a failure, lets held requests go. */
        if (changed || first)
                handover_answer(tn);
}

static void lookup_start(struct tenant *tn, uint64_t now) {
        struct tenant_net *net = tn->net;
        struct lookup *l = calloc(1, sizeof(*l));
        if (!l)
                return;
        snprintf(l->host, sizeof(l->host), "%s", net->host);
        l->port = net->port;
        l->tn = tn;
        net->last_usec = now;
        if (offthread_start(tn->t->event, NULL, 0, lookup_work, lookup_done, l, &net->thread) < 0) {
                free(l);
                net->thread = NULL;
                net->next_usec = now + RESOLVE_AFTER_FAILURE_USEC;
                return;
        }
        net->lookup = l;
}

static int on_resolver_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        struct tierd *t = userdata;
        uint64_t now = tierd_now_usec(t);
        for (size_t i = 0; i < t->n_tenants; i++) {
                struct tenant_net *net = t->tenants[i].net;
                if (net && net->host[0] && !net->thread && now >= net->next_usec)
                        lookup_start(&t->tenants[i], now);
        }
        sd_event_source_set_time(s, usec + RESOLVE_TICK_USEC);
        return 0;
}

bool resolver_is_address(const char *host) {
        struct in6_addr a;
        return inet_pton(AF_INET, host, &a) == 1 || inet_pton(AF_INET6, host, &a) == 1;
}

void resolver_tenant_changed(struct tenant *tn) {
        struct tenant_net *net = tn->net;
        char host[256] = "";
        unsigned port = 0;
        bool tls = false;
        struct proxy proxy;
        const char *why = NULL;
        int r = net ? resolver_target(tn->cfg, host, sizeof(host), &port, &tls, &proxy, &why) : -EINVAL;

        if (net && (r > 0 || why) && strcmp(why ?: proxy.url, net->proxy_said) != 0) { /* said once */
                if (why)
                        log_error("tenant %s: the proxy in tierd's environment cannot be used (%s): its store is not "
                                  "reached (readers get EIO) until the proxy is fixed, or no_proxy names the store",
                                  tn->cfg->name, why);
                else
                        log_info("tenant %s: its store is reached through the proxy %s", tn->cfg->name, proxy.url);
                snprintf(net->proxy_said, sizeof(net->proxy_said), "%s", why ?: proxy.url);
        }
        if (net) {
                net->target_ok = r >= 0;
                net->target_tls = tls;
                net->target_port = port;
                net->target_is_address = r >= 0 && resolver_is_address(host);
                snprintf(net->target_proxy, sizeof(net->target_proxy), "%s", r > 0 ? proxy.url : "");
        }
        /* An address needs no lookup (curl asks none for it). */
        if (r < 0 || resolver_is_address(host))
                host[0] = '\0';
        if (!net || (strcmp(host, net->host) == 0 && port == net->port))
                return;
        /* Another host: its workers wait for its first answer. */
        snprintf(net->host, sizeof(net->host), "%s", host);
        net->port = port;
        net->answer[0] = '\0';
        net->answered = !host[0];
        net->failing = false;
        net->failures = 0;
        net->next_usec = 0;
}

int resolver_start(struct tierd *t) {
        for (size_t i = 0; i < t->n_tenants; i++) {
                struct tenant *tn = &t->tenants[i];
                if (!(tn->net = calloc(1, sizeof(*tn->net))))
                        return log_error_errno(ENOMEM, "cannot start looking up stores: %m");
                tn->net->answered = true; /* until it has a host */
                resolver_tenant_changed(tn);
        }
        int r = sd_event_add_time_relative(t->event, &t->resolver_src, CLOCK_MONOTONIC, 0, 0, on_resolver_tick, t);
        if (r >= 0)
                r = sd_event_source_set_enabled(t->resolver_src, SD_EVENT_ON);
        return r < 0 ? log_error_errno(r, "cannot start looking up stores: %m") : 0;
}

void resolver_stop(struct tierd *t) {
        t->resolver_src = sd_event_source_disable_unref(t->resolver_src);
        for (size_t i = 0; t->tenants && i < t->n_tenants; i++) {
                struct tenant_net *net = t->tenants[i].net;
                if (net && net->thread)
                        offthread_abandon(net->thread, lookup_release);
                free(net);
                t->tenants[i].net = NULL;
        }
}

int resolver_worker_target(const struct tenant *tn, unsigned *port, bool *tls, const char **proxy_url, bool *lookup) {
        const struct tenant_net *net = tn->net;
        if (!net || !net->target_ok)
                return -EINVAL;
        *port = net->target_port;
        *tls = net->target_tls;
        *proxy_url = net->target_proxy;
        *lookup = !net->target_is_address;
        return 0;
}

const char *resolver_answer(const struct tenant *tn) { return tn->net ? tn->net->answer : ""; }

bool resolver_answered(const struct tenant *tn) { return !tn->net || tn->net->answered; }

void resolver_failed(struct tenant *tn) {
        struct tenant_net *net = tn->net;
        uint64_t now = tierd_now_usec(tn->t);
        if (net && net->host[0] && net->answered && !net->failing)
                net->next_usec = MIN(net->next_usec, MAX(now, net->last_usec + RESOLVE_AFTER_FAILURE_USEC));
}
