#!/bin/bash
# A store reached through an HTTP proxy named in tierd's environment, read
# as curl reads it (http_proxy, https_proxy, all_proxy, no_proxy): the
# workers connect to the proxy alone (tierd looks its name up for them,
# and its port is the only one their Landlock rule lets them reach), every
# request goes through it, a store named in no_proxy is reached directly,
# and a proxy tierd cannot use is said. The proxy is a real one
# (tinyproxy); names come from a hosts file of the test's own, in a mount
# namespace of its own (as in dns.sh).
set -u
if [ -z "${TL_PROXY_NS:-}" ]; then
	exec unshare -m --propagation private env TL_PROXY_NS=1 bash "$0" "$@"
fi
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/nginx.sh"
tl_init
TIERCTL=$BUILD/tierctl
PREAD=$BUILD/tests/pread-at
HTTP_PORT=${HTTP_PORT:-18082} PROXY_PORT=${PROXY_PORT:-18888}
STORE=store.tierd-test PROXY=proxy.tierd-test
WEB=$TL_DIR/views/web PLOG=$TL_DIR/proxy.log

grep -v 'tierd-test' /etc/hosts >"$TL_DIR/hosts"
printf '127.0.0.3 %s\n127.0.0.4 %s\n' "$STORE" "$PROXY" >>"$TL_DIR/hosts"
mount --bind "$TL_DIR/hosts" /etc/hosts || { not_ok "bind-mount the test's /etc/hosts"; tl_summary; exit 1; }

tl_loopfs btrfs 1G "$TL_DIR/fs" || { not_ok "mkfs"; tl_summary; exit 1; }
tl_subvol btrfs "$TL_DIR/fs/web"
mkdir -p "$TL_DIR/orig"
nginx_install
NGINX_ADDR=127.0.0.3 nginx_start "$HTTP_PORT" || { not_ok "nginx"; tl_summary; exit 1; }
command -v tinyproxy >/dev/null || { not_ok "tinyproxy is installed (make deps installs it)"; tl_summary; exit 1; }
cat >"$TL_DIR/tinyproxy.conf" <<EOF
Port $PROXY_PORT
Listen 127.0.0.4
Timeout 60
Allow 127.0.0.0/8
LogFile "$PLOG"
LogLevel Info
MaxClients 64
DisableViaHeader Yes
EOF
proxy_start() {
	tinyproxy -d -c "$TL_DIR/tinyproxy.conf" >>"$TL_DIR/tinyproxy.out" 2>&1 &
	PROXY_PID=$!
	TL_PIDS+=("$PROXY_PID")
	for _ in $(seq 50); do bash -c "exec 3<>/dev/tcp/127.0.0.4/$PROXY_PORT" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}
proxy_stop() { kill "$PROXY_PID" && wait "$PROXY_PID" 2>/dev/null; true; }
check "tinyproxy starts on $PROXY:$PROXY_PORT" proxy_start || { tl_summary; exit 1; }
cat >"$TL_DIR/policy.json" <<EOF
{"defaults": {"stall_timeout": "5s", "connect_timeout": "2s"},
 "tenants": [{"name": "web", "subvolume": "$TL_DIR/fs/web", "mount": "$WEB",
              "backend": "http://$STORE:$HTTP_PORT/objects/web"}]}
EOF
tl_dbus_start
# start_with ENV...: tierd (stopped first if running) with these proxy variables only.
start_with() {
	tl_tierd_stop
	tl_log_mark
	unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
	local v
	for v in "$@"; do export "${v?}"; done
	tl_tierd_start "$TL_DIR/policy.json"
	local rc=$?
	for v in "$@"; do unset "${v%%=*}"; done
	return $rc
}
# proxied METHOD: requests with METHOD to the store that went through the proxy.
proxied() { grep -c "Request (file descriptor [0-9]*): $1 http://$STORE:$HTTP_PORT/objects/web/" "$PLOG"; }

check "tierd starts with http_proxy=http://$PROXY:$PROXY_PORT in its environment" \
	start_with "http_proxy=http://$PROXY:$PROXY_PORT"
check "... says so: its store is reached through the proxy" \
	tl_logged 15 "tenant web: its store is reached through the proxy http://$PROXY:$PROXY_PORT"
check "... looks the proxy's name up for its workers (not the store's)" tl_logged 15 "tenant web: $PROXY:$PROXY_PORT:127.0.0.4"
for i in 1 2 3; do head -c 1M /dev/urandom >"$TL_DIR/orig/f$i"; cp "$TL_DIR/orig/f$i" "$WEB/f$i"; done
check "files archived through the proxy and released" \
	bash -c "timeout 60 '$TIERCTL' archive '$WEB'/f* >/dev/null && timeout 60 '$TIERCTL' release '$WEB'/f* >/dev/null"
check "... a released file reads back" timeout 30 cmp "$WEB/f1" "$TL_DIR/orig/f1"
check "... the uploads (PUT, MOVE) and the read (GET) went through the proxy ($(proxied PUT) PUT, $(proxied MOVE) MOVE, $(proxied GET) GET)" \
	bash -c "[ $(proxied PUT) -ge 3 ] && [ $(proxied MOVE) -ge 3 ] && [ $(proxied GET) -ge 1 ]"

# The proxy down: a cold read fails with EIO, within the timeouts (the
# worker has no other way to the store); the proxy back: it reads.
proxy_stop
rc=0
start=$SECONDS
timeout 60 "$PREAD" "$WEB/f2" 0 4096 >/dev/null 2>"$TL_DIR/err" || rc=$?
check "the proxy down: a cold read fails with EIO within 30 s (exit $rc after $((SECONDS - start)) s: $(cat "$TL_DIR/err"))" \
	bash -c "[ $rc = 1 ] && grep -q 'Input/output error' '$TL_DIR/err' && [ $((SECONDS - start)) -le 30 ]"
check "... nothing of it kept (still released)" test "$("$BUILD/tests/data-bytes" "$WEB/f2")" = 0
check "tinyproxy back" proxy_start
check "... the read goes through" timeout 30 cmp "$WEB/f2" "$TL_DIR/orig/f2"

# no_proxy names the store: reached directly, the proxy down makes no difference.
check "tierd restarted with no_proxy=$STORE too" \
	start_with "http_proxy=http://$PROXY:$PROXY_PORT" "no_proxy=example.com,$STORE"
proxy_stop
check "... a cold read with the proxy down goes to the store directly" timeout 30 cmp "$WEB/f3" "$TL_DIR/orig/f3"
check "... (looked up: the store's name)" tl_logged 15 "tenant web: $STORE:$HTTP_PORT:127.0.0.3"
head -c 64K /dev/urandom >"$WEB/g"
cp "$WEB/g" "$TL_DIR/orig/g"
check "... archives and releases directly" bash -c "timeout 60 '$TIERCTL' archive '$WEB/g' >/dev/null &&
	timeout 60 '$TIERCTL' release '$WEB/g' >/dev/null"

# A proxy tierd cannot use: said, and the store is not reached around it
# (its worker may connect nowhere): a cold read fails with EIO.
check "tierd restarted with http_proxy=socks5://$PROXY:1080" start_with "http_proxy=socks5://$PROXY:1080"
check "... says it cannot use it, and that the store is not reached" \
	tl_logged 15 "tenant web: the proxy in tierd's environment cannot be used ("
rc=0
timeout 60 "$PREAD" "$WEB/g" 0 4096 >/dev/null 2>"$TL_DIR/err" || rc=$?
check "... a cold read fails with EIO, the store not reached around the proxy (exit $rc: $(cat "$TL_DIR/err"))" \
	bash -c "[ $rc = 1 ] && grep -q 'Input/output error' '$TL_DIR/err'"
check "... nothing of it kept (still released)" test "$("$BUILD/tests/data-bytes" "$WEB/g")" = 0
check "tierd stops cleanly" tl_tierd_stop
tl_summary
