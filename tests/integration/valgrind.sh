#!/bin/bash
# valgrind memcheck on the worker's fill path: the daemons of the test build
# (make valgrind-daemons: no sandbox, the worker started under valgrind)
# archive, release and restore files whole and by ranges (chunk manifests
# checked), a corrupt object included; then the worker's report must show
# no error and no leak.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
BUILD=${VALGRIND_BUILD:-$BUILD/valgrind}
TIERCTL=$BUILD/tierctl
if ! [ -x /usr/bin/valgrind ]; then
	skip "valgrind is not installed (make deps installs it)"
	tl_summary
	exit 0
fi
tl_loopfs btrfs 1G "$TL_DIR/fs" || { not_ok "mkfs"; tl_summary; exit 1; }
tl_subvol btrfs "$TL_DIR/fs/a"
cat >"$TL_DIR/policy.json" <<EOF2
{"tenants": [{"name": "a", "subvolume": "$TL_DIR/fs/a", "mount": "$TL_DIR/view", "backend": "file://$TL_DIR/store",
  "chunk": "64K", "small_file": "0", "readahead": "0", "stall_timeout": "60s"}]}
EOF2
tl_dbus_start
export TIERD_VALGRIND_LOG=$TL_DIR/worker.%p.valgrind
check "tierd (valgrind build) starts, its worker under memcheck" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }
V=$TL_DIR/view
head -c $((3 << 20)) /dev/urandom >"$V/big"
head -c 100000 /dev/urandom >"$V/small"
cp "$V/big" "$TL_DIR/big.orig"; cp "$V/small" "$TL_DIR/small.orig"
check "archive and release" bash -c "$TIERCTL archive $V/big $V/small >/dev/null && $TIERCTL release $V/big $V/small >/dev/null"
check "ranged reads of a released file (manifest checked)" bash -c "
	[ \"\$($BUILD/tests/pread-at $V/big 1048576 4096 | sha256sum)\" = \"\$(dd if=$TL_DIR/big.orig bs=4096 skip=256 count=1 status=none | sha256sum)\" ]"
check "a whole read" cmp "$V/small" "$TL_DIR/small.orig"
check "the rest of the big one" cmp "$V/big" "$TL_DIR/big.orig"
# A corrupt object: the worker refuses it (an error path under memcheck too).
"$TIERCTL" release "$V/small" >/dev/null
obj=$(find "$TL_DIR/store" -type f -size 100000c | head -n 1)
printf 'X' | dd of="$obj" bs=1 seek=500 conv=notrunc status=none
check_fails "a corrupt object: the read fails" cat "$V/small"
check "tierd stops (the worker exits at the end of its socket)" tl_tierd_stop
logs=$(ls "$TL_DIR"/worker.*.valgrind 2>/dev/null)
check "valgrind wrote a report for the worker" test -n "$logs"
for l in $logs; do
	check "$(basename "$l"): ERROR SUMMARY: 0 errors" grep -q "ERROR SUMMARY: 0 errors" "$l"
	check "... no memory definitely lost" bash -c "! grep -q 'definitely lost: [1-9]' '$l'"
done
[ "$TL_FAIL" -gt 0 ] && for l in $logs; do sed 's/^/# /' "$l" | tail -n 40; done
tl_summary
