#!/bin/bash
# Row 12, readers first: a tenant's cold 4 KiB first reads of released
# files (p50 and p99 over 200 reads, in rounds of 40) while, in the same
# tenant and through the same worker, a released 10 GiB file is hydrated
# ("restore": "progressive": a 4 KiB read of it, then the rest in the
# background) and a resident 10 GiB file is archived at 50 MB/s
# (archive_rate), against the same reads idle (rounds before and after;
# target <= 1.2). The store is a file:// one, so that the hydration runs
# at the machine's speed, not the network's, for the whole measurement.
# BENCH_SCALE=small: 2 GiB each.
set -u
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/lib.sh"
tl_init
BIG_GIB=$(bench_size 10 2)
ROUND=40 ROUNDS=5
NB=$((3 * ROUNDS * ROUND)) # idle rounds before and after, and the attack's
FS=$TL_DIR/fs V=$TL_DIR/views/app ORIG=$TL_DIR/orig
TIERCTL=$BUILD/tierctl
tl_loopfs btrfs $((2 * BIG_GIB + 6))G "$FS" || { echo "bench hydrate: cannot make the filesystem"; exit 1; }
tl_subvol btrfs "$FS/app"
mkdir -p "$ORIG" "$TL_DIR/store"
cat >"$TL_DIR/policy.json" <<EOF
{"tenants": [{"name": "app", "subvolume": "$FS/app", "mount": "$V", "backend": "file://$TL_DIR/store/app",
              "restore": "progressive", "archive_rate": "50M", "small_file": "0", "readahead": "0"}]}
EOF
tl_dbus_start || exit 1
tl_tierd_start "$TL_DIR/policy.json" || exit 1
TIERD=$TL_TIERD_PID

echo "# $NB released files of 64 KiB; two files of $BIG_GIB GiB"
for i in $(seq "$NB"); do head -c 65536 /dev/urandom >"$ORIG/b$i"; done
cp "$ORIG"/b* "$V/"
find "$V" -type f -name 'b*' -print0 | xargs -0 -n 500 "$TIERCTL" archive >/dev/null || exit 1
find "$V" -type f -name 'b*' -print0 | xargs -0 -n 500 "$TIERCTL" release >/dev/null || exit 1
for f in hydrated archived; do
	dd if=/dev/urandom of="$V/$f" bs=1M count=$((BIG_GIB << 10)) status=none || exit 1
done
"$TIERCTL" archive "$V/hydrated" >/dev/null && "$TIERCTL" release "$V/hydrated" >/dev/null || exit 1
bench_drop_caches
NEXT=1
rounds() { bench_cold_rounds "$1" "$2" "" "$V" "$ORIG"; }
pct() { bench_pct "$@"; }
data_mib() { echo $(($("$BUILD/tests/data-bytes" "$1") >> 20)); }

rounds "$ROUNDS" "$TL_DIR/idle"
# The attack: one 4 KiB read in the middle of the released file (the rest
# follows in the background), and the archive of the other.
timeout 60 "$BUILD/tests/pread-at" "$V/hydrated" $((BIG_GIB << 29)) 4096 >/dev/null || bench_fail "the 4 KiB read of the hydrated file"
"$TIERCTL" archive "$V/archived" >/dev/null 2>&1 &
ARCHIVER=$!
TL_PIDS+=("$ARCHIVER")
sleep 1
H0=$(data_mib "$V/hydrated")
t0=$(bench_now)
rounds "$ROUNDS" "$TL_DIR/attack"
SECS=$(bench_since "$t0")
H1=$(data_mib "$V/hydrated")
[ "$H1" -lt $((BIG_GIB << 10)) ] || echo "# the hydration ended before the attack's reads did: the last rounds ran beside the archive only"
echo "# hydrated $((H1 - H0)) MiB in ${SECS} s of attack rounds ($(data_mib "$V/hydrated") of $((BIG_GIB << 10)) MiB here)"
kill "$ARCHIVER" 2>/dev/null
tl_tierd_stop # ends the archive and the hydration
tl_tierd_start "$TL_DIR/policy.json" || exit 1
rounds "$ROUNDS" "$TL_DIR/idle"
tl_tierd_stop

IDLE_P50=$(pct "$TL_DIR/idle.lat" 0.5) IDLE_P99=$(pct "$TL_DIR/idle.lat" 0.99)
echo "# idle cold reads: p50 $IDLE_P50 ms, p99 $IDLE_P99 ms over $(wc -l <"$TL_DIR/idle.lat") reads"
BENCH_RUNS=$ROUNDS
BENCH_FIGURE_SPREAD=$(bench_spread $(cat "$TL_DIR/attack.p99"))
BENCH_BASELINE_SPREAD=$(bench_spread $(cat "$TL_DIR/idle.p99"))
bench_row 12a "cold 4 KiB read p99 under a $BIG_GIB GiB hydration and a 50 MB/s archive, same tenant" ms \
	"$(pct "$TL_DIR/attack.lat" 0.99)" "$IDLE_P99" "the same reads idle (rounds before and after)" "<=" 1.2 \
	"p50 $(pct "$TL_DIR/attack.lat" 0.5) ms (idle $IDLE_P50); $((ROUNDS * ROUND)) reads; file:// store; $((H1 - H0)) MiB hydrated meanwhile"
