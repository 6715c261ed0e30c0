#!/bin/bash
# Boot: the policy's "filesystems". tierd mounts the tiered filesystem itself
# (by label here), marks it while it is still detached, and only then moves
# it into place and places views; it unmounts it when it stops for good.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
TIERCTL=$BUILD/tierctl
LABEL=tierd-boot-$$
FS=$TL_DIR/fs

truncate -s 512M "$TL_DIR/fs.img"
mkfs.btrfs -q -f -L "$LABEL" "$TL_DIR/fs.img" >/dev/null
DEV=$(losetup --find --show "$TL_DIR/fs.img") && TL_LOOPS+=("$DEV")
mkdir -p "$FS" "$TL_DIR/etc"
mount "$DEV" "$FS" && btrfs -q subvolume create "$FS/alpha" >/dev/null && umount "$FS"
policy() { # SOURCE
	cat >"$TL_DIR/etc/policy.json" <<EOF
{"filesystems": [{"source": "$1", "mountpoint": "$FS", "type": "btrfs", "options": "noatime"}],
 "tenants": [{"name": "alpha", "subvolume": "$FS/alpha", "mount": "$TL_DIR/views/alpha",
              "backend": "file://$TL_DIR/store"}]}
EOF
}
policy "LABEL=$LABEL"
tl_dbus_start
check "tierd starts with the filesystem not mounted" tl_tierd_start "$TL_DIR/etc/policy.json"
check "... it mounted it, by label, with its options" bash -c "findmnt -n -o OPTIONS '$FS' | grep -q noatime"
check "... marked before it appeared: the log says so, in that order" bash -c "
	grep -n -e 'watching $FS' -e '$FS mounted, marked' '$TL_TIERD_LOG' | cut -d: -f1 | tr '\n' ' ' |
	awk '{ exit !(NF == 2 && \$1 < \$2) }'"
V=$TL_DIR/views/alpha
head -c 5M /dev/urandom >"$V/f"
S=$(sha256sum <"$V/f")
check "archive and release through the view" bash -c "$TIERCTL archive $V/f >/dev/null && $TIERCTL release $V/f >/dev/null"
check "tierd stops" tl_tierd_stop
check_fails "... and unmounted what it mounted" findmnt "$FS"
check "tierd starts again" tl_tierd_start "$TL_DIR/etc/policy.json"
check "... the released file reads back right" test "$(sha256sum <"$V/f")" = "$S"
check "tierd stops again" tl_tierd_stop

mount -o nosuid,nodev "$DEV" "$FS"
check "a filesystem mounted already (by the admin) is taken as it is" tl_tierd_start "$TL_DIR/etc/policy.json"
check "... it serves the released file" bash -c "$TIERCTL release $V/f >/dev/null && [ \"\$(sha256sum <$V/f)\" = '$S' ]"
tl_tierd_stop
findmnt "$FS" >/dev/null && umount "$FS"

policy "LABEL=no-such-$$"
check_fails "a source no device has: tierd refuses to start" "$BUILD/tierd" --policy "$TL_DIR/etc/policy.json" \
	--state-dir "$TL_DIR/state" --no-holder
check "... saying why" bash -c "'$BUILD/tierd' --policy '$TL_DIR/etc/policy.json' --state-dir '$TL_DIR/state' --no-holder 2>&1 |
	grep -q 'LABEL=no-such-$$ at $FS: no block device has this source'"
check_fails "... and mounts nothing" findmnt "$FS"
tl_summary
