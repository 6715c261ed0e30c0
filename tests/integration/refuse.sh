#!/bin/bash
# tierd refuses what it cannot serve, with a clear message: a filesystem
# without pre-content support, a bad policy, a missing subvolume.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
TIERD=("$BUILD/tierd" --no-holder)

mkdir -p "$TL_DIR/tmpfs"
mount -t tmpfs -o nosuid,nodev tmpfs "$TL_DIR/tmpfs" && mkdir "$TL_DIR/tmpfs/alpha"
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

# A tenant reachable on the host through a mount without nosuid,nodev: a
# container's root writes in its view as uid 0, so a file it makes setuid
# would be setuid-root there.
tl_loopfs btrfs 300M "$TL_DIR/fs" && tl_subvol btrfs "$TL_DIR/fs/alpha" && mkdir "$TL_DIR/fs/alpha/d"
cat >"$TL_DIR/suid.json" <<EOF2
{"tenants": [{"name": "alpha", "subvolume": "$TL_DIR/fs/alpha", "mount": "$TL_DIR/views/alpha", "backend": "file://$TL_DIR/store"}]}
EOF2
# refused_for WHERE: tierd exits 1 (not 124: a hang fails) within 20 s,
# naming WHERE as the mount without nosuid,nodev.
refused_for() {
	local rc=0
	timeout 20 "${TIERD[@]}" --policy "$TL_DIR/suid.json" 2>"$TL_DIR/err" || rc=$?
	[ "$rc" -eq 1 ] && grep -q "reachable through $1, mounted without nosuid,nodev" "$TL_DIR/err" &&
		! mountpoint -q "$TL_DIR/views/alpha"
}
mount -o remount,suid,dev "$TL_DIR/fs"
check "the filesystem mounted suid,dev: tierd refuses the tenant, naming the mount" refused_for "$TL_DIR/fs"
mount -o remount,nosuid,nodev "$TL_DIR/fs"
mkdir -p "$TL_DIR/bind"
mount --bind "$TL_DIR/fs/alpha/d" "$TL_DIR/bind" && TL_MOUNTS+=("$TL_DIR/bind")
mount -o remount,bind,suid,nodev "$TL_DIR/bind"
check "a bind mount of a directory inside the subvolume, suid: refused, naming it" refused_for "$TL_DIR/bind"
umount "$TL_DIR/bind"
mkdir -p "$TL_DIR/ovl" "$TL_DIR/ovl-lower"
mount -t overlay overlay -o "lowerdir=$TL_DIR/fs/alpha/d:$TL_DIR/ovl-lower" "$TL_DIR/ovl" && TL_MOUNTS+=("$TL_DIR/ovl")
check "an overlay with a layer in the subvolume, suid: refused, naming it" refused_for "$TL_DIR/ovl"
umount "$TL_DIR/ovl"
printf '{"tenants": [{"name": "alpha", "subvolume": "%s", "mount": "%s", "backend": "file://%s", "allow_setuid_mounts": true}]}' \
	"$TL_DIR/fs/alpha" "$TL_DIR/views/alpha" "$TL_DIR/store" >"$TL_DIR/allow.json"
mount -o remount,suid,dev "$TL_DIR/fs"
TL_TIERD_ARGS=--no-holder
check "... with \"allow_setuid_mounts\": true it starts" tl_tierd_start "$TL_DIR/allow.json"
check "... and its view is nosuid,nodev all the same" bash -c "findmnt -n -o OPTIONS '$TL_DIR/views/alpha' | grep -q 'nosuid,nodev'"
cp "$TL_DIR/suid.json" "$TL_DIR/allow.json"
check "... a reload that takes the permission back while the mount is still suid is refused (exit 1), saying why" \
	bash -c "out=\$(timeout 20 '$BUILD/tierctl' reload 2>&1); [ \$? -eq 1 ] && grep -q 'mounted without nosuid,nodev' <<<\"\$out\""
check "tierd stops" tl_tierd_stop
mount -o remount,nosuid,nodev "$TL_DIR/fs"

# btrfs mounted as a subvolume (subvol=): tierd's file-id marks need the
# top level, and with it every snapshot is beneath what gc walks.
mkdir -p "$TL_DIR/sv" && mount -o subvol=alpha,nosuid,nodev "${TL_LOOPS[-1]}" "$TL_DIR/sv" && TL_MOUNTS+=("$TL_DIR/sv")
printf '{"tenants": [{"name": "alpha", "subvolume": "%s", "mount": "%s", "backend": "file://%s"}]}' \
	"$TL_DIR/sv/d" "$TL_DIR/views/alpha" "$TL_DIR/store" >"$TL_DIR/sv.json"
check "a btrfs mounted at a subvolume (subvol=alpha): refused (exit 1), saying the top level must be mounted" \
	bash -c "timeout 20 ${TIERD[*]} --policy '$TL_DIR/sv.json' 2>'$TL_DIR/err'; [ \$? -eq 1 ] && grep -q 'top level mounted (subvolid=5)' '$TL_DIR/err'"
umount "$TL_DIR/sv"

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
