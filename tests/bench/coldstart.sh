#!/bin/bash
# Row 11, a cold start fetched ahead (access traces): a start that reads
# 500 released files one after another, in a fixed order, as an
# interpreter importing its modules does (sizes from 4 KiB to 4 MiB, about
# 100 MiB in all), from a real S3 store (Ceph RGW on 127.0.0.1):
#   11a with its trace (tierctl trace start, then the reads), against the
#       same start untraced (target <= 0.5);
#   11b the same traced start against a start with every file resident,
#       page cache dropped (target <= 1.3);
#   11c the bytes the trace fetched ahead against the bytes the start read
#       (target <= 1.25).
# Start-to-ready is from the trace's start (or the first read) to the last
# byte read. Each run releases everything and drops the page cache first;
# the three starts are interleaved, BENCH_RUNS times. One untimed traced
# start records the trace first. BENCH_SCALE=small: 200 files.
set -u
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/rgw.sh"
source "$(dirname "$0")/lib.sh"
tl_init
N=$(bench_size 500 200)
FS=$TL_DIR/fs V=$TL_DIR/views/app ORIG=$TL_DIR/orig
TIERCTL=$BUILD/tierctl
tl_loopfs btrfs 4G "$FS" || { echo "bench coldstart: cannot make the filesystem"; exit 1; }
tl_subvol btrfs "$FS/app"
mkdir -p "$ORIG"
RGW_PORT=${BENCH_RGW_PORT:-9510} tl_rgw_store tierd-coldstart app
cat >"$TL_DIR/policy.json" <<EOF2
{"tenants": [{"name": "app", "subvolume": "$FS/app", "mount": "$V", "backend": "$BACKEND"$EXTRA,
              "trace_window": "$(bench_size 30s 15s)"}]}
EOF2
tl_dbus_start || exit 1
tl_tierd_start "$TL_DIR/policy.json" || exit 1

# Sizes: mostly small modules, some larger libraries, a few 4 MiB shards.
echo "# $N files"
for i in $(seq "$N"); do
	case $((i % 10)) in
	0) size=$((4 << 20)) ;; 1 | 2) size=$((256 << 10)) ;; 3 | 4 | 5) size=$((32 << 10)) ;; *) size=$((4 << 10)) ;;
	esac
	d=$V/lib/m$((i % 20))
	mkdir -p "$d"
	head -c "$size" /dev/urandom >"$d/f$i"
	echo "$d/f$i" >>"$TL_DIR/order"
done
BYTES=$(xargs stat -c %s <"$TL_DIR/order" | awk '{ s += $1 } END { print s }')
xargs "$TIERCTL" archive <"$TL_DIR/order" >/dev/null || exit 1
xargs sha256sum <"$TL_DIR/order" >"$TL_DIR/sums"
release_all() { xargs "$TIERCTL" release <"$TL_DIR/order" >/dev/null || exit 1; bench_drop_caches; }
read_all() { xargs cat <"$TL_DIR/order" >/dev/null; }
# stored_after MARK RUN: the trace's run RUN is stored (the window is over).
stored() {
	for _ in $(seq 300); do
		tail -n +$((TL_LOG_MARK + 1)) "$TL_TIERD_LOG" | grep -q "trace img stored: run $1," && return 0
		sleep 0.1
	done
	return 1
}
traced_start() { # RUN: to T the seconds from the trace's start to the last byte read, to PREFETCHED its bytes
	tl_log_mark
	local t0; t0=$(bench_now)
	"$TIERCTL" trace start app img >/dev/null || exit 1
	read_all
	T+=("$(bench_since "$t0")")
	stored "$1" || { echo "bench coldstart: run $1 of the trace was not stored" >&2; exit 1; }
	PREFETCHED+=("$(tail -n +$((TL_LOG_MARK + 1)) "$TL_TIERD_LOG" |
		sed -n 's/.*trace img fetched ahead of the host in .* files (\([0-9]*\) bytes).*/\1/p' | tail -1)")
}
timed() { local t0; t0=$(bench_now); "$@"; bench_since "$t0"; }

echo "# recording the trace"
release_all
T=() PREFETCHED=()
traced_start 1
T=() U=() R=() PREFETCHED=()
for run in $(seq "$BENCH_RUNS"); do
	release_all
	U+=("$(timed read_all)")
	release_all
	traced_start $((run + 1))
	sha256sum --quiet -c "$TL_DIR/sums" || bench_fail "a traced start's files"
	bench_drop_caches # resident now: only the page cache goes
	R+=("$(timed read_all)")
	echo "# run $run: untraced ${U[-1]} s, traced ${T[-1]} s (${PREFETCHED[-1]:-?} bytes ahead), resident ${R[-1]} s"
done
tl_tierd_stop
BENCH_FIGURE_SPREAD=$(bench_spread "${T[@]}") BENCH_BASELINE_SPREAD=$(bench_spread "${U[@]}")
bench_row 11a "cold start, $N files read in order, traced" s "$(bench_median "${T[@]}")" \
	"$(bench_median "${U[@]}")" "the same start untraced" "<=" 0.5 "Ceph RGW on 127.0.0.1; start-to-last-byte"
BENCH_FIGURE_SPREAD=$(bench_spread "${T[@]}") BENCH_BASELINE_SPREAD=$(bench_spread "${R[@]}")
bench_row 11b "cold start, $N files read in order, traced" s "$(bench_median "${T[@]}")" \
	"$(bench_median "${R[@]}")" "the same start, every file resident" "<=" 1.3 "page cache dropped"
BENCH_FIGURE_SPREAD=$(bench_spread "${PREFETCHED[@]}") BENCH_BASELINE_SPREAD=0
bench_row 11c "bytes fetched ahead by the trace" bytes "$(bench_median "${PREFETCHED[@]}")" "$BYTES" \
	"the bytes the start read" "<=" 1.25
