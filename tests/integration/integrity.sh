#!/bin/bash
# Integrity of ranged restores: every chunk written is checked against the
# file's chunk manifest first. A corrupted byte in the stored object gives
# EIO for reads of its chunk only; a corrupted manifest, EIO for every read;
# an object swapped for another of the same length, EIO. Repaired, it reads.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
echo "# integrity: chunk manifests (btrfs, file:// store)"
TIERCTL=$BUILD/tierctl
PREAD=$BUILD/tests/pread-at
FS=$TL_DIR/fs V=$TL_DIR/views/alpha STORE=$TL_DIR/store ORIG=$TL_DIR/orig
mkdir -p "$STORE" "$ORIG"
tl_loopfs btrfs 1G "$FS" || { not_ok "mkfs"; tl_summary; exit 1; }
tl_subvol btrfs "$FS/alpha"
cat >"$TL_DIR/policy.json" <<EOF2
{"tenants": [{"name": "alpha", "subvolume": "$FS/alpha", "mount": "$V", "backend": "file://$STORE",
  "chunk": "1M", "readahead": 0, "small_file": 0}]}
EOF2
tl_dbus_start || { not_ok "dbus-daemon"; tl_summary; exit 1; }
check "tierd starts" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }

head -c $((8 << 20)) /dev/urandom >"$ORIG/a"
head -c $((8 << 20)) /dev/urandom >"$ORIG/b"
head -c $((3 << 19)) /dev/urandom >"$ORIG/small" # 1.5 MiB: two chunks, the last short
for f in a b small; do cp "$ORIG/$f" "$V/$f"; done
check "archive three files" "$TIERCTL" archive "$V/a" "$V/b" "$V/small"
stub() { getfattr -n security.tierd --only-values "$1"; }
root_of() { stub "$1" | sed -n 's/^manifest=//p'; }
obj_of() { echo "$STORE/$(stub "$1" | sed -n 's/^key=//p')"; }
check "each stub records its manifest's root" bash -c "[ -n '$(root_of "$V/a")' ] && [ -n '$(root_of "$V/small")' ]"
check "... and the manifest is in the store" test -s "$STORE/manifest/$(root_of "$V/a")"
OBJ=$(obj_of "$V/a") MAN=$STORE/manifest/$(root_of "$V/a")
cp "$OBJ" "$TL_DIR/obj.good"
cp "$MAN" "$TL_DIR/man.good"
release() { "$TIERCTL" release "$@" >/dev/null; }
# A hang ends as timeout's 124 and no bytes: the comparison fails.
read4k() { timeout 60 dd if="$1" bs=4096 skip=$(($2 / 4096)) count=1 status=none 2>/dev/null; }
same4k() { cmp -s <(read4k "$1" "$3") <(read4k "$2" "$3"); }
# eio_at FILE OFFSET: a 4 KiB pread at OFFSET fails with EIO (pread-at exits
# 1 and prints it; a hang ends as timeout's 124) within 30 s, no byte read.
eio_at() {
	local t0 rc ms
	t0=$(date +%s%N)
	timeout 120 "$PREAD" "$1" "$2" 4096 >"$TL_DIR/got" 2>"$TL_DIR/got.err"
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ $rc = 1 ] && grep -q "Input/output error" "$TL_DIR/got.err" && [ ! -s "$TL_DIR/got" ] && [ $ms -le 30000 ] && return 0
	echo "# pread $1 at $2: rc $rc after $ms ms, $(wc -c <"$TL_DIR/got") bytes: $(cat "$TL_DIR/got.err")"
	return 1
}
# cat_eio FILE ORIGINAL: cat of the whole file fails with EIO (exit 1, not
# a hang) within 30 s, and what it gave before the error is the original's
# first bytes, never a corrupted one.
cat_eio() {
	local t0 rc ms n
	t0=$(date +%s%N)
	timeout 120 cat "$1" >"$TL_DIR/got" 2>"$TL_DIR/got.err"
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	n=$(stat -c %s "$TL_DIR/got")
	[ $rc = 1 ] && grep -q "Input/output error" "$TL_DIR/got.err" && [ $ms -le 30000 ] &&
		[ "$n" -lt "$(stat -c %s "$2")" ] && cmp -s -n "$n" "$TL_DIR/got" "$2" && return 0
	echo "# cat $1: rc $rc after $ms ms, $n bytes ($(cmp -s -n "$n" "$TL_DIR/got" "$2" && echo right || echo wrong)): $(cat "$TL_DIR/got.err")"
	return 1
}
# differs_at GOOD FILE OFFSET: FILE differs from GOOD in the byte at OFFSET
# and nowhere else (the corruption happened, and only it).
differs_at() {
	local d; d=$(cmp -l "$1" "$2" | awk '{ print $1 - 1 }' | tr '\n' ' ')
	[ "$d" = "$3 " ] || { echo "# $2 differs from $1 at: '$d'"; return 1; }
}

release "$V/a"
check "a 4 KiB read in the middle reads right (verified)" same4k "$V/a" "$ORIG/a" $((5 << 20))
check "... and only its chunk came back" test "$("$BUILD/tests/data-bytes" "$V/a")" -le $((1 << 20))

# One byte of the stored object corrupted, in chunk 6.
release "$V/a"
AT=$(( (6 << 20) + RANDOM * 16 ))
tl_flip_byte "$OBJ" $AT
check "the stored object is corrupted: one byte differs (at $AT)" differs_at "$TL_DIR/obj.good" "$OBJ" $AT
check "a read of the corrupted chunk gets EIO" eio_at "$V/a" $((AT / 4096 * 4096))
check "... a read of another chunk of the file reads right" same4k "$V/a" "$ORIG/a" $((2 << 20))
check "... nothing of the bad chunk was written" test "$("$BUILD/tests/data-bytes" "$V/a")" -le $((1 << 20))
check "... the log names the object and the chunk" grep -q "chunk 6 .*does not match its manifest" "$TL_DIR/tierd.log"
cp "$TL_DIR/obj.good" "$OBJ"
check "repaired: the same read succeeds, right" same4k "$V/a" "$ORIG/a" $AT

# The worker keeps verified manifest parts: a manifest corrupted after
# them does not matter to it...
release "$V/a"
tl_flip_byte "$MAN" 100
check "the stored manifest is corrupted: one byte differs (at 100)" differs_at "$TL_DIR/man.good" "$MAN" 100
check "verified manifest parts are cached: a corrupted manifest behind them is not read again" \
	same4k "$V/a" "$ORIG/a" $((3 << 20))
# ... but a new worker (cold cache) sees it: every read fails, nothing written.
W=$(pgrep -P "$TL_TIERD_PID" tierd-worker)
kill -KILL $W
for _ in $(seq 50); do N=$(pgrep -P "$TL_TIERD_PID" tierd-worker); [ -n "$N" ] && [ "$N" != "$W" ] && break; sleep 0.1; done
release "$V/a"
check "a corrupted manifest: reads get EIO" eio_at "$V/a" 0
check "... nothing written" test "$("$BUILD/tests/data-bytes" "$V/a")" = 0
cp "$TL_DIR/man.good" "$MAN"

# An object swapped for another of the same length.
release "$V/a" "$V/b"
cp "$OBJ" "$TL_DIR/a.obj"
cp "$(obj_of "$V/b")" "$OBJ"
check "the object swapped: a's object now differs from its good copy, same length" \
	bash -c "cmp -s '$TL_DIR/obj.good' '$OBJ'; [ \$? = 1 ] && [ \$(stat -c %s '$OBJ') = \$(stat -c %s '$TL_DIR/obj.good') ]"
check "an object swapped for another of the same length: EIO" eio_at "$V/a" $((256 * 4096))
cp "$TL_DIR/a.obj" "$OBJ"
check "... put back: every byte right" cmp "$V/a" "$ORIG/a"
# Every chunk of a was checked against its manifest on its way in: the
# complete file is recorded whole without a second pass over its bytes
# (a whole-file SHA-256 logs "SHA-256 checked" instead).
KEY_A=$(stub "$V/a" | sed -n 's/^key=//p')
archived_by_chunks() { # FILE KEY
	stub "$1" | grep -qx state=archived &&
		grep -q "$2 restored whole ([0-9]* bytes, every chunk checked against its manifest)" "$TL_DIR/tierd.log"
}
check "... its chunks all checked on their way in, it is recorded whole without hashing it again" \
	tl_eventually archived_by_chunks "$V/a" "$KEY_A"
check "... and it was not hashed whole" bash -c "! grep -q '$KEY_A restored whole ([0-9]* bytes, SHA-256 checked)' '$TL_DIR/tierd.log'"
# A partial record says "checked=1" while every range it holds was
# checked on its way in. A range filled while "verify" was off drops it:
# once complete, the file is hashed whole, whatever "verify" says by then.
head -c $((8 << 20)) /dev/urandom >"$ORIG/c"
cp "$ORIG/c" "$V/c"
"$TIERCTL" archive "$V/c" >/dev/null
KEY_C=$(stub "$V/c" | sed -n 's/^key=//p')
release "$V/c"
record_has() { stub "$1" | grep -qx state=partial && stub "$1" | grep -qx "$2"; }
check "a checked range read" \
	bash -c "cmp -s <(timeout 60 dd if='$V/c' bs=4096 count=1 status=none) <(head -c 4096 '$ORIG/c')"
check "... checked=1 in the record" tl_eventually bash -c "$(declare -f stub record_has); record_has '$V/c' checked=1"
"$TIERCTL" tenant set alpha verify=false >/dev/null
check "verify off: a 4 KiB read of another chunk reads right" same4k "$V/c" "$ORIG/c" $((2 << 20))
unchecked_recorded() { stub "$V/c" | grep -q '^ranges=0+1048576,2097152+1048576$' && ! stub "$V/c" | grep -qx checked=1; }
check "... recorded, and the record no longer says checked=1" tl_eventually unchecked_recorded
"$TIERCTL" tenant set alpha verify=true >/dev/null
check "verify on again: the rest of it reads right" timeout 60 cmp "$V/c" "$ORIG/c"
hashed_whole() { stub "$1" | grep -qx state=archived && grep -q "$2 restored whole ([0-9]* bytes, SHA-256 checked)" "$TL_DIR/tierd.log"; }
check "... and the complete file was hashed whole before it was recorded whole" tl_eventually hashed_whole "$V/c" "$KEY_C"
# A partial record without "checked=1", as a tierd before it wrote them:
# hashed whole once complete, not trusted.
release "$V/a"
read4k "$V/a" 0 >/dev/null
tl_eventually bash -c "$(declare -f stub record_has); record_has '$V/a' checked=1"
setfattr -n security.tierd -v "$(stub "$V/a" | grep -vx 'checked=1')
" "$V/a"
check "an older partial record (no checked=1): the rest reads right" \
	bash -c "! getfattr -n security.tierd --only-values '$V/a' | grep -q checked && timeout 60 cmp '$V/a' '$ORIG/a'"
check "... and it was hashed whole" tl_eventually hashed_whole "$V/a" "$KEY_A"
release "$V/small"
check "a file whose last chunk is short reads right" cmp "$V/small" "$ORIG/small"
# A file archived before manifests (its stub without one, as older tierds
# wrote it): restored whole; --rehash adds the manifest.
cp "$ORIG/b" "$V/old"
"$TIERCTL" archive "$V/old" >/dev/null
setfattr -n security.tierd -v "$(stub "$V/old" | grep -v '^manifest=')
" "$V/old"
release "$V/old"
check "a file archived without a manifest restores whole at a 4 KiB read" \
	bash -c "same4k() { cmp -s <(dd if=\$1 bs=4096 skip=\$((\$3 / 4096)) count=1 status=none) <(dd if=\$2 bs=4096 skip=\$((\$3 / 4096)) count=1 status=none); }
	same4k '$V/old' '$ORIG/b' $((4 << 20)) && [ \$('$BUILD/tests/data-bytes' '$V/old') = $((8 << 20)) ]"
release "$V/old"
check "tierctl archive --rehash adds its manifest" bash -c "'$TIERCTL' archive --rehash '$V/old' && getfattr -n security.tierd --only-values '$V/old' | grep -q '^manifest='"
release "$V/old"
check "... then a 4 KiB read brings back its chunk only, right" \
	bash -c "cmp -s <(dd if='$V/old' bs=4096 skip=1024 count=1 status=none) <(dd if='$ORIG/b' bs=4096 skip=1024 count=1 status=none) &&
	[ \$('$BUILD/tests/data-bytes' '$V/old') -le $((1 << 20)) ]"
# A partial file without a manifest (partly restored before manifests):
# the rest comes in ranged pieces no manifest checks, recorded only once the
# whole file passes its SHA-256; a bad object leaves nothing behind.
partial_no_manifest() { # FILE: released, one chunk read, manifest line dropped
	release "$1"
	read4k "$1" 0 >/dev/null
	# The range is recorded once durable, a moment after the read: the
	# stub is rewritten after that, or tierd's record would overwrite it.
	tl_eventually bash -c "getfattr -n security.tierd --only-values '$1' 2>/dev/null | grep -qx state=partial"
	setfattr -n security.tierd -v "$(stub "$1" | grep -v '^manifest=')
" "$1"
}
partial_no_manifest "$V/a"
check "a partial file without a manifest: state partial, one chunk local" \
	bash -c "getfattr -n security.tierd --only-values '$V/a' | grep -qx state=partial"
check "... a read of another chunk completes it, verified whole, every byte right" \
	bash -c "cmp '$V/a' '$ORIG/a' && getfattr -n security.tierd --only-values '$V/a' | grep -qx state=archived"
"$TIERCTL" archive --rehash "$V/a" >/dev/null
partial_no_manifest "$V/a"
tl_flip_byte "$OBJ" $(((7 << 20) + 5))
check "... the object corrupted: one byte differs (at $(((7 << 20) + 5)))" differs_at "$TL_DIR/obj.good" "$OBJ" $(((7 << 20) + 5))
check "... with a corrupted object: cat gets EIO, never its bytes" cat_eio "$V/a" "$ORIG/a"
check "... and the file is released again, nothing of it kept" \
	bash -c "getfattr -n security.tierd --only-values '$V/a' | grep -qx state=released && [ \$('$BUILD/tests/data-bytes' '$V/a') = 0 ]"
cp "$TL_DIR/obj.good" "$OBJ"
# The manifest lost from the store: the file restores whole (its hash
# checks it), the stub forgets the manifest; --rehash stores it again.
release "$V/b"
rm -f "$STORE/manifest/$(root_of "$V/b")"
W=$(pgrep -P "$TL_TIERD_PID" tierd-worker); kill -KILL $W # its cache holds none of b's, but be sure
for _ in $(seq 50); do N=$(pgrep -P "$TL_TIERD_PID" tierd-worker); [ -n "$N" ] && [ "$N" != "$W" ] && break; sleep 0.1; done
check "a manifest lost from the store: a 4 KiB read still reads right" same4k "$V/b" "$ORIG/b" $((6 << 20))
check "... the file came back whole, checked by its hash" \
	bash -c "cmp '$V/b' '$ORIG/b' && getfattr -n security.tierd --only-values '$V/b' | grep -qx state=archived"
check "... the stub forgot the manifest" test -z "$(root_of "$V/b")"
check "... and the log says so" grep -q 'not in the store: the file restores whole' "$TL_DIR/tierd.log"
check "tierctl archive --rehash stores a new one" "$TIERCTL" archive --rehash "$V/b"
R=$(root_of "$V/b")
check "... the stub names it, and it is in the store" test -n "$R" -a -f "$STORE/manifest/$R"
check "SIGTERM: tierd exits 0" tl_tierd_stop
tl_summary
