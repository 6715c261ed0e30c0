#!/bin/bash
# A store that misbehaves (tests/lib/faultserver.py, the one fake: it does
# what no real server can be made to do): 500 and 503 (retried, then EIO),
# connection refused, reset mid-body, short body, body longer than asked,
# wrong Content-Range, wrong bytes, a stall, a 10 GiB answer to a small
# request. Each time the reader gets EIO within a bound (never zeros, never
# a hang), nothing of the bad answer is kept, and the next read with the
# store healthy again returns the right bytes. And an upload never replaces
# or removes an object another file depends on (it moves a checked copy
# into place with WebDAV MOVE).
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
TIERCTL=$BUILD/tierctl
PREAD=$BUILD/tests/pread-at
PORT=${FAULT_PORT:-18090}
CONTROL=$TL_DIR/fault FLOG=$TL_DIR/fault.log

tl_loopfs btrfs 1G "$TL_DIR/fs" || { not_ok "mkfs"; tl_summary; exit 1; }
tl_subvol btrfs "$TL_DIR/fs/web"
# XFS too: only there (and on ext4) can tierd put an ignore mark on a
# file's changes (btrfs subvolumes refuse inode marks of a FID group).
tl_loopfs xfs 512M "$TL_DIR/xfs" || { not_ok "mkfs xfs"; tl_summary; exit 1; }
mkdir -p "$TL_DIR/xfs/x"
mkdir -p "$TL_DIR/store" "$TL_DIR/etc"
echo none >"$CONTROL"
server_start() {
	python3 "$TL_ROOT/tests/lib/faultserver.py" "$PORT" "$TL_DIR/store" "$CONTROL" "$FLOG" >"$TL_DIR/server.out" 2>&1 &
	SERVER=$!
	TL_PIDS+=("$SERVER")
	for _ in $(seq 50); do grep -q ready "$TL_DIR/server.out" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}
check "the fault-injecting store starts" server_start || { tl_summary; exit 1; }
cat >"$TL_DIR/etc/policy.json" <<EOF2
{"tenants": [{"name": "web", "subvolume": "$TL_DIR/fs/web", "mount": "$TL_DIR/view",
  "backend": "http://127.0.0.1:$PORT/t", "connect_timeout": "2s", "stall_timeout": "3s", "chunk": "256K"},
 {"name": "x", "subvolume": "$TL_DIR/xfs/x", "mount": "$TL_DIR/xview", "backend": "http://127.0.0.1:$PORT/x"}]}
EOF2
tl_dbus_start
check "tierd starts" tl_tierd_start "$TL_DIR/etc/policy.json" || { tl_summary; exit 1; }
V=$TL_DIR/view
head -c $((4 << 20)) /dev/urandom >"$TL_DIR/orig"
cp "$TL_DIR/orig" "$V/f"
check "archive and release a 4 MiB file to the store" bash -c "$TIERCTL archive $V/f >/dev/null && $TIERCTL release $V/f >/dev/null"

OFF=$((2 << 20))
want() { dd if="$TL_DIR/orig" bs=4096 skip=$((OFF / 4096)) count=1 status=none | sha256sum | cut -d' ' -f1; }
WANT=$(want)
read_sum() { "$PREAD" "$V/f" "$OFF" 4096 2>"$TL_DIR/pread.err" | sha256sum | cut -d' ' -f1; }
state_of() { timeout 30 "$TIERCTL" status --json "${1:-$V/f}" | sed -n 's/.*"state":"\([a-z]*\)".*/\1/p'; }

# fault MODE LIMIT: with MODE on every GET, a read fails with EIO within
# LIMIT seconds and keeps nothing; then, healthy again, it reads right.
fault() {
	local mode=$1 limit=$2 t0 t1 rc
	echo "$mode" >"$CONTROL"
	t0=$(date +%s.%N)
	timeout 120 "$PREAD" "$V/f" "$OFF" 4096 >/dev/null 2>"$TL_DIR/pread.err"
	rc=$?
	t1=$(date +%s.%N)
	local took; took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	check "$mode: the reader gets EIO (after $took s, bound $limit s)" bash -c "
		[ $rc = 1 ] && grep -q 'Input/output error' '$TL_DIR/pread.err' && awk 'BEGIN { exit !($took <= $limit) }' &&
		grep -q '^$mode ' '$FLOG'"
	check "$mode: ... nothing of the bad answer kept (the file is still released, no block)" bash -c "
		[ \"\$($TIERCTL status --json $V/f | sed -n 's/.*\"state\":\"\([a-z]*\)\".*/\1/p')\" = released ] && [ \$($BUILD/tests/data-bytes $V/f) = 0 ]"
	echo none >"$CONTROL"
	check "$mode: ... the store healthy again, the same read returns the right bytes" test "$(read_sum)" = "$WANT"
	"$TIERCTL" release "$V/f" >/dev/null
}

fault 500 30
fault 503 30
check "503 then 503 then right: the read succeeds (retried with backoff)" bash -c "
	echo '503 2' >'$CONTROL'; [ \"\$($PREAD $V/f $OFF 4096 | sha256sum | cut -d' ' -f1)\" = '$WANT' ] &&
	[ \$(grep -c '^503 ' '$FLOG') -ge 2 ]"
"$TIERCTL" release "$V/f" >/dev/null
fault reset 30
fault short 30
fault long 30
fault badrange 30
fault wrongbytes 30
check "wrongbytes: ... logged as a checksum mismatch" grep -qi "mismatch\|does not match\|EBADMSG\|Bad message" "$TL_TIERD_LOG"
fault stall 40
fault huge 30
check "huge: ... the 10 GiB answer was aborted early (at most 64 MiB went out)" bash -c "
	grep '^huge ' '$FLOG' | awk '{ if (\$4 > 64 * 1024 * 1024) bad = 1 } END { exit bad }'"

# Connection refused: the store is down.
kill "$SERVER"; wait "$SERVER" 2>/dev/null
t0=$(date +%s)
timeout 120 "$PREAD" "$V/f" "$OFF" 4096 >/dev/null 2>"$TL_DIR/pread.err"
rc=$?
check "refused: the reader gets EIO within 30 s ($(($(date +%s) - t0)) s)" bash -c "
	[ $rc = 1 ] && grep -q 'Input/output error' '$TL_DIR/pread.err' && [ $(($(date +%s) - t0)) -le 30 ]"
server_start
check "refused: ... the store back, the read returns the right bytes" test "$(read_sum)" = "$WANT"
check "the whole file reads back identical" cmp "$V/f" "$TL_DIR/orig"

# A release checks first that the archived copy can be read back.
head -c 300000 /dev/urandom >"$V/g"
cp "$V/g" "$TL_DIR/g.orig"
"$TIERCTL" archive "$V/g" >/dev/null
OBJ=$(find "$TL_DIR/store" -type f -size 300000c | head -n 1)
mv "$OBJ" "$TL_DIR/held"
check_fails "an archived file whose object is gone from the store is not released" "$TIERCTL" release "$V/g"
check "... saying why" bash -c "$TIERCTL release $V/g 2>&1 | grep -q 'is not in the store'"
check "... it stays local and whole" bash -c "cmp $V/g $TL_DIR/g.orig && [ \$($BUILD/tests/data-bytes $V/g) -ge 300000 ]"
head -c 1000 "$TL_DIR/held" >"$OBJ"
check_fails "an object of another size: not released either" "$TIERCTL" release "$V/g"
mv "$TL_DIR/held" "$OBJ"
check "the object back: released" "$TIERCTL" release "$V/g"
check "... and it reads back" cmp "$V/g" "$TL_DIR/g.orig"
# A range once given to a reader stays readable: a failed fill of another
# range (its chunk does not match the manifest) leaves the stub's record of
# the first as it is, and no later fill punches bytes before fetching them
# (a reader allowed into a range must never meet holes there).
head -c $((8 << 20)) /dev/urandom >"$TL_DIR/r.orig"
cp "$TL_DIR/r.orig" "$V/r"
timeout 120 "$TIERCTL" archive "$V/r" >/dev/null && timeout 60 "$TIERCTL" release "$V/r" >/dev/null
timeout 120 "$PREAD" "$V/r" 0 4096 >/dev/null
ranges_of_r() { getfattr -n security.tierd --only-values "$TL_DIR/fs/web/r" 2>/dev/null | sed -n 's/^ranges=//p'; }
# Recorded once durable, a moment after the reader got its bytes.
first_recorded() { [[ "$(ranges_of_r)" == 0+* ]]; }
tl_eventually first_recorded
R0=$(ranges_of_r)
check "r: a read of its first chunk fills it (ranges $R0)" bash -c "[[ '$R0' == 0+* ]]"
echo wrongbytes >"$CONTROL"
timeout 120 "$PREAD" "$V/r" $((4 << 20)) 4096 >/dev/null 2>"$TL_DIR/r.err"
rc=$?
echo none >"$CONTROL"
check "r: a read of another chunk whose bytes are wrong gets EIO (exit $rc)" bash -c "[ $rc = 1 ] && grep -q 'Input/output error' '$TL_DIR/r.err'"
check "... the first chunk is still recorded as present (ranges $(ranges_of_r))" test "$(ranges_of_r)" = "$R0"
has_data_at() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY|os.O_NONBLOCK); sys.exit(0 if os.lseek(fd, int(sys.argv[2]), os.SEEK_DATA) == int(sys.argv[2]) else 1)" "$@"; }
echo 'stall 1' >"$CONTROL"
timeout 120 "$PREAD" "$V/r" 8192 4096 >"$TL_DIR/r.read" 2>&1 &
READER=$!
sleep 1
check "... read again, its bytes stay on disk throughout (never punched to be fetched again)" has_data_at "$TL_DIR/fs/web/r" 8192
wait "$READER"
echo none >"$CONTROL"
check "... and the reader gets them" bash -c "cmp <(dd if=$TL_DIR/r.orig bs=4096 skip=2 count=1 status=none) $TL_DIR/r.read"

# An upload never replaces or removes an object another file depends on.
# a and b hold the same 64 MiB; a is archived and released (its bytes live
# only under their key). b's archive is told the key is missing (head404:
# a store that lost an answer) and uploads it again; the upload is held
# after its first MiB while a byte near b's end is flipped, so what is sent
# no longer hashes to the key (the server keeps its receive buffer small:
# the client cannot have read that far). That archive must fail and touch
# nothing.
head -c $((64 << 20)) /dev/urandom >"$TL_DIR/same"
cp "$TL_DIR/same" "$V/a"
timeout 120 "$TIERCTL" archive "$V/a" >/dev/null && timeout 60 "$TIERCTL" release "$V/a" >/dev/null
KEY_OBJ=$(find "$TL_DIR/store" -type f -size $((64 << 20))c | head -n 1)
check "a: archived and released, its object in the store" bash -c "[ -n '$KEY_OBJ' ] && [ \$($BUILD/tests/data-bytes $V/a) = 0 ]"
cp "$TL_DIR/same" "$V/b"
rm -f "$CONTROL.go"
SUM=$(sha256sum "$TL_DIR/same" | cut -d' ' -f1)
printf 'head404 1 /sha256/%s\nholdput 1\n' "$SUM" >"$CONTROL"
timeout 120 "$TIERCTL" archive "$V/b" >"$TL_DIR/b.out" 2>&1 &
ARCH=$!
for _ in $(seq 300); do grep -q '^put held' "$FLOG" && break; sleep 0.1; done
check "b: its archive found no object (head404) and is uploading it again" bash -c "
	grep -q '^head404 /t/sha256/$SUM' '$FLOG' && grep -q '^put held /t/sha256/$SUM' '$FLOG'"
tl_flip_byte "$V/b" $((63 << 20))
check "b: a byte flipped during the upload" bash -c "! cmp -s $V/b $TL_DIR/same"
touch "$CONTROL.go"
wait "$ARCH"
rc=$?
echo none >"$CONTROL"
check "b: the upload fails: what it sent did not hash to the key (the flip was in it)" bash -c "
	[ $rc != 0 ] && grep -q 'upload failed: the file changed during upload' '$TL_DIR/b.out'"
check "... the shared object is still there, with a's bytes" cmp "$KEY_OBJ" "$TL_DIR/same"
check "... a reads back identical (its object was neither replaced nor removed)" timeout 120 cmp "$V/a" "$TL_DIR/same"
check "... no upload of b's is left in the store" bash -c "[ -z \"\$(find $TL_DIR/store -name '*tierd-upload*')\" ]"
cp "$V/b" "$TL_DIR/b.new"
check "b archived again (its new bytes) through a move into place (MOVE in the log)" bash -c "
	timeout 120 $TIERCTL archive $V/b >/dev/null && timeout 120 $TIERCTL release $V/b >/dev/null && grep -q '^MOVE .* 201$' '$FLOG'"
check "... and it reads back identical" timeout 120 cmp "$V/b" "$TL_DIR/b.new"
XV=$TL_DIR/xview
# The ignore mark on changes is right after every interleaving (on XFS): a writer
# that closes (without writing) while the upload is held puts the mark
# back for a file not yet archived; the archive must take it off again, or
# a later write goes unheard and a release with mtime set back would punch
# the new bytes.
head -c $((3 << 20)) /dev/urandom >"$XV/d"
rm -f "$CONTROL.go"
echo 'holdput 1' >"$CONTROL"
timeout 120 "$TIERCTL" archive "$XV/d" >"$TL_DIR/d.out" 2>&1 &
ARCH=$!
for _ in $(seq 300); do grep -q '^put held' "$FLOG" && break; sleep 0.1; done
exec 3>>"$XV/d"
exec 3>&-
sleep 0.5 # its close event handled while the upload is held
touch "$CONTROL.go"
wait "$ARCH"
rc=$?
echo none >"$CONTROL"
st=$(state_of "$XV/d")
check "d: archived although a writer closed it during the upload (nothing changed)" bash -c "[ $rc = 0 ] && [ '$st' = archived ]"
touch -r "$XV/d" "$TL_DIR/d.times"
tl_flip_byte "$XV/d" 100
touch -r "$TL_DIR/d.times" "$XV/d"
cp "$XV/d" "$TL_DIR/d.new"
for _ in $(seq 50); do [ "$(state_of "$XV/d")" = dirty ] && break; sleep 0.1; done
check "d: a write after the archive is heard: the file is dirty at once" test "$(state_of "$XV/d")" = dirty
check "... a release (mtime set back) refuses, saying it changed" bash -c "
	! timeout 60 $TIERCTL release $XV/d 2>$TL_DIR/d.err && grep -q 'changed since it was archived' $TL_DIR/d.err"
check "... and the new bytes are there" cmp "$XV/d" "$TL_DIR/d.new"
# A reader's fill never waits for a thread behind uploads: background work
# (archives, the catalog's objects, gc) takes at most all of the worker's
# threads but one. Six archives against a store that holds every upload:
# three are held (four threads, less one), and a cold read is served while
# they still are. (The uploads would hold a thread for 30 s, the stall
# timeout; the read's bound is 20 s.)
head -c $((2 << 20)) /dev/urandom >"$XV/r"
cp "$XV/r" "$TL_DIR/r.orig"
timeout 60 "$TIERCTL" archive "$XV/r" >/dev/null && timeout 60 "$TIERCTL" release "$XV/r" >/dev/null
check "r: archived and released, for a cold read later" test "$(state_of "$XV/r")" = released
for i in 1 2 3 4 5 6; do head -c $((2 << 20)) /dev/urandom >"$XV/u$i"; done
HELD0=$(grep -c '^put held' "$FLOG") MOVED0=$(grep -c '^MOVE /x/sha256/' "$FLOG")
rm -f "$CONTROL.go"
echo holdput >"$CONTROL"
timeout 120 "$TIERCTL" archive "$XV"/u[1-6] >"$TL_DIR/u.out" 2>&1 &
ARCH=$!
for _ in $(seq 300); do [ "$(grep -c '^put held' "$FLOG")" -ge $((HELD0 + 3)) ] && break; sleep 0.1; done
sleep 1 # a fourth upload, were one allowed, would be held by now too
held=$(( $(grep -c '^put held' "$FLOG") - HELD0 ))
check "six archives, every upload held: three at once, a thread left (held: $held)" test "$held" = 3
check "... a cold read is served while they are held" timeout 20 cmp "$XV/r" "$TL_DIR/r.orig"
check "... (still held: no data object moved into place meanwhile)" test "$(grep -c '^MOVE /x/sha256/' "$FLOG")" = "$MOVED0"
touch "$CONTROL.go"
wait "$ARCH"
rc=$?
echo none >"$CONTROL"
states=$(for i in 1 2 3 4 5 6; do state_of "$XV/u$i"; done | tr '\n' ' ')
check "... then the six archives finish (exit $rc: $states)" \
	test "$rc $states" = "0 archived archived archived archived archived archived "
# upload_fault MODE FILE BYTES LOGGED WHAT: an archive of FILE (BYTES of
# random) while the store does MODE once to its upload, which LOG says
# with LOGGED: the upload is sent again, archived, and reads back.
upload_fault() {
	local mode=$1 f=$2 bytes=$3 logged=$4 what=$5 rc=0
	echo "$mode 1" >"$CONTROL"
	head -c "$bytes" /dev/urandom >"$V/$f"
	cp "$V/$f" "$TL_DIR/$f.orig"
	timeout 120 "$TIERCTL" archive "$V/$f" >/dev/null 2>"$TL_DIR/$f.err" || rc=$?
	echo none >"$CONTROL"
	check "$what: sent again, archived (exit $rc: $(head -c 300 "$TL_DIR/$f.err"))" \
		bash -c "[ $rc = 0 ] && grep -q '^$logged /t/' '$FLOG'"
	check "... and it releases and reads back" \
		bash -c "timeout 60 '$TIERCTL' release '$V/$f' >/dev/null && timeout 120 cmp '$V/$f' '$TL_DIR/$f.orig'"
}
# A kept-alive connection the store closed when the next request came: curl
# sends the upload again on a new connection, its body from the start (a
# seek callback), and the archive holds (its hash taken once).
upload_fault dropreused k 300000 "put dropped" "an upload on a reused connection the store closes"
# The same cut off mid-body (a proxy or a store that goes away while the
# body is on its way: broken pipe, or a reset): sent again from its start,
# its hash taken again from before its first byte.
upload_fault cutput m 600000 "put cut" "an upload cut off after 64 KiB of its body"
echo 'movelost 1' >"$CONTROL"
head -c 200000 /dev/urandom >"$V/e"
timeout 120 "$TIERCTL" archive "$V/e" >/dev/null 2>"$TL_DIR/e.err"
rc=$?
echo none >"$CONTROL"
check "a MOVE whose answer is lost (done, then the connection reset): the archive succeeds (exit $rc)" bash -c "
	[ $rc = 0 ] && grep -q '^MOVE .* 201 lost$' '$FLOG'"
check "... and the file releases and reads back" bash -c "
	cp $V/e $TL_DIR/e.orig && timeout 60 $TIERCTL release $V/e >/dev/null && timeout 120 cmp $V/e $TL_DIR/e.orig"
echo nomove >"$CONTROL"
head -c 100000 /dev/urandom >"$V/c"
check "a store without MOVE: the archive fails, saying why" bash -c "
	! timeout 120 $TIERCTL archive $V/c 2>$TL_DIR/c.err && grep -q 'WebDAV MOVE' $TL_DIR/c.err"
echo none >"$CONTROL"
check "... and the log says the store needs WebDAV MOVE" grep -q "does not support WebDAV MOVE" "$TL_TIERD_LOG"
check "... nothing of it is left in the store" bash -c "[ -z \"\$(find $TL_DIR/store -name '*tierd-upload*')\" ]"
check "tierd stops cleanly" tl_tierd_stop
tl_summary
