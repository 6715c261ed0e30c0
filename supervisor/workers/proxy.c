/* SPDX-License-Identifier: MIT */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "macro.h"

#define PROXY_DEFAULT_PORT 1080 /* curl's, when a proxy names none */

static const char *env_first(const char *a, const char *b) {
        const char *v = getenv(a);
        if ((!v || !*v) && b)
                v = getenv(b);
        return v && *v ? v : NULL;
}

/* addr within net/bits (both of family af, in network order). */
static bool in_range(int af, const unsigned char *addr, const unsigned char *net, unsigned bits) {
        unsigned len = af == AF_INET ? 4 : 16;
        if (bits > len * 8)
                return false;
        for (unsigned i = 0; i < len && bits > 0; i++, bits = bits > 8 ? bits - 8 : 0) {
                unsigned char mask = (unsigned char)(bits >= 8 ? 0xff : 0xff << (8 - bits));
                if ((addr[i] & mask) != (net[i] & mask))
                        return false;
        }
        return true;
}

/* An entry that is an address or a CIDR range: 1 host within it, 0 not,
 * -1 the entry is no address (a name). */
static int address_matches(const char *entry, const char *host) {
        char net[INET6_ADDRSTRLEN];
        unsigned char a[16], b[16];
        const char *slash = strchr(entry, '/');
        size_t n = slash ? (size_t)(slash - entry) : strlen(entry);

        if (n >= sizeof(net))
                return -1;
        memcpy(net, entry, n);
        net[n] = '\0';
        int af = strchr(net, ':') ? AF_INET6 : AF_INET;
        unsigned long bits = af == AF_INET ? 32 : 128;
        if (inet_pton(af, net, b) != 1)
                return -1;
        if (slash) {
                char *end;
                unsigned long v = strtoul(slash + 1, &end, 10);
                if (*end || end == slash + 1 || v > bits)
                        return 0;
                bits = v;
        }
        return inet_pton(af, host, a) == 1 && in_range(af, a, b, (unsigned)bits);
}

/* One entry of no_proxy (n bytes) against host. */
static bool entry_matches(const char *e, size_t n, const char *host) {
        char entry[256];

        if (n > 0 && e[0] == '.')
                e++, n--;
        if (n == 0 || n >= sizeof(entry))
                return false;
        memcpy(entry, e, n);
        entry[n] = '\0';
        if (entry[n - 1] == '.') /* a trailing dot says nothing more */
                entry[--n] = '\0';
        int r = address_matches(entry, host);
        if (r >= 0 || n == 0)
                return r > 0;
        unsigned char a[16];
        if (inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1)
                return false; /* an address is matched by addresses only */
        size_t h = strlen(host);
        if (h > 0 && host[h - 1] == '.')
                h--;
        return (h == n && strncasecmp(host, entry, n) == 0) ||
               (h > n && host[h - n - 1] == '.' && strncasecmp(host + h - n, entry, n) == 0);
}

bool proxy_bypassed(const char *list, const char *host) {
        const char *star = list ? list + strspn(list, " \t") : NULL;
        if (star && star[0] == '*' && !star[1 + strspn(star + 1, " \t")]) /* "*" alone: every host, as curl */
                return true;
        while (list && *list) {
                size_t skip = strspn(list, ", \t"), n;
                list += skip;
                n = strcspn(list, ", \t");
                if (n > 0 && entry_matches(list, n, host))
                        return true;
                list += n;
        }
        return false;
}

static char *url_part(CURLU *u, CURLUPart what) {
        char *v = NULL;
        return curl_url_get(u, what, &v, 0) == CURLUE_OK ? v : NULL;
}

/* text (a proxy variable's value) into *ret. */
static int proxy_parse(const char *text, struct proxy *ret, const char **error) {
        char full[sizeof(ret->url)];
        CURLU *u = curl_url();
        char *scheme = NULL, *host = NULL, *port = NULL, *user = NULL, *path = NULL;
        const char *why = NULL;

        if (!u)
                return -ENOMEM;
        snprintf(full, sizeof(full), "%s%s", strstr(text, "://") ? "" : "http://", text);
        if (curl_url_set(u, CURLUPART_URL, full, 0) != CURLUE_OK || !(scheme = url_part(u, CURLUPART_SCHEME)) ||
            !(host = url_part(u, CURLUPART_HOST)))
                why = "not a proxy's URL (http://HOST[:PORT])";
        else if (strcasecmp(scheme, "http") != 0)
                why = "only an http:// proxy can be used (https:// and socks proxies cannot)";
        else if ((user = url_part(u, CURLUPART_USER)))
                why = "a proxy with user:password@ cannot be used";
        else if ((path = url_part(u, CURLUPART_PATH)) && strcmp(path, "/") != 0 && *path)
                why = "a proxy's URL has no path";
        else if ((port = url_part(u, CURLUPART_PORT)) && (strtoul(port, NULL, 10) == 0 || strtoul(port, NULL, 10) > 65535))
                why = "a proxy's port is from 1 to 65535";
        else {
                size_t n = strlen(host);
                bool v6 = n > 2 && host[0] == '[' && host[n - 1] == ']';
                ret->port = port ? (unsigned)strtoul(port, NULL, 10) : PROXY_DEFAULT_PORT;
                snprintf(ret->host, sizeof(ret->host), "%.*s", (int)(v6 ? n - 2 : n), v6 ? host + 1 : host);
                snprintf(ret->url, sizeof(ret->url), "http://%s:%u", host, ret->port);
        }
        curl_free(scheme);
        curl_free(host);
        curl_free(port);
        curl_free(user);
        curl_free(path);
        curl_url_cleanup(u);
        if (why) {
                *ret = (struct proxy){};
                *error = why;
                return -EINVAL;
        }
        return 0;
}

int proxy_for(const char *host, bool tls, struct proxy *ret, const char **error) {
        const char *v = tls ? env_first("https_proxy", "HTTPS_PROXY") : env_first("http_proxy", NULL);

        *ret = (struct proxy){};
        if (!v)
                v = env_first("all_proxy", "ALL_PROXY");
        if (!v || proxy_bypassed(env_first("no_proxy", "NO_PROXY"), host))
                return 0;
        int r = proxy_parse(v, ret, error);
        return r < 0 ? r : 1;
}
