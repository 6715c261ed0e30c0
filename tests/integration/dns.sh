#!/bin/bash
# The store's host name, which tierd looks up for its workers (they ask no
# DNS server): every address the name gives is tried in turn; a name that
# does not resolve when tierd starts heals by itself once it does, with no
# restart; and a DNS server that does not answer never holds tierd's loop.
# Name lookups are real (getaddrinfo through nsswitch's "files" and "dns"),
# on names of this test's own: it runs in a mount namespace of its own with
# files bind-mounted over /etc/hosts and /etc/resolv.conf; the DNS server
# that does not answer is a UDP socket on 127.0.0.1:53 that reads and never
# replies.
set -u
if [ -z "${TL_DNS_NS:-}" ]; then
	exec unshare -m --propagation private env TL_DNS_NS=1 bash "$0" "$@"
fi
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/nginx.sh"
tl_init
TIERCTL=$BUILD/tierctl
BUSCTL="busctl --system"
HTTP_PORT=${HTTP_PORT:-18081}
NAME=store.tierd-test
WEB=$TL_DIR/views/web LOCAL=$TL_DIR/views/local

grep -v "$NAME" /etc/hosts >"$TL_DIR/hosts.base"
cp "$TL_DIR/hosts.base" "$TL_DIR/hosts"
# No DNS server here at first: a name not in the hosts file fails at once.
printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$TL_DIR/resolv.conf"
mount --bind "$TL_DIR/hosts" /etc/hosts && mount --bind "$TL_DIR/resolv.conf" /etc/resolv.conf ||
	{ not_ok "bind-mount the test's /etc/hosts and /etc/resolv.conf"; tl_summary; exit 1; }
# hosts LINE...: the test's names (written in place: the bind mount keeps the file).
hosts() { { cat "$TL_DIR/hosts.base"; printf '%s\n' "$@"; } >"$TL_DIR/hosts"; }
# The store listens on 127.0.0.3 only.
hosts "127.0.0.3 $NAME"

tl_loopfs btrfs 1G "$TL_DIR/fs" || { not_ok "mkfs"; tl_summary; exit 1; }
tl_subvol btrfs "$TL_DIR/fs/web"
tl_subvol btrfs "$TL_DIR/fs/local"
mkdir -p "$TL_DIR/orig" "$TL_DIR/store"
nginx_install
NGINX_ADDR=127.0.0.3 nginx_start "$HTTP_PORT" || { not_ok "nginx"; tl_summary; exit 1; }
cat >"$TL_DIR/policy.json" <<EOF
{"defaults": {"stall_timeout": "5s", "connect_timeout": "2s"},
 "tenants": [
  {"name": "web", "subvolume": "$TL_DIR/fs/web", "mount": "$WEB", "backend": "http://$NAME:$HTTP_PORT/objects/web"},
  {"name": "local", "subvolume": "$TL_DIR/fs/local", "mount": "$LOCAL", "backend": "file://$TL_DIR/store"}]}
EOF
tl_dbus_start
check "tierd starts with a store named $NAME" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }
check "... looked up: tenant web: $NAME:$HTTP_PORT:127.0.0.3" tl_logged 15 "tenant web: $NAME:$HTTP_PORT:127.0.0.3"

for i in 1 2 3 4; do head -c 1M /dev/urandom >"$TL_DIR/orig/f$i"; cp "$TL_DIR/orig/f$i" "$WEB/f$i"; done
for i in 1 2 3; do head -c 64K /dev/urandom >"$TL_DIR/orig/l$i"; cp "$TL_DIR/orig/l$i" "$LOCAL/l$i"; done
check "files archived to the store by name and released" \
	bash -c "'$TIERCTL' archive '$WEB'/f* '$LOCAL'/l* >/dev/null && '$TIERCTL' release '$WEB'/f* '$LOCAL'/l* >/dev/null"
check "a released file reads back" timeout 30 cmp "$WEB/f1" "$TL_DIR/orig/f1"

# Every address: the name gives two, and the one getaddrinfo sorts first
# (127.0.0.1, the closest to the source address) refuses: nothing listens
# there. A worker given only the first address would fail.
hosts "127.0.0.3 $NAME" "127.0.0.1 $NAME"
tl_tierd_stop
tl_log_mark
check "tierd restarts with two addresses for the name" tl_tierd_start "$TL_DIR/policy.json"
check "... both handed to the workers, the refusing one first" tl_logged 15 "tenant web: $NAME:$HTTP_PORT:127.0.0.1,127.0.0.3"
check "a read goes through the second address" timeout 30 cmp "$WEB/f2" "$TL_DIR/orig/f2"

# A name that does not resolve when tierd starts: reads fail (EIO, at
# once: not a hang), then it resolves and they work, with no restart.
hosts
tl_tierd_stop
tl_log_mark
check "tierd starts while the name does not resolve" tl_tierd_start "$TL_DIR/policy.json"
check "... and says so" tl_logged 15 "tenant web: cannot resolve $NAME"
rc=0
timeout 20 cat "$WEB/f3" >/dev/null 2>"$TL_DIR/f3.err" || rc=$?
check "a read meanwhile fails with EIO, not a hang (exit $rc: $(cat "$TL_DIR/f3.err"))" \
	bash -c "[ $rc = 1 ] && grep -q 'Input/output error' '$TL_DIR/f3.err'"
TIERD=$TL_TIERD_PID
worker_pid() { $BUSCTL get-property org.tierd1 /org/tierd1/tenant/web org.tierd1.Tenant WorkerPid | cut -d' ' -f2; }

# A DNS server that takes every question and answers none: a worker
# restarted now (its config names the store's addresses) must not make
# tierd wait for it. tierd's loop goes on serving the other tenant and
# the bus; the lookups wait on their threads.
python3 - "$TL_DIR/dns.ready" <<'PY' >"$TL_DIR/dns.log" 2>&1 &
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
open(sys.argv[1], "w").close()
while True:
    s.recvfrom(4096)  # and never a reply
PY
DNS=$!
TL_PIDS+=("$DNS")
for _ in $(seq 50); do [ -e "$TL_DIR/dns.ready" ] && break; kill -0 "$DNS" 2>/dev/null || break; sleep 0.1; done
if [ -e "$TL_DIR/dns.ready" ]; then
	printf 'nameserver 127.0.0.1\noptions timeout:5 attempts:3\n' >"$TL_DIR/resolv.conf"
	lookup_waits() { timeout 3 getent hosts "$NAME" >/dev/null; [ $? = 124 ]; }
	check "a name lookup now waits on that server (the test's premise: getent still waits after 3 s)" lookup_waits
	WPID=$(worker_pid)
	check "web's worker runs (pid $WPID)" test "${WPID:-0}" -gt 1
	[ "${WPID:-0}" -gt 1 ] && kill -KILL "$WPID"
	sleep 0.5
	t0=$(date +%s%N)
	check "meanwhile a worker restarts, and tierd answers the bus at once" timeout 3 "$TIERCTL" ping
	check "... and serves the other tenant's cold read" timeout 3 cmp "$LOCAL/l1" "$TL_DIR/orig/l1"
	echo "# both within $((($(date +%s%N) - t0) / 1000000)) ms"
	kill "$DNS" 2>/dev/null
	printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$TL_DIR/resolv.conf"
else
	skip "a DNS server that does not answer: cannot bind 127.0.0.1:53 here ($(cat "$TL_DIR/dns.log"))"
fi

tl_log_mark
hosts "127.0.0.3 $NAME"
check "the name resolves again: picked up by itself (within 40 s)" tl_logged 40 "tenant web: $NAME:$HTTP_PORT:127.0.0.3"
check "... a read works now" timeout 30 cmp "$WEB/f4" "$TL_DIR/orig/f4"
check "... the same tierd, never restarted" kill -0 "$TIERD"
check "SIGTERM: tierd exits 0" tl_tierd_stop
tl_summary
