#!/bin/bash
# tierd refuses what it cannot serve, with a clear message: a filesystem
# without pre-content support, a bad policy, a missing subvolume.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
TIERD=("$BUILD/tierd" --no-holder)

mkdir -p "$TL_DIR/tmpfs"
mount -t tmpfs tmpfs "$TL_DIR/tmpfs" && mkdir "$TL_DIR/tmpfs/alpha"
cat >"$TL_DIR/tmpfs.json" <<EOF2
{"tenants": [{"name": "alpha", "subvolume": "$TL_DIR/tmpfs/alpha", "mount": "$TL_DIR/views/alpha", "backend": "file://$TL_DIR/store"}]}
EOF2
tl_dbus_start
check_fails "a tmpfs tenant is refused" timeout 20 "${TIERD[@]}" --policy "$TL_DIR/tmpfs.json" 2>"$TL_DIR/err"
check "... saying the filesystem cannot take pre-content marks" grep -q "cannot take fanotify pre-content marks" "$TL_DIR/err"
check_fails "... and no view is left" mountpoint -q "$TL_DIR/views/alpha"
check_fails "refused with a holder too" timeout 20 "$BUILD/tierd" --policy "$TL_DIR/tmpfs.json" --holder "$TL_DIR/h.sock" \
	2>"$TL_DIR/err"
check "... and the holder it started exits: a failed first start leaves nothing to keep" \
	bash -c "for _ in \$(seq 50); do test -S '$TL_DIR/h.sock' || exit 0; sleep 0.1; done; exit 1"

printf '{"tenants": [], "tenants": []}' >"$TL_DIR/dup.json"
check_fails "a policy with a duplicate key is refused" "${TIERD[@]}" --policy "$TL_DIR/dup.json" 2>"$TL_DIR/err"
check "... naming the file and the key" grep -q "dup.json: key 'tenants'" "$TL_DIR/err"

cat >"$TL_DIR/missing.json" <<EOF2
{"tenants": [{"name": "alpha", "subvolume": "$TL_DIR/nowhere", "mount": "$TL_DIR/views/alpha", "backend": "file://$TL_DIR/store"}]}
EOF2
check_fails "a missing subvolume is refused" timeout 20 "${TIERD[@]}" --policy "$TL_DIR/missing.json" 2>"$TL_DIR/err"
check "... with a message naming it" grep -q "nowhere" "$TL_DIR/err"
check_fails "tierd without --policy is a usage error" "${TIERD[@]}"
tl_summary
