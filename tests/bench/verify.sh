#!/bin/bash
# The cost of checking every chunk against its manifest: a cold sequential
# read of a released 512 MiB file with "verify" on, against the same read
# with it off (the baseline), file:// stores on tmpfs so the store is not
# what is measured. Median of BENCH_RUNS each.
set -u
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/lib.sh"
MIB=${BENCH_VERIFY_MIB:-$(bench_size 512 128)}
tl_init
FS=$TL_DIR/fs
tl_loopfs btrfs 3G "$FS" || { echo "bench verify: cannot make the filesystem"; exit 1; }
mkdir -p "$TL_DIR/store"
mount -t tmpfs -o size=$((MIB * 2 + 64))M tmpfs "$TL_DIR/store" && TL_MOUNTS+=("$TL_DIR/store")
for t in on off; do tl_subvol btrfs "$FS/$t"; done
cat >"$TL_DIR/policy.json" <<EOF2
{"tenants": [
 {"name": "on", "subvolume": "$FS/on", "mount": "$TL_DIR/views/on", "backend": "file://$TL_DIR/store/on"},
 {"name": "off", "subvolume": "$FS/off", "mount": "$TL_DIR/views/off", "backend": "file://$TL_DIR/store/off",
  "verify": false}]}
EOF2
tl_dbus_start || exit 1
tl_tierd_start "$TL_DIR/policy.json" || exit 1
head -c $((MIB << 20)) /dev/urandom >"$TL_DIR/views/on/f"
cp "$TL_DIR/views/on/f" "$TL_DIR/views/off/f"
"$BUILD/tierctl" archive "$TL_DIR/views/on/f" "$TL_DIR/views/off/f" || exit 1
SUM=$(sha256sum <"$TL_DIR/views/on/f" | cut -d' ' -f1)
cold_read() { # VIEW: MB/s of one read of the released file, caches dropped
	"$BUILD/tierctl" release "$1/f" >/dev/null || return 1
	bench_drop_caches
	local t0; t0=$(bench_now)
	cat "$1/f" >/dev/null
	awk -v s="$(bench_since "$t0")" -v m="$MIB" 'BEGIN { printf "%.1f", m * 1.048576 / s }'
}
F=() B=()
for _ in $(seq "$BENCH_RUNS"); do
	F+=("$(cold_read "$TL_DIR/views/on")") && bench_same "$TL_DIR/views/on/f" "$SUM"
	B+=("$(cold_read "$TL_DIR/views/off")") && bench_same "$TL_DIR/views/off/f" "$SUM"
done
tl_tierd_stop
BENCH_FIGURE_SPREAD=$(bench_spread "${F[@]}") BENCH_BASELINE_SPREAD=$(bench_spread "${B[@]}")
bench_row V "cold read, $MIB MiB, each chunk checked (verify on)" MB/s "$(bench_median "${F[@]}")" \
	"$(bench_median "${B[@]}")" "the same read with verify off" ">=" 0.95 "file:// stores on tmpfs"
