#!/bin/bash
# The cost of checking every chunk against its manifest: a cold sequential
# read of a released 512 MiB file with "verify" on, against the same read
# with it off (the baseline), file:// stores on tmpfs so the store is not
# what is measured. Best of three each.
set -u
MIB=${BENCH_VERIFY_MIB:-512}
source "$(dirname "$0")/../lib/lib.sh"
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
cold_read() { # VIEW: seconds to read the released file once
	"$BUILD/tierctl" release "$1/f" >/dev/null || return 1
	sync; echo 3 >/proc/sys/vm/drop_caches
	local t0 t1
	t0=$(date +%s.%N); cat "$1/f" >/dev/null; t1=$(date +%s.%N)
	awk "BEGIN { print $t1 - $t0 }"
}
best_on=999 best_off=999
for _ in 1 2 3; do
	s=$(cold_read "$TL_DIR/views/on"); best_on=$(awk "BEGIN { print ($s < $best_on) ? $s : $best_on }")
	s=$(cold_read "$TL_DIR/views/off"); best_off=$(awk "BEGIN { print ($s < $best_off) ? $s : $best_off }")
done
tl_tierd_stop
awk -v mib="$MIB" -v on="$best_on" -v off="$best_off" 'BEGIN {
	printf "cold sequential read of %d MiB: verify on %.0f MB/s, off %.0f MB/s; ratio %.3f (target: >= 0.95)\n",
		mib, mib * 1.048576 / on, mib * 1.048576 / off, off / on
}'
