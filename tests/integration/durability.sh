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

# Durability off the reader's path: a reader gets restored bytes as soon as
# they are in the page cache, and the stub records them only after an
# fdatasync. The test build holds every sync back (TIERD_TEST_SYNC_PAUSE_MS),
# so the power is cut, on the tiered filesystem itself, between the answer
# and the record: the unsynced bytes and the record go together, and the file
# is fetched again, never read as zeros. A record written before the sync
# would vouch for blocks the cut lost (checked: they are gone).
TFS=$TL_DIR/tfs VB=$TL_DIR/views/b
tl_loopfs xfs 512M "$TFS" || { not_ok "mkfs xfs"; tl_summary; exit 1; }
TFS_DEV=$(findmnt -no SOURCE "$TFS")
mkdir -p "$TFS/b"
P2=$TL_DIR/policy-b.json
cat >"$P2" <<EOF2
{"tenants": [{"name": "b", "subvolume": "$TFS/b", "mount": "$VB", "backend": "file://$STORE/b"}]}
EOF2
check "tierd starts on an XFS tenant" tl_tierd_start "$P2"
head -c 8M /dev/urandom >"$ORIG/g"
cp "$ORIG/g" "$VB/g"
check "a file archived and released there" bash -c "'$TIERCTL' archive '$VB/g' && '$TIERCTL' release '$VB/g'"
tl_tierd_stop
sync
stub_state() { getfattr --only-values -n security.tierd "$TFS/b/g" 2>/dev/null | grep -a '^state='; }
# A crash in the same window: tierd killed after the answer, before the
# record. The record is lost, the bytes are not: the next tierd fetches the
# range again and writes it over what the reader saw.
TIERD_TEST_SYNC_PAUSE_MS=120000 BUILD=$BUILD/testhooks tl_tierd_start "$P2"
check "tierd (test build, syncs held back) starts" kill -0 "$TL_TIERD_PID"
timeout 30 dd if="$VB/g" of="$TL_DIR/mid" bs=64K skip=64 count=1 status=none
check "a read in the middle is answered before its record (exit 0, not 124)" test $? -eq 0
check "... with the right bytes" cmp "$TL_DIR/mid" <(tail -c +$((4096 * 1024 + 1)) "$ORIG/g" | head -c 64K)
check "... not recorded yet" test "$(stub_state)" = "state=released"
kill -KILL "$TL_TIERD_PID"
wait "$TL_TIERD_PID" 2>/dev/null
TL_TIERD_PID=
check "tierd killed in that window: the record is lost with it" test "$(stub_state)" = "state=released"
check "... the next tierd starts" tl_tierd_start "$P2"
check "... and the file reads back right" timeout 60 cmp "$VB/g" "$ORIG/g"
check "... and is recorded whole once synced" \
	tl_eventually bash -c "getfattr --only-values -n security.tierd '$TFS/b/g' | grep -qax 'state=archived'"
check "... which a release undoes" "$TIERCTL" release "$VB/g"
tl_tierd_stop
sync
TIERD_TEST_SYNC_PAUSE_MS=120000 BUILD=$BUILD/testhooks tl_tierd_start "$P2"
check "tierd (test build, syncs held back) starts again" kill -0 "$TL_TIERD_PID"
# A read of the first 64 KiB; the whole pause is 120 s, so an answer that
# waited for the record fails the bound (exit 124).
timeout 30 dd if="$VB/g" of="$TL_DIR/head" bs=64K count=1 status=none
check "a read is answered before its record (exit 0 within 30 s, not 124)" test $? -eq 0
check "... with the right bytes" cmp "$TL_DIR/head" <(head -c 64K "$ORIG/g")
check "... while the stub still says released (not recorded)" test "$(stub_state)" = "state=released"
check "... and the bytes are in the file, not yet durable" test "$(tl_allocated "$TFS/b/g")" -gt 0
check "the power cut on the tiered filesystem right then" xfs_io -x -c shutdown "$TFS"
kill -KILL "$TL_TIERD_PID" 2>/dev/null
wait "$TL_TIERD_PID" 2>/dev/null
TL_TIERD_PID=
for m in $(findmnt -rn -o TARGET | grep -F "$TL_DIR/" | grep -e "$VB" -e "$TFS" | sort -r); do umount -l "$m"; done
check "... the filesystem mounts again" mount -o nosuid,nodev "$TFS_DEV" "$TFS"
check "... the written bytes were lost with the cut (so the test can fail)" test "$(tl_allocated "$TFS/b/g")" -eq 0
check "... and so was the record: still released" test "$(stub_state)" = "state=released"
check "tierd starts again" tl_tierd_start "$P2"
check "... and the file reads back right, never zeros" timeout 60 cmp "$VB/g" "$ORIG/g"

# The owner's chmod between a reader's answer and the record holds: the
# record puts nothing back (the mode went back before the answer).
head -c 100K /dev/urandom >"$ORIG/s"
cp "$ORIG/s" "$VB/s" && chmod 4755 "$VB/s"
check "a setuid file archived and released" bash -c "'$TIERCTL' archive '$VB/s' && '$TIERCTL' release '$VB/s'"
tl_tierd_stop
TIERD_TEST_SYNC_PAUSE_MS=3000 BUILD=$BUILD/testhooks tl_tierd_start "$P2"
check "tierd (test build, syncs held 3 s) starts" kill -0 "$TL_TIERD_PID"
check "a read of it is answered with the right bytes, mode 4755" \
	bash -c "timeout 30 cmp '$VB/s' '$ORIG/s' && test \"\$(stat -c %a '$VB/s')\" = 4755"
check "chmod u-s right after, before the record" chmod u-s "$VB/s"
check "... the record comes (archived)" \
	tl_eventually bash -c "getfattr --only-values -n security.tierd '$TFS/b/s' | grep -qax 'state=archived'"
check "... and the chmod held: mode 755" test "$(stat -c %a "$VB/s")" = 755
check "SIGTERM: tierd exits 0" tl_tierd_stop

# The record waits for the file's inode lock, and so may the put-back of a
# fill's mode and times: the event loop never does (supervisor/events/
# inodework.h). Someone holds the lock of h (an O_DIRECT read stuck in a
# userfaultfd fault: XFS holds i_rwsem shared meanwhile) when its record is
# due (syncs held 3 s); while the record waits, a cold read of another
# file must be answered as usual. With the record on the loop, it hung
# until the lock was let go.
for f in h j; do head -c 4M /dev/urandom >"$ORIG/$f"; done
tl_tierd_start "$P2" && cp "$ORIG/h" "$ORIG/j" "$VB/" && "$TIERCTL" archive "$VB/h" "$VB/j" >/dev/null &&
	"$TIERCTL" release "$VB/h" "$VB/j" >/dev/null
check "two files archived and released" test $? -eq 0
tl_tierd_stop
TIERD_TEST_SYNC_PAUSE_MS=3000 BUILD=$BUILD/testhooks tl_tierd_start "$P2"
check "tierd (test build, syncs held 3 s) starts" kill -0 "$TL_TIERD_PID"
check "a read of h's head, answered before its record" \
	bash -c "timeout 30 dd if='$VB/h' bs=64K count=1 status=none | cmp - <(head -c 64K '$ORIG/h')"
mkfifo "$TL_DIR/hold.in"
"$BUILD/tests/hold-inode" "$VB/h" 0 <"$TL_DIR/hold.in" >"$TL_DIR/hold.out" 2>&1 &
HOLDER=$!
TL_PIDS+=("$HOLDER")
exec {HOLD_W}>"$TL_DIR/hold.in"
check "h's inode lock held (an O_DIRECT read stuck in its fault)" tl_eventually grep -qx held "$TL_DIR/hold.out"
blocked_in_setxattr() { grep -qs vfs_setxattr /proc/"$TL_TIERD_PID"/task/*/stack; }
check "... h's record is due, and waits for the lock (a tierd thread in vfs_setxattr)" \
	tl_eventually_for 20 blocked_in_setxattr
check "... h still unrecorded" bash -c "getfattr --only-values -n security.tierd '$TFS/b/h' | grep -qax 'state=released'"
t0=$(date +%s%N)
timeout 20 cmp "$VB/j" "$ORIG/j"
rc=$?
check "meanwhile a cold read of j: right bytes (exit 0, not 124: the loop did not wait)" test "$rc" -eq 0
echo "# j read in $((($(date +%s%N) - t0) / 1000000)) ms while h's record waited"
check "... and tierctl status answers" timeout 20 "$TIERCTL" status
exec {HOLD_W}>&-
check "the lock let go: the holder ends" tl_eventually_for 20 bash -c "! kill -0 $HOLDER 2>/dev/null"
check "... h is recorded (partial)" \
	tl_eventually_for 20 bash -c "getfattr --only-values -n security.tierd '$TFS/b/h' | grep -qax 'state=partial'"
check "... and reads back right" timeout 60 cmp "$VB/h" "$ORIG/h"
check "SIGTERM: tierd exits 0" tl_tierd_stop
tl_summary
