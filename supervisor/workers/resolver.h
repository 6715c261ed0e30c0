/* SPDX-License-Identifier: MIT */
/* The store's host, resolved for the workers (supervisor/workers/resolver.c). */
#pragma once

#include <stdbool.h>

#include "policy.h"
#include "proxy.h"
#include "tierd.h"

/* The host, port and TLS of a tenant's store (its endpoint, the regional
 * AWS one, or an http(s):// backend's): -EINVAL for one not on the
 * network (file://). */
int resolver_endpoint(const struct policy_tenant *p, char *host, size_t size, unsigned *port, bool *tls);
/* What a worker of the tenant connects to: its store's host and port, or
 * its proxy's (proxy.h): 1 through the proxy (*proxy), 0 directly,
 * -EINVAL no store on the network, or one behind a proxy that cannot be
 * used (*error says why): the worker is then let connect nowhere. *tls
 * is the store's. */
int resolver_target(const struct policy_tenant *p, char *host, size_t size, unsigned *port, bool *tls,
                    struct proxy *proxy, const char **error);
/* A literal IPv4 or IPv6 address, which needs no lookup. */
bool resolver_is_address(const char *host);
/* Looks every tenant's store up now, and again from then on. */
int resolver_start(struct tierd *t);
void resolver_stop(struct tierd *t);
/* The tenant's settings changed (reload): its store may have moved. */
void resolver_tenant_changed(struct tenant *tn);
/* What a worker of the tenant connects to (resolver_target's answer when
 * its settings last changed, kept): its port, TLS, proxy ("" none) and
 * whether its host is a name to look up; -EINVAL: nowhere. */
int resolver_worker_target(const struct tenant *tn, unsigned *port, bool *tls, const char **proxy_url, bool *lookup);
/* "HOST:PORT:ADDR,ADDR...", "" if none yet (or no store on the network). */
const char *resolver_answer(const struct tenant *tn);
/* Whether the first lookup ended (or none is needed): a worker's requests
 * wait for it. */
bool resolver_answered(const struct tenant *tn);
/* A request failed: the store may have moved, ask again soon. */
void resolver_failed(struct tenant *tn);
