#!/bin/bash
# Cold reads from a real S3 store (a one-node Ceph RGW on 127.0.0.1), tierd
# against the tools users choose between, each reading the very same objects
# (tierd's content-addressed sha256/<hex>, keys taken from the stubs):
#   3  sequential 1 MiB reads of a released 1 GiB file, against curl
#      downloading the object, rclone mount (--vfs-cache-mode full) and s3fs
#   4  a 4 KiB pread in the middle of it, against one ranged curl GET and the
#      same pread through rclone and s3fs
#   5  2,000 released 16 KiB files read once by 8 parallel cats, against
#      rclone and s3fs
# Cold, for every tool: tierd's files released and its tenant given a fresh
# worker (no manifest part cached), rclone and s3fs mounted afresh with an
# empty cache; then each reads one other file of the same tenant or prefix
# (a warm-up: code paged in, connections up, as in a tool that has been
# running), then the page cache is dropped, then the timed read. Everything
# local (tierd's tenants, curl's download, rclone's cache, s3fs's temporary
# files) is on one btrfs. Tenants use the defaults (chunk 256K, readahead 32M,
# verify on).
set -u
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/rgw.sh"
source "$(dirname "$0")/lib.sh"
tl_init
MIB=$(bench_size 1024 256)
NSMALL=$(bench_size 2000 500)
READERS=${BENCH_COLD_READERS:-8} # row 5: parallel cats, each given 25 files at a time
PORT=${BENCH_RGW_PORT:-9500}
BUCKET=tierd-bench
TIERCTL=$BUILD/tierctl
T=$TL_DIR/fs
PM=$TL_DIR/peer # where rclone or s3fs is mounted
PEER_PID='' RGW_UP=''

die() { echo "bench cold: $*" >&2; exit 1; }
# peer_umount: unmount rclone or s3fs and wait for its process to end.
peer_umount() {
	[ -n "$PEER_PID" ] || return 0
	fusermount3 -u "$PM" 2>/dev/null || fusermount3 -uz "$PM" 2>/dev/null
	for _ in $(seq 100); do kill -0 "$PEER_PID" 2>/dev/null || break; sleep 0.05; done
	kill -TERM "$PEER_PID" 2>/dev/null
	wait "$PEER_PID" 2>/dev/null
	PEER_PID=''
}
cold_cleanup() {
	set +e
	peer_umount
	[ -n "$RGW_UP" ] && rgw_stop "$TL_DIR/rgw" >/dev/null 2>&1
	tl_cleanup
}
trap cold_cleanup EXIT
trap 'exit 130' INT TERM
T0=$(bench_now)
progress() { echo "# $* ($(awk -v s="$(bench_since "$T0")" 'BEGIN { printf "%.0f", s }') s)"; }

missing=()
for p in rclone s3fs fuse3; do
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	progress "installing ${missing[*]}"
	apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"; }
	{ apt_install || { apt-get update -q && apt_install; }; } >"$TL_DIR/apt.log" 2>&1 ||
		{ tail -n 20 "$TL_DIR/apt.log"; die "cannot install ${missing[*]}"; }
fi
rgw_install >"$TL_DIR/rgw-install.log" 2>&1 || { cat "$TL_DIR/rgw-install.log"; die "cannot install Ceph"; }

progress "starting Ceph RGW on 127.0.0.1:$PORT"
RGW_UP=1
RGW_START_TIMEOUT=180 rgw_start "$TL_DIR/rgw" "$PORT" >"$TL_DIR/rgw-start.log" 2>&1 ||
	{ tail -n 30 "$TL_DIR/rgw-start.log"; die "RGW did not start"; }
# rgw.sh's beast frontend leaves Nagle on: a small response on a kept-alive
# connection (a HEAD, a 16 KiB GET, a manifest page) then waits for the
# client's delayed ACK, 40 ms; curl's one fresh connection never does.
# Measured here: a cold 4 KiB pread through tierd 68-81 ms with it, 15-19
# without; s3fs 32 -> 248 files/s. tierd's worker no longer waits so (it
# ACKs the end of an answer's headers at once, worker/http.c); rclone and
# s3fs still do: radosgw is restarted with beast's tcp_nodelay=1, so the
# peers are measured at their best (BENCH_RGW_NODELAY=0: as rgw.sh starts
# it).
if [ "${BENCH_RGW_NODELAY:-1}" = 1 ] && ! grep -q '^rgw_frontends = .*tcp_nodelay' "$RGW_CEPH_CONF"; then
	pid=$(cat "$RGW_DIR/run/client.rgw.a.pid")
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	sed -i '/^rgw_frontends = beast /s/$/ tcp_nodelay=1/' "$RGW_CEPH_CONF"
	_rgw_spawn "$RGW_DIR" client.rgw.a radosgw -n client.rgw.a || die "cannot restart radosgw"
	for _ in $(seq 120); do
		[ "$(rgw_curl -o /dev/null -w '%{http_code}' --max-time 2 "$RGW_ENDPOINT/" 2>/dev/null)" = 200 ] && break
		sleep 0.5
	done
	progress "radosgw restarted with tcp_nodelay=1"
fi
NAGLE=$(grep -q '^rgw_frontends = .*tcp_nodelay' "$RGW_CEPH_CONF" && echo "RGW with tcp_nodelay=1" || echo "RGW with Nagle on")
rgw_make_bucket "$BUCKET" || die "cannot make the bucket"
printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$RGW_ACCESS_KEY" "$RGW_SECRET_KEY" >"$TL_DIR/s3.cred"
printf '%s:%s\n' "$RGW_ACCESS_KEY" "$RGW_SECRET_KEY" >"$TL_DIR/s3fs.passwd"
cat >"$TL_DIR/rclone.conf" <<EOF
[rgw]
type = s3
provider = Ceph
access_key_id = $RGW_ACCESS_KEY
secret_access_key = $RGW_SECRET_KEY
endpoint = $RGW_ENDPOINT
region = us-east-1
force_path_style = true
EOF
chmod 600 "$TL_DIR/s3.cred" "$TL_DIR/s3fs.passwd" "$TL_DIR/rclone.conf"

tl_loopfs btrfs 6G "$T" || die "cannot make the filesystem"
tl_subvol btrfs "$T/big"
tl_subvol btrfs "$T/small"
mkdir -p "$T/dl" "$PM"
cat >"$TL_DIR/policy.json" <<EOF
{"defaults": {"endpoint": "$RGW_ENDPOINT", "credentials": "$TL_DIR/s3.cred"},
 "tenants": [{"name": "big", "subvolume": "$T/big", "mount": "$TL_DIR/views/big", "backend": "s3://$BUCKET/tenants/big"},
             {"name": "small", "subvolume": "$T/small", "mount": "$TL_DIR/views/small", "backend": "s3://$BUCKET/tenants/small"}]}
EOF
tl_dbus_start || die "no D-Bus"
tl_tierd_start "$TL_DIR/policy.json" || die "tierd did not start"
VB=$TL_DIR/views/big VS=$TL_DIR/views/small

state_of() { "$TIERCTL" status --json "$1" | sed -n 's/.*"state":"\([a-z]*\)".*/\1/p'; }
tenant_field() { # TENANT PYTHON-EXPRESSION-ON-t
	"$TIERCTL" status --json | python3 -c 'import json, sys
print(next((eval(sys.argv[2]) for t in json.load(sys.stdin) if t["name"] == sys.argv[1]), ""))' "$1" "$2"
}
worker_pid() { tenant_field "$1" 't["worker"]["pid"] if t["worker"]["state"] == "running" else 0'; }
# fresh_worker TENANT: a new worker for the tenant (a worker setting changed:
# connect_timeout 10001ms, 10002ms..., which changes nothing else), so it
# has no manifest part cached.
CT=10000
fresh_worker() {
	local old new
	old=$(worker_pid "$1")
	CT=$((CT + 1))
	"$TIERCTL" tenant set "$1" connect_timeout="${CT}ms" >/dev/null || die "tierctl tenant set $1"
	for _ in $(seq 200); do
		new=$(worker_pid "$1")
		[ "$new" != 0 ] && [ "$new" != "$old" ] && return 0
		sleep 0.05
	done
	die "tenant $1 got no new worker"
}
release() { # PATH...: released, and checked to be
	"$TIERCTL" release "$@" >/dev/null || die "tierctl release failed"
	[ "$(state_of "$1")" = released ] || die "$1 is not released"
}
# tierd_cold TENANT_VIEW: its warm-up file released, a fresh worker, the
# warm-up read (checked), caches dropped. Release the timed files first.
tierd_cold() {
	release "$1/warm"
	fresh_worker "$(basename "$1")"
	bench_same "$1/warm" "$(key_of "$1/warm")"
	bench_drop_caches
}
wait_mounted() { # PID: the FUSE mount at $PM is up
	for _ in $(seq 400); do
		case $(findmnt -n -o FSTYPE --mountpoint "$PM" 2>/dev/null) in fuse*) return 0 ;; esac
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
# peer_cold rclone|s3fs PREFIX WARMKEY: the bucket's PREFIX at $PM, mounted
# afresh with an empty cache (on the same btrfs as everything else), the
# warm-up object read (checked), caches dropped.
peer_cold() {
	peer_umount
	rm -rf "$T/peer-cache" && mkdir -p "$T/peer-cache"
	case $1 in
	rclone) env -u AWS_CA_BUNDLE rclone mount --config "$TL_DIR/rclone.conf" "rgw:$BUCKET/$2" "$PM" \
		--vfs-cache-mode full --cache-dir "$T/peer-cache" >>"$TL_DIR/rclone.log" 2>&1 & ;;
	s3fs) s3fs "$BUCKET:/$2" "$PM" -f -o url="$RGW_ENDPOINT" -o use_path_request_style \
		-o passwd_file="$TL_DIR/s3fs.passwd" -o tmpdir="$T/peer-cache" >>"$TL_DIR/s3fs.log" 2>&1 & ;;
	esac
	PEER_PID=$!
	wait_mounted "$PEER_PID" || { tail -n 20 "$TL_DIR/$1.log"; die "$1 mount failed"; }
	bench_same "$PM/$3" "$3"
	bench_drop_caches
}
key_of() { getfattr --absolute-names -n security.tierd --only-values "$1" | sed -n 's/^key=sha256\///p'; }
mbps() { awk -v s="$1" -v m="$MIB" 'BEGIN { printf "%.1f", m * 1.048576 / s }'; }
note_spreads() { BENCH_FIGURE_SPREAD=$(bench_spread "${F[@]}") BENCH_BASELINE_SPREAD=$(bench_spread "$@"); }

progress "a $MIB MiB file and $NSMALL files of 16 KiB, archived to RGW"
head -c $((MIB << 20)) /dev/urandom >"$VB/big"
SUM=$(sha256sum <"$VB/big" | cut -d' ' -f1)
OFF=$(((MIB << 20) / 2))
dd if="$VB/big" of="$TL_DIR/expect4k" bs=4096 skip=$((OFF / 4096)) count=1 status=none
head -c $((4 << 20)) /dev/urandom >"$VB/warm"
head -c 16384 /dev/urandom >"$VS/warm"
# The small files, 100 to a directory, and their list. Row 5 hands them to
# the cats 25 at a time, in this order: the SHA-256 of each batch's bytes
# is what that cat must print.
python3 - "$VS" "$NSMALL" "$TL_DIR/small.list" "$TL_DIR/small.sums" <<'PY' || die "cannot make the small files"
import hashlib, os, sys
root, n, out, sums = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
batches = []
with open(out, "w") as lst:
    for i in range(n):
        d = f"{root}/d{i // 100}"
        os.makedirs(d, exist_ok=True)
        data = os.urandom(16384)
        with open(f"{d}/f{i % 100}", "wb") as f:
            f.write(data)
        if i % 25 == 0:
            batches.append(hashlib.sha256())
        batches[-1].update(data)
        lst.write(f"{d}/f{i % 100}\n")
open(sums, "w").write("".join(sorted(h.hexdigest() + "\n" for h in batches)))
PY
t0=$(bench_now)
"$TIERCTL" archive "$VB/big" "$VB/warm" >/dev/null || die "archive of $VB/big failed"
progress "... $MIB MiB archived in $(bench_since "$t0") s"
t0=$(bench_now)
{ cat "$TL_DIR/small.list"; echo "$VS/warm"; } | xargs -d '\n' -n 1000 "$TIERCTL" archive >/dev/null ||
	die "archive of the small files failed"
progress "... $NSMALL small files archived in $(bench_since "$t0") s"
BIGKEY=$(key_of "$VB/big")
[ "$BIGKEY" = "$SUM" ] || die "the stub of $VB/big names $BIGKEY"
WARMB=$(key_of "$VB/warm") WARMS=$(key_of "$VS/warm")
# The small files' keys, in the list's order: the peers read those objects.
python3 - "$TL_DIR/small.list" "$PM" >"$TL_DIR/small.peer" <<'PY' || die "cannot read the stubs"
import os, sys
for p in open(sys.argv[1]).read().split("\n")[:-1]:
    stub = os.getxattr(p, "security.tierd").decode()
    print(sys.argv[2] + "/" + next(l[len("key=sha256/"):] for l in stub.split("\n") if l.startswith("key=")))
PY
[ "$(sort -u "$TL_DIR/small.peer" | wc -l)" = "$NSMALL" ] || die "the small files' keys are not $NSMALL distinct keys"
rgw_curl -sI -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$RGW_ENDPOINT/$BUCKET/tenants/big/sha256/$BIGKEY" |
	grep -q '^HTTP/[0-9.]* 200' || die "no object sha256/$BIGKEY in the bucket"

# ---- 3: cold sequential read ----
progress "row 3: cold sequential read of $MIB MiB, $BENCH_RUNS runs"
dd_time() { # FILE: seconds of dd with 1 MiB reads
	local t0 s
	t0=$(bench_now)
	dd if="$1" of=/dev/null bs=1M status=none || die "read of $1 failed"
	s=$(bench_since "$t0")
	echo "$s"
}
# CPU seconds (user and system, all threads) a process has used so far.
TICKS=$(getconf CLK_TCK)
cpu_of() { sed 's/.*) //' "/proc/$1/stat" | awk -v t="$TICKS" '{ printf "%.3f", ($12 + $13) / t }'; }
# cpu_per_gib SECONDS: CPU seconds per GiB of the big file
cpu_per_gib() { awk -v s="$1" -v m="$MIB" 'BEGIN { printf "%.3f", s * 1024 / m }'; }
# Once a read is served, tierd records what it filled (an fdatasync, then
# the stub): counted too, so wait for the stub to say the file is whole.
wait_archived() {
	for _ in $(seq 600); do [ "$(state_of "$1")" = archived ] && return 0; sleep 0.05; done
	die "$1 not recorded whole within 30 s"
}
F=() C=() R=() S=() FC=() CC=()
for i in $(seq "$BENCH_RUNS"); do
	release "$VB/big"
	tierd_cold "$VB"
	w=$(worker_pid big)
	c0=$(awk -v a="$(cpu_of "$TL_TIERD_PID")" -v b="$(cpu_of "$w")" 'BEGIN { print a + b }')
	s=$(dd_time "$VB/big") || exit $?
	wait_archived "$VB/big"
	c1=$(awk -v a="$(cpu_of "$TL_TIERD_PID")" -v b="$(cpu_of "$w")" 'BEGIN { print a + b }')
	[ "$(worker_pid big)" = "$w" ] || die "the worker changed during the read"
	bench_same "$VB/big" "$SUM"
	F+=("$(mbps "$s")")
	FC+=("$(cpu_per_gib "$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')")")

	bench_drop_caches
	t0=$(bench_now)
	# times: the subshell's children's CPU (curl's), second line
	ct=$( (rgw_curl -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -o "$T/dl/big" \
		"$RGW_ENDPOINT/$BUCKET/tenants/big/sha256/$BIGKEY" || exit 1; times) | tail -n 1) || die "curl GET failed"
	s=$(bench_since "$t0")
	bench_same "$T/dl/big" "$SUM"
	rm -f "$T/dl/big"
	C+=("$(mbps "$s")")
	CC+=("$(cpu_per_gib "$(echo "$ct" | sed 's/[ms]/ /g' | awk '{ print $1 * 60 + $2 + $3 * 60 + $4 }')")")

	peer_cold rclone tenants/big/sha256 "$WARMB"
	s=$(dd_time "$PM/$BIGKEY") || exit $?
	bench_same "$PM/$BIGKEY" "$SUM" # from rclone's cache, through the mount
	R+=("$(mbps "$s")")

	peer_cold s3fs tenants/big/sha256 "$WARMB"
	# s3fs keeps what it fetched only while the file is open: held open
	# (before the timed read: a lookup and an open, no data), so the check
	# reads those bytes rather than fetching them again
	exec 9<"$PM/$BIGKEY" || die "cannot open $PM/$BIGKEY"
	s=$(dd_time "$PM/$BIGKEY") || exit $?
	bench_same "$PM/$BIGKEY" "$SUM"
	exec 9<&-
	S+=("$(mbps "$s")")
	peer_umount
	progress "run $i: tierd ${F[-1]}, curl ${C[-1]}, rclone ${R[-1]}, s3fs ${S[-1]} MB/s; CPU per GiB: tierd ${FC[-1]}, curl ${CC[-1]} s"
done
DEF="defaults (chunk 256K, readahead 32M, verify on); cold: released, fresh worker, one warm-up file read, caches dropped; $NAGLE"
note_spreads "${C[@]}"
bench_row 3a "cold sequential read, $MIB MiB from RGW, dd bs=1M" MB/s "$(bench_median "${F[@]}")" \
	"$(bench_median "${C[@]}")" "curl: one signed GET of the object to a file on the same btrfs, caches dropped" ">=" 1.0 "$DEF"
BENCH_FIGURE_SPREAD=$(bench_spread "${FC[@]}") BENCH_BASELINE_SPREAD=$(bench_spread "${CC[@]}")
bench_row 3d "CPU per GiB restored: tierd and its worker, vs curl's" s/GiB "$(bench_median "${FC[@]}")" \
	"$(bench_median "${CC[@]}")" "curl's user+system CPU for its GET of the object to a file (row 3a)" "<=" 1.5 \
	"user+system of tierd and the tenant's worker (all threads) from the read's start until the file is recorded whole; $DEF"
note_spreads "${R[@]}"
bench_row 3b "cold sequential read, $MIB MiB, vs rclone mount" MB/s "$(bench_median "${F[@]}")" \
	"$(bench_median "${R[@]}")" "rclone mount --vfs-cache-mode full (cache on the same btrfs), fresh mount, warm-up, caches dropped" \
	">=" 1.0 "$DEF"
note_spreads "${S[@]}"
bench_row 3c "cold sequential read, $MIB MiB, vs s3fs" MB/s "$(bench_median "${F[@]}")" \
	"$(bench_median "${S[@]}")" "s3fs (tmpdir on the same btrfs), fresh mount, warm-up, caches dropped" ">=" 1.0 "$DEF"

# ---- 4: cold first byte ----
progress "row 4: a cold 4 KiB pread at $OFF, $BENCH_RUNS runs"
# open + pread of 4 KiB, timed in the reading process (a timer around a
# process would add its start, about as long as curl's whole GET here)
pread_ms() { # FILE: ms; the bytes checked after
	python3 - "$1" "$OFF" "$TL_DIR/got4k" <<'PY' || die "pread of $1 failed"
import os, sys, time
t = time.perf_counter()
fd = os.open(sys.argv[1], os.O_RDONLY)
b = os.pread(fd, 4096, int(sys.argv[2]))
e = time.perf_counter()
open(sys.argv[3], "wb").write(b)
print(f"{(e - t) * 1000:.2f}")
PY
	cmp -s "$TL_DIR/got4k" "$TL_DIR/expect4k" || bench_fail "4 KiB at $OFF of $1"
}
F=() C=() R=() S=()
for i in $(seq "$BENCH_RUNS"); do
	release "$VB/big"
	tierd_cold "$VB"
	v=$(pread_ms "$VB/big") || exit $?
	F+=("$v")

	bench_drop_caches
	s=$(rgw_curl -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -r "$OFF-$((OFF + 4095))" -o "$TL_DIR/got4k" -w '%{time_total}' \
		"$RGW_ENDPOINT/$BUCKET/tenants/big/sha256/$BIGKEY") || die "ranged curl GET failed"
	cmp -s "$TL_DIR/got4k" "$TL_DIR/expect4k" || bench_fail "curl's 4 KiB at $OFF"
	C+=("$(awk -v s="$s" 'BEGIN { printf "%.2f", s * 1000 }')")

	peer_cold rclone tenants/big/sha256 "$WARMB"
	v=$(pread_ms "$PM/$BIGKEY") || exit $?
	R+=("$v")

	peer_cold s3fs tenants/big/sha256 "$WARMB"
	v=$(pread_ms "$PM/$BIGKEY") || exit $?
	S+=("$v")
	peer_umount
	progress "run $i: tierd ${F[-1]}, curl ${C[-1]}, rclone ${R[-1]}, s3fs ${S[-1]} ms"
done
N4="$DEF; open+pread timed in the reader (python perf_counter), no process start in it"
note_spreads "${C[@]}"
bench_row 4a "cold 4 KiB pread mid-file ($MIB MiB), first byte" ms "$(bench_median "${F[@]}")" \
	"$(bench_median "${C[@]}")" "one ranged curl GET of the 4 KiB (time_total: connect and GET)" "<=" 2.0 "$N4"
note_spreads "${R[@]}"
bench_row 4b "cold 4 KiB pread mid-file, vs rclone mount" ms "$(bench_median "${F[@]}")" \
	"$(bench_median "${R[@]}")" "the same pread through rclone mount --vfs-cache-mode full, fresh mount, warm-up, caches dropped" \
	"<=" 1.0 "$N4"
note_spreads "${S[@]}"
bench_row 4c "cold 4 KiB pread mid-file, vs s3fs" ms "$(bench_median "${F[@]}")" \
	"$(bench_median "${S[@]}")" "the same pread through s3fs, fresh mount, warm-up, caches dropped" "<=" 1.0 "$N4"

# ---- 5: cold small files ----
progress "row 5: $NSMALL released 16 KiB files read by $READERS cats, $BENCH_RUNS runs"
cat_rate() { # LIST: files/s of $READERS parallel cats over the list; each batch's bytes checked after
	local t0 s
	t0=$(bench_now)
	# shellcheck disable=SC2016
	xargs -d '\n' -P "$READERS" -n 25 bash -c 'set -o pipefail; cat "$@" | sha256sum' cat <"$1" >"$TL_DIR/got.sums" ||
		die "reading the files of $1 failed"
	s=$(bench_since "$t0")
	cut -d' ' -f1 "$TL_DIR/got.sums" | sort | cmp -s - "$TL_DIR/small.sums" || bench_fail "the $NSMALL small files of $1"
	awk -v s="$s" -v n="$NSMALL" 'BEGIN { printf "%.0f", n / s }'
}
F=() R=() S=()
for i in $(seq "$BENCH_RUNS"); do
	xargs -d '\n' -n 1000 "$TIERCTL" release <"$TL_DIR/small.list" >/dev/null || die "release of the small files failed"
	[ "$(tenant_field small 't["files"]["released"]')" = "$NSMALL" ] || die "the small files are not all released"
	tierd_cold "$VS"
	v=$(cat_rate "$TL_DIR/small.list") || exit $?
	F+=("$v")

	peer_cold rclone tenants/small/sha256 "$WARMS"
	v=$(cat_rate "$TL_DIR/small.peer") || exit $?
	R+=("$v")

	peer_cold s3fs tenants/small/sha256 "$WARMS"
	v=$(cat_rate "$TL_DIR/small.peer") || exit $?
	S+=("$v")
	peer_umount
	progress "run $i: tierd ${F[-1]}, rclone ${R[-1]}, s3fs ${S[-1]} files/s"
done
N5="cold: released, fresh worker, one warm-up file read, caches dropped; xargs -P $READERS -n 25 cat, bytes hashed as they stream, checked after; $NAGLE"
note_spreads "${R[@]}"
bench_row 5a "cold read of $NSMALL released 16 KiB files, $READERS readers, vs rclone" files/s "$(bench_median "${F[@]}")" \
	"$(bench_median "${R[@]}")" "rclone mount --vfs-cache-mode full, fresh mount, warm-up, caches dropped" ">=" 1.0 "$N5"
note_spreads "${S[@]}"
bench_row 5b "cold read of $NSMALL released 16 KiB files, $READERS readers, vs s3fs" files/s "$(bench_median "${F[@]}")" \
	"$(bench_median "${S[@]}")" "s3fs, fresh mount, warm-up, caches dropped" ">=" 1.0 "$N5"

tl_tierd_stop
progress "done"
