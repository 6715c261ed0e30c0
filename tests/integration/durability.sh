#!/bin/bash
# A power cut on the file:// store's filesystem right after an archive and a
# release: the archived object must survive, or the released file could
# never be read again; and a policy change written over D-Bus (its file on
# the same filesystem) must survive it too. The cut is XFS's shutdown without a log flush
# (xfs_io -x -c shutdown, as xfstests' crash tests do): what is not in the
# on-disk log is gone, as after a power loss. A rename whose directory was
# not synced is lost that way (checked below without tierd), so the test
# can fail.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
TIERCTL=$BUILD/tierctl
FS=$TL_DIR/fs STORE=$TL_DIR/store V=$TL_DIR/views/a ORIG=$TL_DIR/orig
mkdir -p "$ORIG"
tl_loopfs btrfs 1G "$FS" || { not_ok "mkfs btrfs"; tl_summary; exit 1; }
tl_subvol btrfs "$FS/a"
tl_loopfs xfs 512M "$STORE" || { not_ok "mkfs xfs"; tl_summary; exit 1; }
STORE_DEV=$(findmnt -no SOURCE "$STORE")
# power_cut: the store's filesystem shut down without a log flush, then
# mounted again.
power_cut() { xfs_io -x -c shutdown "$STORE" && umount "$STORE" && mount "$STORE_DEV" "$STORE"; }

# The cut itself: a name renamed into place and not synced is lost.
mkdir "$STORE/probe" && sync
python3 -c "
import os
fd = os.open('$STORE/probe/t.tmp', os.O_WRONLY | os.O_CREAT, 0o600)
os.write(fd, b'x' * 4096); os.fsync(fd); os.close(fd)
os.rename('$STORE/probe/t.tmp', '$STORE/probe/key')"
check "the power cut loses a rename whose directory was not synced (so this test can fail)" \
	bash -c "power_cut() { $(declare -f power_cut | tail -n +2); }; STORE='$STORE' STORE_DEV='$STORE_DEV'; power_cut && ! test -e '$STORE/probe/key'"
rm -rf "$STORE/probe"

# The policy file lives on the same filesystem: a change made over D-Bus
# must survive the cut too.
POLICY=$STORE/policy.json
cat >"$POLICY" <<EOF2
{"tenants": [{"name": "a", "subvolume": "$FS/a", "mount": "$V", "backend": "file://$STORE/a"}]}
EOF2
sync
tl_dbus_start || { not_ok "dbus-daemon"; tl_summary; exit 1; }
check "tierd starts" tl_tierd_start "$POLICY" || { tl_summary; exit 1; }
head -c 3M /dev/urandom >"$ORIG/f"
cp "$ORIG/f" "$V/f"
check "a file archived to the file:// store" "$TIERCTL" archive "$V/f"
check "... and released" "$TIERCTL" release "$V/f"
check "... its local copy is gone" test "$(tl_allocated "$V/f")" -eq 0
KEY=sha256/$(sha256sum "$ORIG/f" | cut -d' ' -f1)
tl_tierd_stop
check "a power cut on the store's filesystem right after" power_cut
check "... the archived object survived it ($KEY)" \
	bash -c "test \"\$(sha256sum '$STORE/a/$KEY' 2>/dev/null | cut -d' ' -f1)\" = '${KEY#sha256/}'"
check "tierd starts again" tl_tierd_start "$POLICY"
check "... and the released file reads back right" cmp "$V/f" "$ORIG/f"
# Apart: the policy file's own fsync would also make the object's rename
# durable on XFS (one log).
check "tierctl tenant set a readahead=4M (written to the policy file)" "$TIERCTL" tenant set a readahead=4M
tl_tierd_stop
check "a second power cut right after" power_cut
check "... the policy change survived it" grep -q '"readahead": "4M"' "$POLICY"
check "tierd starts with it" tl_tierd_start "$POLICY"
check "SIGTERM: tierd exits 0" tl_tierd_stop
tl_summary
