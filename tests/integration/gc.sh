#!/bin/bash
# Garbage collection of a tenant's store (tierctl gc), on the real kernel
# and a real store: files deleted go once the catalog's retention and the
# grace period are past; what a stub (a btrfs snapshot's too) or the
# catalog still names stays, a deduplicated object stays, keys that are not
# tierd's are never touched, an archive that reuses an object refreshes it,
# a collection during archives of the very contents it is deleting loses
# nothing; and tierctl audit finds (and --repair mends what it can) lost
# objects, strays and a catalog that differs from the disk. $1: the store,
# "file" (default) or "s3" (Ceph RGW).
set -u
KIND=${1:-file}
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/rgw.sh"
tl_init
echo "# gc: mark and sweep of the store ($KIND store)"
TIERCTL=$BUILD/tierctl
FS=$TL_DIR/fs STORE=$TL_DIR/store/alpha V=$TL_DIR/view
mkdir -p "$TL_DIR/store/beta"
if [ "$KIND" = s3 ]; then
	tl_rgw_store tierd-gc alpha
	obj_exists() { rgw_curl -sf -o /dev/null -I "$RGW_ENDPOINT/tierd-gc/alpha/$1"; }
	obj_mtime() {
		date -d "$(rgw_curl -sf -I "$RGW_ENDPOINT/tierd-gc/alpha/$1" | tr -d '\r' | sed -n 's/^[Ll]ast-[Mm]odified: //p')" +%s
	}
	obj_put() { # KEY: stdin as its content
		rgw_curl -sf -X PUT -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' --data-binary @- \
			"$RGW_ENDPOINT/tierd-gc/alpha/$1" >/dev/null
	}
	obj_count() { # every key under the prefix, tierd's or not
		rgw_curl -sf "$RGW_ENDPOINT/tierd-gc?list-type=2&max-keys=1000&prefix=alpha%2F" | grep -o '<Key>' | wc -l
	}
else
	BACKEND=file://$STORE EXTRA=
	obj_exists() { test -f "$STORE/$1"; }
	obj_mtime() { stat -c %Y "$STORE/$1"; }
	obj_put() { mkdir -p "$(dirname "$STORE/$1")" && cat >"$STORE/$1"; }
	obj_count() { find "$STORE" -type f | wc -l; }
fi

tl_loopfs btrfs 1G "$FS" || { not_ok "mkfs"; tl_summary; exit 1; }
tl_subvol btrfs "$FS/alpha"
tl_subvol btrfs "$FS/beta"
cat >"$TL_DIR/policy.json" <<EOF
{"tenants": [
  {"name": "alpha", "subvolume": "$FS/alpha", "mount": "$V", "backend": "$BACKEND",
   "catalog": true, "catalog_key": "$TL_CATALOG_KEY", "gc_grace": "2s", "catalog_retention": "2s", "trace_keep": "3s"$EXTRA},
  {"name": "beta", "subvolume": "$FS/beta", "mount": "$TL_DIR/vbeta", "backend": "file://$TL_DIR/store/beta"}]}
EOF
tl_dbus_start || { not_ok "dbus-daemon"; tl_summary; exit 1; }

T=$FS/alpha
head -c 100000 /dev/urandom >"$T/keep"
head -c 50000 /dev/urandom >"$T/dupA"; cp "$T/dupA" "$T/dupB"
head -c 70000 /dev/urandom >"$T/snapfile"
head -c 40000 /dev/urandom >"$T/z"
mkdir -p "$TL_DIR/orig" && cp -a "$T/." "$TL_DIR/orig/"
gone() { ! obj_exists "$1"; }
all_gone() { local k; for k; do obj_exists "$k" && { echo "# $k is still in the store"; return 1; }; done; return 0; }
all_there() { local k; for k; do obj_exists "$k" || { echo "# $k is not in the store"; return 1; }; done; }

key_of() { getfattr -n security.tierd --only-values "$1" | sed -n 's/^key=//p'; }
manifest_of() { getfattr -n security.tierd --only-values "$1" | sed -n 's/^manifest=/manifest\//p'; }
# tierd again, and its start's catalog snapshot in the store (the tree
# without what was deleted), before the caller waits out the retention.
restart() {
	local seen
	seen=$(grep -c "catalog: snapshot written" "$TL_TIERD_LOG")
	tl_tierd_stop && tl_tierd_start "$TL_DIR/policy.json" || return 1
	for _ in $(seq 100); do
		[ "$(grep -c "catalog: snapshot written" "$TL_TIERD_LOG")" -gt "$seen" ] && return 0
		sleep 0.1
	done
	echo "# no new catalog snapshot"
	return 1
}
# A hang fails (timeout: 124), it never passes as an error; a refusal
# must exit with its own code (1 failed, 2 usage, 3 access denied).
exits() {
	local want=$1 rc
	shift
	if declare -F "$1" >/dev/null; then "$@"; else timeout 600 "$@"; fi # a function bounds itself
	rc=$?
	[ "$rc" = "$want" ] || { echo "# exit $rc, not $want: $*"; return 1; }
}
gc() { timeout 600 "$TIERCTL" gc "$@" 2>&1 | tee "$TL_DIR/gc.out"; test "${PIPESTATUS[0]}" = 0; }
said() { grep -q "$1" "$TL_DIR/gc.out" || { echo "# gc said: $(cat "$TL_DIR/gc.out")"; return 1; }; }

check "tierd starts" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }
check "every file archived" "$TIERCTL" archive "$V/keep" "$V/dupA" "$V/dupB" "$V/snapfile" "$V/z"
check "keep and dupB released" "$TIERCTL" release "$V/keep" "$V/dupB"
# A read-only btrfs snapshot of the tenant, then snapfile deleted from the
# live tree: the snapshot's stub still names its object. (tierd refuses a
# btrfs mounted other than at its top level, so every snapshot is beneath
# the walk: refuse.sh.)
btrfs -q subvolume snapshot -r "$T" "$FS/alpha-snap" >/dev/null
rm "$T/snapfile"
head -c 60000 /dev/urandom >"$V/del1"
head -c $((3 << 20)) /dev/urandom >"$V/del2" # three chunks: it has a manifest object too
check "del1 and del2, made after the snapshot, archived" "$TIERCTL" archive "$V/del1" "$V/del2"
K_KEEP=$(key_of "$T/keep") K_DUP=$(key_of "$T/dupA") K_DEL1=$(key_of "$T/del1") K_DEL2=$(key_of "$T/del2")
M_DEL2=$(manifest_of "$T/del2") K_SNAP=$(key_of "$FS/alpha-snap/snapfile") K_Z=$(key_of "$T/z")
check "dupA and dupB share one object" test "$K_DUP" = "$(key_of "$T/dupB")"
check "del2 has a manifest object" obj_exists "$M_DEL2"

check "gc of an unknown tenant: refused (exit 1)" exits 1 "$TIERCTL" gc nosuch
check "gc of a tenant without a catalog: refused (exit 1)" exits 1 "$TIERCTL" gc beta
check "... saying why" bash -c "'$TIERCTL' gc beta 2>&1 | grep -q 'keeps no catalog'"
check "gc as an unprivileged user: refused (exit 3)" exits 3 setpriv --reuid 65534 --regid 65534 --clear-groups "$TIERCTL" gc alpha
check "gc with a stray argument: usage (exit 2)" exits 2 "$TIERCTL" gc alpha --force

sleep 2.5 # past the grace period
check "gc --dry-run with nothing unreferenced: 0 would be deleted" gc alpha --dry-run
check "... so it says" said " 0 would be deleted"

# Files deleted; a foreign key and keys of a form not tierd's.
rm "$T/del1" "$T/del2" "$T/dupA"
echo foreign | obj_put "other/thing"
echo notours | obj_put "sha256/notahash"
echo upper | obj_put "sha256/$(printf '%064d' 0 | tr 0 A)"
sleep 4.5 # past the grace period and the catalog's retention (ages are whole seconds)
check "gc right after the deletes: nothing deleted (the catalog's last snapshot, still in its retention, names them)" gc alpha
check "... so it says" said " 0 deleted"
check "... del1's object is still there" obj_exists "$K_DEL1"

check "tierd restarted: a new snapshot, without the deleted files" restart
sleep 4.5
BEFORE=$(obj_count)
# An unreferenced object made just now: younger than the grace period.
YOUNG=sha256/$(head -c 32 /dev/urandom | sha256sum | cut -c1-64)
echo young | obj_put "$YOUNG"
check "gc --dry-run (before its tenant): del1, del2 and del2's manifest would be deleted" gc --dry-run alpha
check "... so it says, and one object is too young" bash -c "grep -q ' 3 would be deleted' '$TL_DIR/gc.out' && grep -q ' 1 younger' '$TL_DIR/gc.out'"
check "... and nothing was deleted" test "$(obj_count)" = "$((BEFORE + 1))"
check "... the log names what would go" grep -q "gc: would delete $K_DEL1" "$TL_TIERD_LOG"
check "gc" gc alpha
check "... 3 deleted" said " 3 deleted"
check "... del1's object is gone" gone "$K_DEL1"
check "... del2's and its manifest are gone" all_gone "$K_DEL2" "$M_DEL2"
check "... the deduplicated object dupB still refers to stays" obj_exists "$K_DUP"
check "... the object only the btrfs snapshot's stub names stays" obj_exists "$K_SNAP"
check "... keep's and z's stay" all_there "$K_KEEP" "$K_Z"
check "... the young one stays" obj_exists "$YOUNG"
check "... keys that are not tierd's stay" all_there other/thing sha256/notahash "sha256/$(printf '%064d' 0 | tr 0 A)"
check "... the catalog stays" obj_exists catalog/epoch/00000001
check "released keep and dupB read back identical" bash -c "cmp '$V/keep' '$TL_DIR/orig/keep' && cmp '$V/dupB' '$TL_DIR/orig/dupB'"
check "... and snapfile from the snapshot" cmp "$FS/alpha-snap/snapfile" "$TL_DIR/orig/snapfile"
sleep 3.5 # (ages are whole seconds)
check "gc again, the young object now old" gc alpha
check "... it goes" bash -c "grep -q ' 1 deleted' '$TL_DIR/gc.out'" && check "... from the store" gone "$YOUNG"

# An archive that finds its object in the store refreshes it before it
# relies on it: z deleted, its object old and unreferenced, then z2 with
# the same content archived.
rm "$T/z"
check "tierd restarted (z is out of the catalog)" restart
sleep 4.5
OLD=$(obj_mtime "$K_Z")
cp "$TL_DIR/orig/z" "$V/z2"
check "z2, with z's content, archived: reuses the object" "$TIERCTL" archive "$V/z2"
check "... which was refreshed (last modified $OLD, now $(obj_mtime "$K_Z"))" test "$(obj_mtime "$K_Z")" -gt "$OLD"
check "gc" gc alpha
check "... keeps it" obj_exists "$K_Z"

# Access traces: nothing refers to one; a collection deletes those not
# saved for trace_keep (3 s here), and keeps the others and anything under
# trace/ that is not of tierd's form (a trace's name: how they were kept
# before).
TOLD=$(printf '%s' old-trace | sha256sum | cut -c1-64) TNEW=$(printf '%s' new-trace | sha256sum | cut -c1-64)
echo '{}' | obj_put "trace/$TOLD"
echo '{}' | obj_put trace/Deployment/web
# (A file store's directory is its worker's, as if the worker had saved them.)
[ "$KIND" = file ] && chown -R --reference="$STORE/sha256" "$STORE/trace"
sleep 4.5
echo '{}' | obj_put "trace/$TNEW"
check "gc: a trace not saved for trace_keep (3 s) goes" gc alpha
check "... so it says" said ", 1 access traces saved within trace_keep (3s), "
check "... from the store" gone "trace/$TOLD"
check "... the trace saved since stays" obj_exists "trace/$TNEW"
check "... and a key under trace/ not of tierd's form stays" obj_exists trace/Deployment/web

# A collection during archives of the very contents it is deleting: 300
# files archived and deleted (their objects doomed), then 300 new files
# with the same contents archived while the collection runs. Afterwards
# every new file's object is in the store and reads back.
N=300
mkdir "$V/c" "$V/d"
python3 - "$V/c" "$N" <<'PY'
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], "%03d" % i), "wb") as f:
        f.write(os.urandom(1000 + i))
PY
check "$N files archived" bash -c "'$TIERCTL' archive '$V'/c/*"
mkdir -p "$TL_DIR/c.orig" && cp -r "$V/c/." "$TL_DIR/c.orig/" # (not -a: no stub xattrs)
rm -r "$V/c"
check "tierd restarted (they are out of the catalog)" restart
sleep 4.5
cp -r "$TL_DIR/c.orig/." "$V/d/"
# Unreferenced filler objects, old: the sweep takes a while, and the
# archives start once it deletes.
FILLER=$([ "$KIND" = s3 ] && echo 400 || echo 3000)
for i in $(seq "$FILLER"); do echo "filler $i" | obj_put "sha256/$(printf 'filler %d %s' "$i" "$TL_DIR" | sha256sum | cut -c1-64)"; done
[ "$KIND" = file ] && find "$STORE/sha256" -name '*' -type f -newermt '-5 seconds' -exec touch -d '-1 hour' {} +
sleep 3.5
SEEN=$(grep -c "gc: deleting" "$TL_TIERD_LOG")
gc alpha >/dev/null &
GC_PID=$!
for _ in $(seq 200); do [ "$(grep -c "gc: deleting" "$TL_TIERD_LOG")" -gt "$SEEN" ] && break; sleep 0.05; done
"$TIERCTL" jobs >"$TL_DIR/jobs.out" 2>&1
check "tierctl jobs, while gc deletes: it lists the gc job" grep -qE '^[0-9]+ +gc ' "$TL_DIR/jobs.out"
check "the same contents archived again while gc deletes" "$TIERCTL" archive "$V"/d/*
check "... gc ends" wait $GC_PID
echo "# gc during the archives: $(cat "$TL_DIR/gc.out")"
objects_there() {
	local f k missing=0
	for f in "$T"/d/*; do
		k=$(key_of "$f")
		obj_exists "$k" || { echo "# $f: $k is not in the store"; missing=$((missing + 1)); }
	done
	[ "$missing" = 0 ]
}
check "... every archived file's object is in the store" objects_there
check "... released, every one reads back identical" bash -c "'$TIERCTL' release '$V'/d/* && diff -r '$V/d' '$TL_DIR/c.orig' >/dev/null"

# Audit: stubs, catalog and store compared.
obj_rm() { if [ "$KIND" = s3 ]; then rgw_curl -sf -X DELETE "$RGW_ENDPOINT/tierd-gc/alpha/$1" >/dev/null; else rm "$STORE/$1"; fi; }
audit() { timeout 600 "$TIERCTL" audit "$@" >"$TL_DIR/audit.out" 2>&1; local rc=$?; grep -v '^unreferenced' "$TL_DIR/audit.out" | sed 's/^/# audit: /' | head -20; return $rc; }
finding() { grep -q "^$1"$'\t'"$2"$'\t' "$TL_DIR/audit.out" || { echo "# no $1 finding for $2"; return 1; }; }
rm -rf "$V/c" "$V/d"
head -c 30000 /dev/urandom >"$V/kept"; head -c 30000 /dev/urandom >"$V/gone"; head -c 30000 /dev/urandom >"$V/destubbed"
cp "$V/kept" "$TL_DIR/kept.orig"
check "audit: files archived, one released" bash -c "'$TIERCTL' archive '$V/kept' '$V/gone' '$V/destubbed' && '$TIERCTL' release '$V/gone'"
check "tierd restarted (a snapshot of the tree as it is)" restart
check "audit of a sound tenant: no problem found (exit 0)" audit alpha
busctl --system call org.tierd1 /org/tierd1 org.tierd1.Manager StartAudit sb alpha false >"$TL_DIR/start.out" 2>&1
check "StartAudit replies with its job, not its result (busctl)" grep -qE '^o "/org/tierd1/job/[0-9]+"$' "$TL_DIR/start.out"
JOB=$(cut -d'"' -f2 "$TL_DIR/start.out")
"$TIERCTL" cancel "$JOB" >"$TL_DIR/cancel.out" 2>&1
rc=$?
check "tierctl cancel of that audit: refused, an audit cannot stop half way, or it ended already (exit $rc)" \
	bash -c "[ $rc = 1 ] && grep -qE 'cannot be canceled|no job' '$TL_DIR/cancel.out'"
audit_over() { ! "$TIERCTL" jobs | grep -qE '^[0-9]+ +audit '; }
for _ in $(seq 600); do audit_over && break; sleep 0.1; done
check "... it ends (tierctl jobs lists it no more)" audit_over
check "audit as an unprivileged user: refused (exit 3)" exits 3 setpriv --reuid 65534 --regid 65534 --clear-groups "$TIERCTL" audit alpha
check "audit of a tenant without a catalog: refused (exit 1)" exits 1 "$TIERCTL" audit beta
# The store loses two objects (an archived file's, a released file's), a
# stray object appears, and a stub disappears from under the catalog.
K_KEPT=$(key_of "$T/kept") K_GONE=$(key_of "$T/gone")
obj_rm "$K_KEPT"; obj_rm "$K_GONE"
STRAY=sha256/$(head -c 32 /dev/urandom | sha256sum | cut -c1-64)
echo stray | obj_put "$STRAY"
setfattr -x security.tierd "$T/destubbed"
check "audit finds problems: exits 1" exits 1 audit alpha
check "... kept's object is missing" finding object-missing kept
check "... gone's object is missing" finding object-missing gone
check "... the stray object is unreferenced" finding unreferenced "$STRAY"
check "... destubbed is in the catalog only" finding catalog-only destubbed
check "... and nothing was changed" bash -c "! test -e '$STORE/$K_KEPT' || test '$KIND' = s3"
check "audit --repair: still exits 1 (gone's bytes are lost)" exits 1 audit alpha --repair
check "... kept is uploaded again" bash -c "grep -q \"^object-missing.kept.*uploaded again\" '$TL_DIR/audit.out'"
check "... gone is said lost" bash -c "grep -q \"^object-missing.gone.*bytes are lost\" '$TL_DIR/audit.out'"
check "... kept's object is back in the store" obj_exists "$K_KEPT"
check "... and kept, released, reads back" bash -c "'$TIERCTL' release '$V/kept' && cmp '$V/kept' '$TL_DIR/kept.orig'"
for _ in $(seq 50); do grep -c "catalog: snapshot written" "$TL_TIERD_LOG" >"$TL_DIR/snaps"; audit alpha >/dev/null; grep -q "^catalog-only" "$TL_DIR/audit.out" || break; sleep 0.2; done
check "audit again: the catalog, snapshotted from the disk, has no entry without a file" bash -c "! grep -q '^catalog-only' '$TL_DIR/audit.out'"
check "... gone is still missing (nothing can bring it back)" finding object-missing gone

# A third tenant whose store is alpha's, its URL spelled otherwise: gc of
# alpha would take gamma's objects for garbage, and is refused.
tl_subvol btrfs "$FS/gamma"
sed "s|\]}\$|, {\"name\": \"gamma\", \"subvolume\": \"$FS/gamma\", \"mount\": \"$TL_DIR/vgamma\", \"backend\": \"$BACKEND/\"$EXTRA}]}|" \
	"$TL_DIR/policy.json" >"$TL_DIR/policy3.json"
restart_with() { tl_tierd_stop && tl_tierd_start "$1"; }
check "tierd with a tenant gamma sharing alpha's store ($BACKEND/)" restart_with "$TL_DIR/policy3.json"
check "gc of alpha: refused (exit 1)" exits 1 "$TIERCTL" gc alpha
check "... saying why" bash -c "'$TIERCTL' gc alpha 2>&1 | grep -q 'same store'"

# A tenant on ext4 whose admin mounted only a directory of the filesystem (a
# bind mount): a stub outside that directory (a sparse file with the
# tenant's record, as a root restore from a backup makes one) names an
# object of the tenant's store; gc walks the whole filesystem and keeps it.
E=$TL_DIR/ext4 EF=$TL_DIR/efs DV=$TL_DIR/vdelta
tl_loopfs ext4 300M "$E" && mkdir -p "$E/data/delta" "$E/outside" "$EF" && mount --bind "$E/data" "$EF" &&
	TL_MOUNTS+=("$EF") || not_ok "an ext4 with a bind mount of its directory data"
cat >"$TL_DIR/policy4.json" <<EOF
{"tenants": [{"name": "delta", "subvolume": "$EF/delta", "mount": "$DV", "backend": "file://$TL_DIR/store/delta",
   "catalog": true, "catalog_key": "$TL_CATALOG_KEY", "gc_grace": "2s", "catalog_retention": "2s"}]}
EOF
check "tierd with tenant delta on ext4, mounted through a bind mount of a directory" restart_with "$TL_DIR/policy4.json"
head -c 80000 /dev/urandom >"$DV/f" && head -c 90000 /dev/urandom >"$DV/g"
check "f and g archived, f released" bash -c "'$TIERCTL' archive '$DV/f' '$DV/g' && '$TIERCTL' release '$DV/f'"
K_OUT=$(key_of "$EF/delta/f") K_G=$(key_of "$EF/delta/g")
truncate -s 80000 "$E/outside/f"
check "a stub of f made outside the mounted directory" \
	setfattr -n security.tierd -v "0x$(getfattr -n security.tierd --only-values "$EF/delta/f" | od -An -tx1 -v | tr -d ' \n')" "$E/outside/f"
rm "$DV/f" "$DV/g"
cp "$TL_DIR/policy4.json" "$TL_DIR/policy.json"
check "tierd restarted (f and g are out of the catalog)" restart
sleep 4.5
check "gc of delta" gc delta
check "... g's object, named by nothing, is gone" test ! -e "$TL_DIR/store/delta/$K_G"
check "... f's object, named by the stub outside the mounted directory, stays" test -e "$TL_DIR/store/delta/$K_OUT"
check "SIGTERM: tierd exits 0" tl_tierd_stop

# A stop during a collection (a test build pauses its walk on its thread
# 4 s): its caller is told at once, on the bus still up, and tierd exits
# without waiting for the walk, nor letting it read what the exit frees.
TIERD_TEST_GC_WALK_PAUSE_MS=4000 BUILD=$BUILD/testhooks tl_tierd_start "$TL_DIR/policy4.json" ||
	not_ok "tierd (a test build) starts"
tl_log_mark
# (Refused while the catalog writes its first snapshot after the start: again.)
for _ in $(seq 20); do
	timeout 60 "$TIERCTL" gc delta >"$TL_DIR/gcstop.out" 2>&1 &
	GCP=$!
	tl_logged 3 "the collection's walk pauses 4000 ms" && break
	wait "$GCP"
	sed 's/^/# refused: /' "$TL_DIR/gcstop.out"
done
check "gc of delta: its walk under way" tl_logged 1 "the collection's walk pauses 4000 ms"
kill -INT "$TL_TIERD_PID"
rc=0
wait "$GCP" || rc=$?
check "SIGINT: the gc call fails (exit $rc), saying tierd stops" \
	bash -c "[ $rc = 1 ] && grep -q 'stopped (canceled, or tierd stops)' '$TL_DIR/gcstop.out'"
sed 's/^/# gc said: /' "$TL_DIR/gcstop.out"
check "... tierd exits within 20 s" tl_tierd_exits 20
check "... with status 0 (got $TL_TIERD_STATUS)" test "$TL_TIERD_STATUS" = 0
check "... leaving the walk's thread to the exit" tl_logged 1 "background threads still at work: exiting without them"
btrfs -q subvolume delete "$FS/alpha-snap" >/dev/null 2>&1
tl_summary
