#!/bin/bash
# The policy engine on the real kernel: a tenant with a 64 MiB quota and
# 200 MiB of archived data stays under its quota while a reader walks all of
# it, every byte right; pinned files (glob and mark) stay local; a fill that
# nothing can make room for gets EDQUOT and QuotaPressure.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
echo "# quotas and the policy engine (btrfs)"
TIERCTL=$BUILD/tierctl
BUSCTL="busctl --system"
FS=$TL_DIR/fs A=$TL_DIR/views/alpha B=$TL_DIR/views/beta G=$TL_DIR/views/gamma D=$TL_DIR/views/delta
ORIG=$TL_DIR/orig
mkdir -p "$ORIG" "$TL_DIR/store"

tl_loopfs btrfs 1G "$FS" || { not_ok "mkfs"; tl_summary; exit 1; }
for t in alpha beta gamma delta; do tl_subvol btrfs "$FS/$t"; done
cat >"$TL_DIR/policy.json" <<EOF2
{"version": 1,
 "defaults": {"chunk": "1M", "readahead": "2M"},
 "tenants": [
  {"name": "alpha", "subvolume": "$FS/alpha", "mount": "$A", "backend": "file://$TL_DIR/store/alpha",
   "quota": "64M", "high_watermark": 0.9, "low_watermark": 0.75, "pin": ["keep/*"]},
  {"name": "beta", "subvolume": "$FS/beta", "mount": "$B", "backend": "file://$TL_DIR/store/beta",
   "quota": "2M"},
  {"name": "gamma", "subvolume": "$FS/gamma", "mount": "$G", "backend": "file://$TL_DIR/store/gamma",
   "archive_after": "2s", "archive_min_size": "64K", "archive_rate": "100M"},
  {"name": "delta", "subvolume": "$FS/delta", "mount": "$D", "backend": "file://$TL_DIR/store/delta",
   "quota": "8M", "high_watermark": 1, "low_watermark": 0.95, "restore": "whole"}]}
EOF2
tl_dbus_start || { not_ok "dbus-daemon"; tl_summary; exit 1; }
check "tierd starts with quotas" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }
ALPHA=/org/tierd1/tenant/alpha BETA=/org/tierd1/tenant/beta
prop() { $BUSCTL get-property org.tierd1 "$1" org.tierd1.Tenant "$2" | cut -d' ' -f2; }
check "Quota reads 64 MiB" test "$(prop $ALPHA Quota)" = $((64 << 20))
dbus-monitor --system "type='signal',sender='org.tierd1'" >"$TL_DIR/monitor" 2>&1 &
TL_PIDS+=("$!")

# 50 files of 4 MiB (200 MiB), two of them pinned by the glob, one by mark.
mkdir -p "$A/data" "$A/keep"
for i in $(seq 50); do head -c $((4 << 20)) /dev/urandom >"$ORIG/$i"; done
for i in $(seq 48); do cp "$ORIG/$i" "$A/data/$i"; done
cp "$ORIG/49" "$A/keep/49"; cp "$ORIG/50" "$A/keep/50"
FILES="$(for i in $(seq 48); do echo "$A/data/$i"; done) $A/keep/49 $A/keep/50"
check "tierctl pin of one file" "$TIERCTL" pin "$A/data/1"
check "archive all 200 MiB" "$TIERCTL" archive $FILES
state() { "$TIERCTL" status --json "$1" | sed -n 's/.*"state":"\([a-z]*\)".*/\1/p'; }
quota=$((64 << 20))
# Archived files are releasable: the high watermark brings usage down.
for _ in $(seq 100); do [ "$(prop $ALPHA UsedBytes)" -le "$quota" ] && break; sleep 0.1; done
check "after the archive, usage is brought under the quota ($(prop $ALPHA UsedBytes) bytes)" \
	test "$(prop $ALPHA UsedBytes)" -le "$quota"
check "... UsedBytes agrees with the blocks on disk" bash -c "
	used=\$($BUSCTL get-property org.tierd1 $ALPHA org.tierd1.Tenant UsedBytes | cut -d' ' -f2)
	disk=\$(find '$FS/alpha' -type f -printf '%b\n' | awk '{ s += \$1 * 512 } END { print s }')
	echo \"# accounting \$used, disk \$disk\"; [ \$used = \$disk ]"

# A reader walks all of it; usage sampled all along.
( max=0; while :; do u=$(prop $ALPHA UsedBytes 2>/dev/null) || break; [ "${u:-0}" -gt "$max" ] && max=$u && echo "$max" >"$TL_DIR/max"; sleep 0.05; done ) &
SAMPLER=$!
TL_PIDS+=("$SAMPLER")
# (Each read bounded: a read that hangs fails the walk, exit 124.)
walk_ok() {
	for i in $(seq 48); do timeout 60 cmp -s "$A/data/$i" "$ORIG/$i" || { echo "# data/$i differs or hangs"; return 1; }; done
	timeout 60 cmp -s "$A/keep/49" "$ORIG/49" && timeout 60 cmp -s "$A/keep/50" "$ORIG/50"
}
check "a reader walks all 200 MiB: every byte right" walk_ok
kill "$SAMPLER" 2>/dev/null
check "... the tenant stayed within its quota all along (max $(cat "$TL_DIR/max" 2>/dev/null) of $quota bytes)" \
	test "$(cat "$TL_DIR/max")" -le "$quota"
check "... by releasing files (QuotaReleases $(prop $ALPHA QuotaReleases))" test "$(prop $ALPHA QuotaReleases)" -gt 10
check "... no fill was denied" test "$(prop $ALPHA QuotaDenials)" = 0
check "tierctl status shows alpha's quota, used of 64M" bash -c "'$TIERCTL' status | grep '^alpha ' | grep -Eq ' [0-9.]+[KMG]?B?/64M '"
check "... and --json its bytes" bash -c "'$TIERCTL' status --json | grep -q '\"quota\":$((64 << 20))'"
check "pinned by the glob: keep/49 and keep/50 stayed local" \
	bash -c "[ \"\$('$BUILD/tests/data-bytes' '$A/keep/49')\" = $((4 << 20)) ] && [ \"\$('$BUILD/tests/data-bytes' '$A/keep/50')\" = $((4 << 20)) ]"
check "pinned by mark: data/1 stayed local" test "$("$BUILD/tests/data-bytes" "$A/data/1")" = $((4 << 20))
# Again, with the kernel dropping dentries all along (memory pressure): the
# files the quota picks are cold ones, reached by handle, often with no
# name the loop can read; with "pin" globs each needs its name (found on a
# thread), and the fills that need their room wait for it, never EDQUOT.
r0=$(prop $ALPHA QuotaReleases)
(while :; do echo 2 >/proc/sys/vm/drop_caches; sleep 0.2; done) &
DROPPER=$!
TL_PIDS+=("$DROPPER")
check "a second walk, dentries dropped every 0.2 s: every byte right" walk_ok
kill "$DROPPER" 2>/dev/null
check "... by releasing files again (QuotaReleases $r0 -> $(prop $ALPHA QuotaReleases))" \
	test "$(prop $ALPHA QuotaReleases)" -gt "$((r0 + 10))"
check "... no fill was denied" test "$(prop $ALPHA QuotaDenials)" = 0
check "... pinned by the glob and by mark: still local" \
	bash -c "for f in '$A/keep/49' '$A/keep/50' '$A/data/1'; do [ \"\$('$BUILD/tests/data-bytes' \"\$f\")\" = $((4 << 20)) ] || exit 1; done"

# beta: 2 MiB, its one local file pinned: nothing can make room.
head -c $((1536 << 10)) /dev/urandom >"$B/pinned"
head -c $((4 << 20)) /dev/urandom >"$ORIG/bbig"
cp "$ORIG/bbig" "$B/big"
"$TIERCTL" archive "$B/big" "$B/pinned" >/dev/null
"$TIERCTL" release "$B/big" >/dev/null
"$TIERCTL" pin "$B/pinned" >/dev/null
check "beta: a read that would go over the quota, with everything pinned: EDQUOT" \
	bash -c "dd if='$B/big' of=/dev/null bs=4k count=1 2>&1 | grep -q 'Disk quota exceeded'"
check "... QuotaDenials counts it" test "$(prop $BETA QuotaDenials)" -ge 1
check "... the manager's QuotaPressure signal names the tenant" \
	bash -c "grep -A2 'member=QuotaPressure' '$TL_DIR/monitor' | grep -q 'string \"beta\"'"
check "... and the reader did not hang; tierd is up" kill -0 "$TL_TIERD_PID"
"$TIERCTL" unpin "$B/pinned" >/dev/null
check "unpinned: the same read goes through (the other file is released for it)" \
	bash -c "dd if='$B/big' bs=1M count=1 2>/dev/null | cmp -s - <(head -c 1048576 '$ORIG/bbig')"
# A policy with a mistake: refused with a message naming the key; the
# running policy is unchanged.
cp "$TL_DIR/policy.json" "$TL_DIR/policy.good"
bad_policy() { # SED-EXPRESSION KEY
	sed "$1" "$TL_DIR/policy.good" >"$TL_DIR/policy.json"
	for _ in $(seq 50); do grep -q "not applied: .*'$2'" "$TL_DIR/tierd.log" && break; sleep 0.1; done
	grep -q "not applied: .*'$2'" "$TL_DIR/tierd.log" && [ "$(prop $ALPHA Quota)" = $((64 << 20)) ]
}
check "low_watermark above high_watermark: refused, named" bad_policy 's/"low_watermark": 0.75/"low_watermark": 0.95/' low_watermark
check "a quota that is not a size: refused, named" bad_policy 's/"quota": "64M"/"quota": "64Q"/' quota
check "pin that is not an array: refused, named" bad_policy 's/"pin": \["keep\/\*"\]/"pin": "keep"/' pin
check "a watermark that is a string: refused, named" bad_policy 's/"high_watermark": 0.9/"high_watermark": "0.9"/' high_watermark
cp "$TL_DIR/policy.good" "$TL_DIR/policy.json"

# gamma: files unchanged for 2 s are archived in the background.
GAMMA=/org/tierd1/tenant/gamma
stub_state() { getfattr -n security.tierd --only-values "$1" 2>/dev/null | sed -n 's/^state=//p'; }
wait_state() { for _ in $(seq 100); do [ "$(stub_state "$1")" = "$2" ] && return 0; sleep 0.1; done; return 1; }
head -c $((1 << 20)) /dev/urandom >"$G/big"
head -c 1000 /dev/urandom >"$G/tiny"
check "archive_after: a file unchanged for 2 s is archived by itself" wait_state "$G/big" archived
check "... AutoArchives counts it" test "$(prop $GAMMA AutoArchives)" -ge 1
check "... a file under archive_min_size is not" test -z "$(stub_state "$G/tiny")"
echo more >>"$G/big"
check "... written again: dirty" wait_state "$G/big" dirty
check "... and archived again after archive_after" wait_state "$G/big" archived
# The files archive_after picks are cold ones, whose dentries memory
# pressure has often dropped: tierd finds one by its handle all the same.
# Nothing here looks it up by path until it is archived (that would bring
# its dentry back).
auto_archived_since() { [ "$(prop $GAMMA AutoArchives)" -gt "$1" ]; }
n0=$(prop $GAMMA AutoArchives)
head -c $((1 << 20)) /dev/urandom >"$G/cold"
for _ in $(seq 60); do
	sync && echo 2 >/proc/sys/vm/drop_caches
	auto_archived_since "$n0" && break
	sleep 0.25
done
check "archive_after: a file whose dentry was dropped meanwhile is archived (within 15 s)" auto_archived_since "$n0"
check "... it is" wait_state "$G/cold" archived

# delta: the quota engine releases only files whose archived copy the store
# still holds. y (4 MiB) is released; x1 and x2 (3 MiB each) are archived,
# then x1's object is removed from the store behind tierd's back. After the
# restart below nothing is known of the copies: a read of y that needs room
# waits while the store is asked, gets it from x2, and x1 keeps its bytes.
# Whole restores: each read needs the whole file's room at once.
head -c $((4 << 20)) /dev/urandom >"$ORIG/dy"; head -c $((3 << 20)) /dev/urandom >"$ORIG/dx1"
head -c $((3 << 20)) /dev/urandom >"$ORIG/dx2"
cp "$ORIG/dy" "$D/y" && "$TIERCTL" archive "$D/y" && "$TIERCTL" release "$D/y"
cp "$ORIG/dx1" "$D/x1"; sleep 1.1; cp "$ORIG/dx2" "$D/x2" # x1 is the least recently used
"$TIERCTL" archive "$D/x1" "$D/x2"
check "delta: x1 and x2 archived, y released" test "$(state "$D/x1")$(state "$D/x2")$(state "$D/y")" = archivedarchivedreleased
X1_KEY=sha256/$(sha256sum <"$ORIG/dx1" | cut -d' ' -f1)
check "... x1's object removed from the store" rm "$TL_DIR/store/delta/$X1_KEY"
check "SIGTERM: tierd exits 0" tl_tierd_stop
check "last uses are kept in the state directory" test -s "$TL_DIR/state/alpha.lastuse"
check "a new tierd starts" tl_tierd_start "$TL_DIR/policy.json"
check "... and restores the last uses of alpha's 50 files" \
	grep -Eq "tenant alpha: last uses of (5[0-9]) files restored" "$TL_DIR/tierd.log"
check "... its accounting agrees with the disk again" bash -c "
	used=\$($BUSCTL get-property org.tierd1 $ALPHA org.tierd1.Tenant UsedBytes | cut -d' ' -f2)
	disk=\$(find '$FS/alpha' -type f -printf '%b\n' | awk '{ s += \$1 * 512 } END { print s }')
	[ \$used = \$disk ]"
check "delta: a read of y over the quota gets the right bytes (room made while the store was asked)" \
	cmp -s "$D/y" "$ORIG/dy"
check "... x2, whose copy is in the store, was released for it" test "$(state "$D/x2")" = released
check "... x1, whose copy is gone, was not: still archived, every byte local" \
	bash -c "test '$(state "$D/x1")' = archived && test \$('$BUILD/tests/data-bytes' '$D/x1') -ge $((3 << 20)) &&
		cmp -s '$D/x1' '$ORIG/dx1'"
check "... and the log says its copy is not in the store" grep -q "$X1_KEY is not in the store: not released" "$TL_DIR/tierd.log"
check "delta: y pinned (nothing but x1 left to release)" "$TIERCTL" pin "$D/y"
check_fails "... a read of x2 that needs room gets EDQUOT: x1 is not released for it" \
	dd if="$D/x2" of=/dev/null bs=1M count=1 status=none
check "... x1 still archived and whole" bash -c "cmp -s '$D/x1' '$ORIG/dx1' && test \$('$BUILD/tests/data-bytes' '$D/x1') -ge $((3 << 20))"
check "SIGTERM again: exits 0" tl_tierd_stop
tl_summary
