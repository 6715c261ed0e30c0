#!/bin/bash
# Row 7a, the event rate: fills per second of one worker on 4 KiB ranges of
# a released file whose object is in a file:// store on tmpfs (so the store
# costs nothing), every read a new range (chunk 4K, no read-ahead, each
# chunk checked against the manifest), and the CPU tierd and the worker
# spend per fill. Baseline: the same reads once the file is resident.
set -u
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/lib.sh"
tl_init
MIB=$(bench_size 64 16)
N=$(bench_size 8000 2000)
T=$TL_DIR/fs
tl_loopfs btrfs 1G "$T" || { echo "bench events: cannot make the filesystem"; exit 1; }
tl_subvol btrfs "$T/alpha"
mkdir -p "$TL_DIR/store"
mount -t tmpfs -o size=$((MIB * 2 + 64))M tmpfs "$TL_DIR/store" && TL_MOUNTS+=("$TL_DIR/store")
cat >"$TL_DIR/policy.json" <<EOF
{"tenants": [{"name": "alpha", "subvolume": "$T/alpha", "mount": "$TL_DIR/view", "backend": "file://$TL_DIR/store/a",
  "chunk": "4K", "readahead": "0", "small_file": "0"}]}
EOF
tl_dbus_start || exit 1
tl_tierd_start "$TL_DIR/policy.json" || exit 1
V=$TL_DIR/view
head -c $((MIB << 20)) /dev/urandom >"$V/f"
SUM=$(sha256sum <"$V/f" | cut -d' ' -f1)
"$BUILD/tierctl" archive "$V/f" >/dev/null || exit 1
WORKER=$(pgrep -P "$TL_TIERD_PID" tierd-worker | head -n 1)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

F=() C=() B=()
for i in $(seq "$BENCH_RUNS"); do
	"$BUILD/tierctl" release "$V/f" >/dev/null || exit 1
	bench_drop_caches
	c0=$(($(cpu_ticks "$TL_TIERD_PID") + $(cpu_ticks "$WORKER")))
	read -r s1 sum1 < <("$BUILD/tests/randread" "$V/f" "$N" "$i" distinct) || bench_fail "fills"
	c1=$(($(cpu_ticks "$TL_TIERD_PID") + $(cpu_ticks "$WORKER")))
	F+=("$(awk -v s="$s1" -v n="$N" 'BEGIN { printf "%.0f", n / s }')")
	C+=("$(awk -v c=$((c1 - c0)) -v t="$TICK" -v n="$N" 'BEGIN { printf "%.1f", c / t / n * 1e6 }')")
	# The baseline: the same reads, the bytes resident and cached now.
	read -r s2 sum2 < <("$BUILD/tests/randread" "$V/f" "$N" "$i" distinct)
	[ "$sum1" = "$sum2" ] || bench_fail "4 KiB fills of $V/f"
	B+=("$(awk -v s="$s2" -v n="$N" 'BEGIN { printf "%.0f", n / s }')")
done
"$BUILD/tierctl" restore "$V/f" >/dev/null
bench_same "$V/f" "$SUM"
BENCH_FIGURE_SPREAD=$(bench_spread "${F[@]}") BENCH_BASELINE_SPREAD=$(bench_spread "${B[@]}")
bench_row 7a "fills/s of one worker, 4 KiB ranges, store on tmpfs ($N fills)" fills/s "$(bench_median "${F[@]}")" \
	"$(bench_median "${B[@]}")" "the same 4 KiB preads once resident" "-" 0 \
	"CPU per fill (tierd + worker): $(bench_median "${C[@]}") us; each fill: an event, a fill fd write, a manifest check, a stub update"
tl_tierd_stop
