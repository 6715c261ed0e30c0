# Shared helpers for tierd's integration tests and demo. Source it; call
# tl_init first. Everything a test makes lives under $TL_DIR and is undone by
# tl_cleanup (installed as an EXIT trap): processes we started are killed by
# pid, filesystems unmounted, loop devices detached.

TL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$TL_ROOT/build}
TL_PASS=0 TL_FAIL=0 TL_SKIP=0
TL_PIDS=() TL_MOUNTS=() TL_LOOPS=() TL_CGROUPS=()
# tierd runs here as its systemd unit runs it: the unit's capability
# bounding set and no new privileges (setpriv), so a capability the unit
# leaves out fails a test here, not on a host. Prefix a command with
# "${TL_AS_SERVICE[@]}".
tl_service_caps() {
	sed -n 's/^CapabilityBoundingSet=//p' "$TL_ROOT/contrib/systemd/tierd.service" | tr ' ' '\n' |
		sed -n 's/^CAP_\([A-Z_]*\)$/+\1/p' | tr 'A-Z' 'a-z' | paste -sd,
}
# And at the unit's Nice=.
tl_service_nice() { sed -n 's/^Nice=//p' "$TL_ROOT/contrib/systemd/tierd.service"; }
TL_AS_SERVICE=(nice -n "$(tl_service_nice)" setpriv --bounding-set "-all,$(tl_service_caps)" --inh-caps=-all
	--no-new-privs --)

tl_init() {
	TL_DIR=$(mktemp -d /tmp/tierd-test.XXXXXX)
	chmod 755 "$TL_DIR" # unprivileged test callers reach the bus socket
	trap tl_cleanup EXIT
	# A key for tenants that keep a catalog ("catalog_key"): root's, 0600.
	TL_CATALOG_KEY=$TL_DIR/catalog.key
	(umask 077 && head -c 32 /dev/urandom | od -An -tx1 -v | tr -d ' \n' >"$TL_CATALOG_KEY")
}

ok() { TL_PASS=$((TL_PASS + 1)); echo "ok - $*"; }
not_ok() { TL_FAIL=$((TL_FAIL + 1)); echo "not ok - $*"; }
skip() { TL_SKIP=$((TL_SKIP + 1)); echo "skip - $*"; }
# check NAME COMMAND...: passes when COMMAND succeeds.
check() { local name=$1; shift; if "$@"; then ok "$name"; else not_ok "$name"; fi; }
# check_fails NAME COMMAND...: passes when COMMAND fails.
check_fails() { local name=$1; shift; if "$@"; then not_ok "$name"; else ok "$name"; fi; }
tl_summary() {
	# An honest worker never writes outside its fills, nor a restore that
	# does not hash right: tierd would kill it (supervisor/events/fillwatch.c).
	# Only a suite that makes a worker do so on purpose sets
	# TL_FILLWATCH_EXPECTED.
	local lies="wrote to a file none of its fills|through the fill mount with no fill|watch of fill writes overflowed|does not hash to its archived SHA-256"
	if [ -z "${TL_FILLWATCH_EXPECTED:-}" ] && [ -s "${TL_TIERD_LOG:-}" ]; then
		if grep -qE "$lies" "$TL_TIERD_LOG"; then
			not_ok "tierd caught no honest worker lying about its fills"
			grep -E "$lies" "$TL_TIERD_LOG" | head -5 | sed 's/^/#   /'
		else
			ok "tierd caught no honest worker lying about its fills"
		fi
	fi
	echo "# $TL_PASS passed, $TL_FAIL failed, $TL_SKIP skipped"
	if [ "$TL_FAIL" -gt 0 ] && [ -s "${TL_TIERD_LOG:-}" ]; then
		echo "# the end of tierd's log:"
		tail -n 60 "$TL_TIERD_LOG" | sed 's/^/#   /'
	fi
	[ "$TL_FAIL" -eq 0 ]
}

# tl_loopfs TYPE SIZE DIR: a fresh filesystem of TYPE on a loop device at DIR.
tl_loopfs() {
	local type=$1 size=$2 dir=$3 img dev
	img="$TL_DIR/$(basename "$dir").img"
	truncate -s "$size" "$img"
	case $type in
	btrfs) mkfs.btrfs -q -f "$img" >/dev/null ;;
	xfs) mkfs.xfs -q -f "$img" >/dev/null ;;
	ext4) mkfs.ext4 -q -F "$img" >/dev/null ;;
	*) mkfs -t "$type" "$img" >/dev/null ;;
	esac || return 1
	dev=$(losetup --find --show "$img") || return 1
	TL_LOOPS+=("$dev")
	mkdir -p "$dir"
	# nosuid,nodev: tierd refuses a tenant reachable through a mount without them.
	mount -o nosuid,nodev "$dev" "$dir" || return 1
	TL_MOUNTS+=("$dir")
}

# tl_subvol TYPE DIR: a tenant directory (a btrfs subvolume when it can be).
tl_subvol() {
	if [ "$1" = btrfs ]; then btrfs -q subvolume create "$2" >/dev/null; else mkdir -p "$2"; fi
}

tl_dbus_start() {
	local conf="$TL_DIR/bus.conf" out
	cat >"$conf" <<-CONF
	<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
	 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
	<busconfig>
	  <type>system</type>
	  <listen>unix:path=$TL_DIR/system_bus_socket</listen>
	  <auth>EXTERNAL</auth>
	  <policy context="default">
	    <allow user="*"/>
	    <deny own="*"/>
	    <deny send_type="method_call"/>
	    <allow send_type="signal"/>
	    <allow send_requested_reply="true" send_type="method_return"/>
	    <allow send_requested_reply="true" send_type="error"/>
	    <allow receive_type="method_call"/>
	    <allow receive_type="method_return"/>
	    <allow receive_type="error"/>
	    <allow receive_type="signal"/>
	    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
	    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
	    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
	  </policy>
	  <include>$TL_ROOT/contrib/dbus/org.tierd1.conf</include>
	</busconfig>
	CONF
	out=$(dbus-daemon --config-file="$conf" --fork --print-address=1 --print-pid=1) || return 1
	export DBUS_SYSTEM_BUS_ADDRESS=$(echo "$out" | sed -n 1p)
	TL_PIDS+=("$(echo "$out" | sed -n 2p)")
}

# tl_tierd_start POLICY: starts tierd, waits until it answers on the bus.
# Without a holder unless TL_TIERD_ARGS names one: a test that does not
# restart tierd keeps nothing running after it.
tl_tierd_start() {
	TL_TIERD_LOG="$TL_DIR/tierd.log"
	local args=${TL_TIERD_ARGS:---no-holder}
	${TL_TIERD_WRAPPER:-} "${TL_AS_SERVICE[@]}" "$BUILD/tierd" --policy "$1" --state-dir "$TL_DIR/state" $args \
		>>"$TL_TIERD_LOG" 2>&1 &
	TL_TIERD_PID=$!
	TL_PIDS+=("$TL_TIERD_PID")
	for _ in $(seq 100); do
		"$BUILD/tierctl" status >/dev/null 2>&1 && return 0
		kill -0 "$TL_TIERD_PID" 2>/dev/null || { cat "$TL_TIERD_LOG" >&2; return 1; }
		sleep 0.1
	done
	cat "$TL_TIERD_LOG" >&2
	return 1
}

# tl_tierd_exits SECONDS: tierd, signalled already, ends within SECONDS:
# reaped, its exit status in TL_TIERD_STATUS, TL_TIERD_PID cleared. Else
# 1, and it is left to tl_cleanup: a stop that hangs fails, never waits.
tl_tierd_exits() {
	local end=$((SECONDS + $1))
	TL_TIERD_STATUS=
	while kill -0 "$TL_TIERD_PID" 2>/dev/null; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
	TL_TIERD_STATUS=0
	wait "$TL_TIERD_PID" || TL_TIERD_STATUS=$?
	TL_TIERD_PID=
}

# tl_tierd_stop: SIGTERM, and the exit status of tierd.
tl_tierd_stop() {
	[ -n "${TL_TIERD_PID:-}" ] || return 0
	kill -TERM "$TL_TIERD_PID" 2>/dev/null
	local rc=0
	wait "$TL_TIERD_PID" || rc=$?
	TL_TIERD_PID=
	return $rc
}

# tl_rgw_store BUCKET PREFIX: a one-node Ceph RGW of the test's own (source
# rgw.sh first), stopped at exit; sets BACKEND (s3://BUCKET/PREFIX) and
# EXTRA (the policy's endpoint and credentials keys, after a comma).
# Ends the test if RGW cannot start.
tl_rgw_store() {
	RGW_PORT=${RGW_PORT:-19000}
	rgw_install >"$TL_DIR/rgw-install.log" 2>&1 || { cat "$TL_DIR/rgw-install.log"; not_ok "Ceph RGW installs"; tl_summary; exit 1; }
	RGW_START_TIMEOUT=180 rgw_start "$TL_DIR/rgw" "$RGW_PORT" >"$TL_DIR/rgw-start.log" 2>&1 ||
		{ tail -n 30 "$TL_DIR/rgw-start.log"; not_ok "Ceph RGW starts"; tl_summary; exit 1; }
	trap 'rgw_stop "$TL_DIR/rgw" >/dev/null 2>&1; tl_cleanup' EXIT
	rgw_make_bucket "$1" >/dev/null
	printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$RGW_ACCESS_KEY" "$RGW_SECRET_KEY" >"$TL_DIR/s3.cred"
	chmod 600 "$TL_DIR/s3.cred"
	BACKEND=s3://$1/$2
	EXTRA=", \"endpoint\": \"http://127.0.0.1:$RGW_PORT\", \"credentials\": \"$TL_DIR/s3.cred\""
}

tl_cleanup() {
	local p l
	set +e
	# tierd first, for good (SIGINT): at the same time as its holder, it
	# would hand its groups to a holder of its own that outlives the test.
	if [ -n "${TL_TIERD_PID:-}" ] && kill -INT "$TL_TIERD_PID" 2>/dev/null; then
		for _ in $(seq 50); do kill -0 "$TL_TIERD_PID" 2>/dev/null || break; sleep 0.1; done
	fi
	for p in "${TL_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${TL_PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	for l in "${TL_CGROUPS[@]}"; do rmdir "$l" 2>/dev/null; done
	# Everything mounted below our directory, deepest first: our
	# filesystems, and views a killed tierd left behind.
	findmnt -rn -o TARGET | grep "^$TL_DIR/" | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
	for l in "${TL_LOOPS[@]}"; do losetup -d "$l" 2>/dev/null; done
	[ -n "${TL_DIR:-}" ] && rm -rf "$TL_DIR"
}

# tl_tenant_field TENANT KEY: one field of the tenant's `tierctl status
# --json` entry (KEY: fills, fill_bytes, worker.pid...).
tl_tenant_field() {
	"$BUILD/tierctl" status --json | python3 -c '
import json, sys
t = [t for t in json.load(sys.stdin) if t["name"] == sys.argv[1]][0]
for k in sys.argv[2].split("."): t = t[k]
print(t)' "$1" "$2"
}

# tl_log_mark: from here on, what tl_logged looks for in tierd's log must
# be new (the log may not exist yet).
tl_log_mark() { TL_LOG_MARK=$(cat "${TL_TIERD_LOG:-/dev/null}" 2>/dev/null | wc -l); }
# tl_logged SECONDS TEXT: TEXT in tierd's log since the last tl_log_mark,
# within SECONDS (polled).
tl_logged() {
	for _ in $(seq $(($1 * 10))); do
		tail -n +$((${TL_LOG_MARK:-0} + 1)) "$TL_TIERD_LOG" | grep -qF -- "$2" && return 0
		sleep 0.1
	done
	return 1
}

# tl_eventually CMD...: CMD comes true within 5 s (polled), for what tierd
# records just after it answers a reader: a restored range is recorded once
# it is durable, a moment after the reader got its bytes.
tl_eventually() {
	local i
	for i in $(seq 50); do "$@" && return 0; sleep 0.1; done
	"$@"
}
# tl_eventually_for SECONDS COMMAND...: the same, for up to SECONDS.
tl_eventually_for() {
	local end=$((SECONDS + $1))
	shift
	while [ "$SECONDS" -lt "$end" ]; do "$@" && return 0; sleep 0.2; done
	"$@"
}

# Bytes of a file backed by data (holes and xattr blocks not counted).
tl_allocated() { "$BUILD/tests/data-bytes" "$1"; }

# tl_flip_byte FILE OFFSET: changes the byte at OFFSET (XOR 0x5a, so it
# always differs from what was there), in place, nothing else.
tl_flip_byte() {
	local old
	old=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	[ -n "$old" ] || return 1
	printf "$(printf '\\%03o' $((old ^ 0x5a)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
