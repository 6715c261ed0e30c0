/* SPDX-License-Identifier: MIT */
/*
 * The proxy a tenant's store is reached through. It comes from tierd's
 * environment, read as curl reads it, since that is where operators set
 * it (a systemd drop-in's Environment=, a pod's env):
 * - https_proxy or HTTPS_PROXY for an https:// store, http_proxy for an
 *   http:// one (not HTTP_PROXY, which curl ignores: a CGI program's
 *   request header can set it), all_proxy or ALL_PROXY for either;
 * - no_proxy or NO_PROXY: stores reached directly: "*" for all, a name
 *   with its subdomains ("example.com" or ".example.com" match
 *   s3.example.com), an address, or an IPv4 or IPv6 CIDR range.
 * An http:// proxy only (CONNECT for an https store; no user:password).
 * A worker behind a proxy connects to the proxy alone: its Landlock rule
 * names the proxy's port, and tierd looks the proxy's name up for it
 * (resolver.c), not the store's, which the proxy resolves.
 */
#pragma once

#include <stdbool.h>

struct proxy {
        char url[300];  /* http://HOST:PORT, as curl takes it */
        char host[256]; /* without brackets */
        unsigned port;
};

/* 1 and *ret: the store at host (tls: https://) is reached through a
 * proxy; 0: directly; -EINVAL: the environment names a proxy tierd cannot
 * use, and *error says why. */
int proxy_for(const char *host, bool tls, struct proxy *ret, const char **error);
/* Whether list (no_proxy's syntax) names host. */
bool proxy_bypassed(const char *list, const char *host);
