#!/bin/bash
# Row 10, the noisy neighbour: tenant beta's cold 4 KiB first reads of
# released files (p50 and p99 over at least 200 reads, in rounds of 40),
# idle and while tenant alpha, or an unprivileged user, runs each of:
#   10a a FIFO made, opened and closed (FAN_CLOSE_WRITE on a FIFO);
#   10b TenantStatus, the usage properties and GetManagedObjects polled by
#       uid 65534 over alpha's 1,000,000 files;
#   10c a rename storm: alpha's directory of 200,000 files renamed back and
#       forth (alpha keeps a catalog);
#   10d 256 parallel cold readers of alpha's released files, in a CPU
#       cgroup of alpha's own, as a container runtime places a pod's;
#   10g the same readers in tierd's cgroup, as when tierd is started by
#       hand beside its tenants (systemd and Kubernetes give it its own);
#   10e an archive of a 10 GiB file;
#   10f garbage collection of alpha's store.
# Beta's reader runs in a CPU cgroup of its own (where the machine has
# the cpu controller). The baseline is beta's idle p99, from idle rounds
# between the attacks;
# the ratio is p99 under attack / idle p99 (target <= 1.5). A read that
# fails ends the run; tierd's peak RSS is reported per attack.
# BENCH_SCALE=small: 100,000 files, 20,000 renamed, 1 GiB archived.
set -u
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/lib.sh"
tl_init
MANY=$(bench_size 1000000 100000)
STORM=$(bench_size 200000 20000)
BIG_GIB=$(bench_size 10 1)
ROUND=40 ROUNDS=5
NB=$(((1 + 9) * ROUNDS * ROUND)) # idle rounds between and around seven attacks, and theirs
FS=$TL_DIR/fs VA=$TL_DIR/views/alpha VB=$TL_DIR/views/beta ORIG=$TL_DIR/orig
tl_loopfs btrfs $((BIG_GIB + 8))G "$FS" || { echo "bench neighbour: cannot make the filesystem"; exit 1; }
for t in alpha beta; do tl_subvol btrfs "$FS/$t"; done
mkdir -p "$ORIG" "$TL_DIR/store"
cat >"$TL_DIR/policy.json" <<EOF
{"tenants": [
  {"name": "alpha", "subvolume": "$FS/alpha", "mount": "$VA", "backend": "file://$TL_DIR/store/alpha", "catalog": true, "catalog_key": "$TL_CATALOG_KEY",
   "gc_grace": "1s", "catalog_retention": "1s"},
  {"name": "beta", "subvolume": "$FS/beta", "mount": "$VB", "backend": "file://$TL_DIR/store/beta",
   "small_file": "0", "readahead": "0"}]}
EOF
tl_dbus_start || exit 1
tl_tierd_start "$TL_DIR/policy.json" || exit 1
TIERD=$TL_TIERD_PID
TIERCTL=$BUILD/tierctl
chmod 755 "$TL_DIR/views" "$VA" "$VB"
mkdir -p "$VA/nobody" && chown 65534:65534 "$VA/nobody"

echo "# beta: $NB released files of 64 KiB"
for i in $(seq "$NB"); do head -c 65536 /dev/urandom >"$ORIG/b$i"; done
cp "$ORIG"/b* "$VB/"
find "$VB" -type f -name 'b*' -print0 | xargs -0 -n 500 "$TIERCTL" archive >/dev/null || exit 1
find "$VB" -type f -name 'b*' -print0 | xargs -0 -n 500 "$TIERCTL" release >/dev/null || exit 1
NEXT=1
bench_cgroup CG_A alpha
bench_cgroup CG_B beta
[ -n "$CG_B" ] || echo "# no CPU cgroup on this machine: 10d and 10g run alike"
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$TIERD/status"; }
rounds() { bench_cold_rounds "$1" "$TL_DIR/cur" "$CG_B" "$VB" "$ORIG"; }
pct() { bench_pct "$@"; }
idle() {
	: >"$TL_DIR/cur.p99"
	: >"$TL_DIR/cur.lat"
	rounds 1
	cat "$TL_DIR/cur.lat" >>"$TL_DIR/idle.lat"
	cat "$TL_DIR/cur.p99" >>"$TL_DIR/idle.p99"
}
: >"$TL_DIR/idle.lat"
: >"$TL_DIR/idle.p99"
# measure ID WHAT: rounds under the attack running now; a row.
measure() {
	local id=$1 what=$2 kb0
	kb0=$(hwm_kb)
	: >"$TL_DIR/cur.p99"
	: >"$TL_DIR/cur.lat"
	rounds "$ROUNDS"
	cp "$TL_DIR/cur.lat" "$TL_DIR/$id.lat"
	cp "$TL_DIR/cur.p99" "$TL_DIR/$id.p99"
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$what" "$(pct "$TL_DIR/cur.lat" 0.5)" "$(pct "$TL_DIR/cur.lat" 0.99)" \
		"$((($(hwm_kb) - kb0) / 1024))" "$(hwm_kb)" >>"$TL_DIR/attacks"
	kill -0 "$TIERD" || bench_fail "tierd died under $what"
}
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

idle
# 10a: a FIFO.
as_nobody bash -c "cd '$VA/nobody' && mkfifo p && exec 3<>p && exec 3>&-"
measure 10a "a FIFO made, opened and closed by uid 65534"
idle
# 10b: status polled over many files.
mkdir "$VA/many"
"$BUILD/tests/mkfiles" "$VA/many" "$MANY"
setpriv --reuid=65534 --regid=65534 --clear-groups timeout 3600 bash -c "while :; do
	busctl --system call org.tierd1 /org/tierd1 org.tierd1.Manager TenantStatus >/dev/null 2>&1
	busctl --system get-property org.tierd1 /org/tierd1/tenant/alpha org.tierd1.Tenant ResidentBytes FilesByState >/dev/null 2>&1
	busctl --system call org.tierd1 /org/tierd1 org.freedesktop.DBus.ObjectManager GetManagedObjects >/dev/null 2>&1
done" &
POLLER=$!
TL_PIDS+=("$POLLER")
sleep 2
measure 10b "status polled by uid 65534 over $MANY files"
kill "$POLLER"; wait "$POLLER" 2>/dev/null
rm -rf "$VA/many"
idle
# 10c: a rename storm where a catalog is kept.
mkdir "$VA/storm"
"$BUILD/tests/mkfiles" "$VA/storm" "$STORM"
timeout 3600 bash -c "cd '$VA' && while :; do mv storm storm2; mv storm2 storm; done" &
STORMER=$!
TL_PIDS+=("$STORMER")
sleep 2
measure 10c "a directory of $STORM files renamed back and forth"
kill "$STORMER"; wait "$STORMER" 2>/dev/null
idle
# 10d: 256 parallel cold readers in alpha, each reading its own released
# file (16 MiB; 4 MiB small) from start to end.
mkdir "$VA/r"
RMIB=$(bench_size 16 4)
for i in $(seq 256); do head -c $((RMIB << 20)) /dev/urandom >"$VA/r/f$i"; done
"$TIERCTL" archive "$VA"/r/f* >/dev/null && "$TIERCTL" release "$VA"/r/f* >/dev/null
readers() { # CGROUP: alpha's 256 readers, started in it
	READERS=()
	for i in $(seq 256); do
		bench_spawn "$1" timeout 3600 cat "$VA/r/f$i" >/dev/null
		READERS+=("$BENCH_PID")
		TL_PIDS+=("$BENCH_PID")
	done
	sleep 1
}
readers "$CG_A"
measure 10d "256 parallel cold readers in alpha, in alpha's own cgroup"
kill "${READERS[@]}" 2>/dev/null; wait "${READERS[@]}" 2>/dev/null
idle
# 10g: the same in tierd's cgroup. Every answer wakes every reader
# blocked on the group; woken readers beside tierd and its workers take
# the CPU from them (and so from beta's fills).
"$TIERCTL" release "$VA"/r/f* >/dev/null
sync -f "$VA"
readers ""
measure 10g "the same 256 readers, in tierd's cgroup"
kill "${READERS[@]}" 2>/dev/null; wait "${READERS[@]}" 2>/dev/null
idle
# 10e: a big archive.
head -c $((BIG_GIB << 30)) /dev/urandom >"$VA/big" 2>/dev/null || dd if=/dev/urandom of="$VA/big" bs=1M count=$((BIG_GIB << 10)) status=none
"$TIERCTL" archive "$VA/big" >/dev/null &
ARCHIVER=$!
TL_PIDS+=("$ARCHIVER")
sleep 1
measure 10e "an archive of a $BIG_GIB GiB file in alpha"
wait "$ARCHIVER"
idle
# 10f: gc of alpha's store (what was archived above and deleted).
rm -f "$VA/big" "$VA"/r/f*
sleep 2
"$TIERCTL" gc alpha >/dev/null 2>&1 &
GC=$!
TL_PIDS+=("$GC")
measure 10f "garbage collection of alpha's store"
wait "$GC"
idle
idle

IDLE_P50=$(pct "$TL_DIR/idle.lat" 0.5) IDLE_P99=$(pct "$TL_DIR/idle.lat" 0.99)
echo "# beta's idle cold reads: p50 $IDLE_P50 ms, p99 $IDLE_P99 ms over $(wc -l <"$TL_DIR/idle.lat") reads"
BENCH_RUNS=$ROUNDS
while IFS=$'\t' read -r id what p50 p99 grew hwm; do
	BENCH_FIGURE_SPREAD=$(bench_spread $(cat "$TL_DIR/$id.p99"))
	BENCH_BASELINE_SPREAD=$(bench_spread $(cat "$TL_DIR/idle.p99"))
	bench_row "$id" "beta's cold 4 KiB read p99 under: $what" ms "$p99" "$IDLE_P99" \
		"beta's idle p99 (rounds between the attacks)" "<=" 1.5 \
		"p50 $p50 ms (idle $IDLE_P50); $((ROUNDS * ROUND)) reads; tierd peak RSS $((hwm / 1024)) MiB (+$grew MiB)"
done <"$TL_DIR/attacks"
tl_tierd_stop
