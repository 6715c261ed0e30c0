#!/bin/bash
# tierctl on trees: find and du read every file's state from its record
# (no file opened: a FIFO in the tree does not hold them, tierd is not
# asked), as any user; the file verbs take -r (a directory's regular
# files, no symbolic link followed, one filesystem), --files-from FILE and
# -0, and refuse an unknown option with exit 2 before doing anything.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
TIERCTL=$BUILD/tierctl
PREAD=$BUILD/tests/pread-at
V=$TL_DIR/views/alpha

tl_loopfs btrfs 1G "$TL_DIR/fs" || { not_ok "mkfs"; tl_summary; exit 1; }
tl_subvol btrfs "$TL_DIR/fs/alpha"
mkdir -p "$TL_DIR/store" "$TL_DIR/outside"
cat >"$TL_DIR/policy.json" <<EOF
{"tenants": [{"name": "alpha", "subvolume": "$TL_DIR/fs/alpha", "mount": "$V", "backend": "file://$TL_DIR/store"}]}
EOF
tl_dbus_start
check "tierd starts" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }

# d/new: never archived; d/kept: archived; d/sub/gone: released;
# d/sub/half: released, then 4 KiB of its middle read; d/changed: archived, then
# written; d/sub/pinned: archived and pinned; a FIFO and a link out.
mkdir -p "$V/d/sub"
head -c 64K /dev/urandom >"$V/d/new"
for f in kept changed sub/gone sub/pinned; do head -c 2M /dev/urandom >"$V/d/$f"; done
head -c 8M /dev/urandom >"$V/d/sub/big"
head -c 16M /dev/urandom >"$V/d/sub/half"
"$TIERCTL" archive "$V/d/kept" "$V/d/changed" "$V/d/sub/gone" "$V/d/sub/half" "$V/d/sub/pinned" "$V/d/sub/big" >/dev/null
"$TIERCTL" pin "$V/d/sub/pinned" >/dev/null
"$TIERCTL" release "$V/d/sub/gone" "$V/d/sub/half" "$V/d/sub/big" >/dev/null
"$PREAD" "$V/d/sub/half" $((8 << 20)) 4096 >/dev/null
echo more >>"$V/d/changed"
mkfifo "$V/d/sub/fifo"
echo secret >"$TL_DIR/outside/f"
ln -s "$TL_DIR/outside" "$V/d/link"

found() { # ARGS...: tierctl find's paths, relative to the view, sorted, on one line
	timeout 20 "$TIERCTL" find "$@" | sed "s|^$V/||" | sort | tr '\n' ' '
}
found_is() { test "$(found "${@:2}")" = "$1"; } # EXPECTED ARGS...
# The read range of d/sub/half is recorded once durable, a moment after the read.
check "find --state released: the released files (the FIFO is not opened)" \
	tl_eventually found_is "d/sub/big d/sub/gone " "$V/d" --state released
check "find --state partial,dirty" found_is "d/changed d/sub/half " "$V/d" --state partial,dirty
check "find --state resident: never archived" test "$(found "$V/d" --state resident)" = "d/new "
check "find --larger 4M" test "$(found "$V/d" --larger 4M)" = "d/sub/big d/sub/half "
check "find --smaller 1M" test "$(found "$V/d" --smaller 1M)" = "d/new "
check "find --pinned" test "$(found "$V/d" --pinned)" = "d/sub/pinned "
touch -d '40 days ago' "$V/d/new" # (on an archived file, tierd would take it for a change)
check "find --older 30d (mtime)" test "$(found "$V/d" --older 30d)" = "d/new "
check "find --newer 1d: the rest" test "$(found "$V/d" --newer 1d | wc -w)" = 6
check "find does not follow the link out" bash -c "! timeout 20 '$TIERCTL' find '$V/d' | grep -q outside"
check "find --json: one object a line, with state, size and local bytes" bash -c "
	timeout 20 '$TIERCTL' find '$V/d/sub/gone' --json | python3 -c '
import json, sys
o = json.loads(sys.stdin.readline())
sys.exit(not (o[\"state\"] == \"released\" and o[\"size\"] == 2097152 and o[\"local\"] == 0 and o[\"pinned\"] is False))'"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
chmod -R a+rX "$TL_DIR/views" "$V/d"
check "find runs as any user who may list the tree (uid 65534)" \
	test "$(as_nobody timeout 20 "$TIERCTL" find "$V/d" --state released | wc -l)" = 2
# A directory it may not list: said, left out, the rest counted, exit 1.
mkdir -m 0700 "$V/d/private" && echo x >"$V/d/private/f"
rc=0
as_nobody timeout 20 "$TIERCTL" du "$V/d" --json >"$TL_DIR/du.out" 2>"$TL_DIR/du.err" || rc=$?
check "du as uid 65534 with a directory it may not list: exit 1, naming it, the rest counted (exit $rc)" \
	bash -c "[ $rc = 1 ] && grep -q 'd/private: Permission denied (left out)' '$TL_DIR/du.err' &&
		python3 -c 'import json,sys; sys.exit(json.load(open(\"$TL_DIR/du.out\"))[\"total\"][\"files\"] != 7)'"
rm -rf "$V/d/private"
rc=0
timeout 20 "$TIERCTL" find "$V/d" --state nonsense 2>"$TL_DIR/err" >/dev/null || rc=$?
check "find --state nonsense: exit 2, naming the states (exit $rc)" bash -c "[ $rc = 2 ] && grep -q 'released' '$TL_DIR/err'"

du_json() { timeout 20 "$TIERCTL" du "$V/d" --json; }
du_ok() {
	du_json | python3 -c '
import json, sys
o = json.load(sys.stdin)
s = o["states"]
want = {"resident": 1, "archived": 2, "partial": 1, "released": 2, "dirty": 1}
got = {k: s[k]["files"] for k in want}
ok = got == want and o["total"]["files"] == 7 and s["released"]["local_bytes"] == 0 \
	and s["released"]["bytes"] == (2 << 20) + (8 << 20) and 0 < s["partial"]["local_bytes"] < (16 << 20)
print("# du:", got, "total", o["total"]) if not ok else None
sys.exit(not ok)'
}
check "du --json: files, bytes and local bytes by state" du_ok
check "du as a table" bash -c "timeout 20 '$TIERCTL' du '$V/d' | grep -Eq '^  released +2 +10M +0B$'"

# -r, --files-from, -0.
"$TIERCTL" restore "$V/d/sub/gone" >/dev/null
check "release -r DIR: its archived files (the FIFO, the link and the pinned one left)" \
	bash -c "timeout 60 '$TIERCTL' release -r '$V/d/sub' >'$TL_DIR/r.out' 2>&1; \
		[ \"\$(cd '$V' && '$TIERCTL' find d/sub --state released | sort | tr '\n' ' ')\" = 'd/sub/big d/sub/gone d/sub/half ' ]"
check "... and the files above it untouched" test "$(found "$V/d" --state archived)" = "d/kept d/sub/pinned "
check "status -r DIR: every file beneath it" test "$(timeout 20 "$TIERCTL" status -r "$V/d/sub" | grep -c '/d/sub/')" = 4
timeout 20 "$TIERCTL" find "$V/d" --state released -0 >"$TL_DIR/list0"
check "find -0 | restore --files-from - -0: each restored" bash -c "
	timeout 60 '$TIERCTL' restore --files-from - -0 <'$TL_DIR/list0' >/dev/null &&
	[ -z \"\$('$TIERCTL' find '$V/d' --state released,partial)\" ]"
printf '%s\n' "$V/d/sub/big" >"$TL_DIR/list"
check "release --files-from FILE (one path a line)" bash -c "
	timeout 60 '$TIERCTL' release --files-from '$TL_DIR/list' >/dev/null && [ \"\$(cd '$V' && '$TIERCTL' find d --state released)\" = d/sub/big ]"
rc=0
"$TIERCTL" release --bogus "$V/d/kept" 2>"$TL_DIR/err" || rc=$?
check "an unknown option: exit 2, said, nothing done (exit $rc)" \
	bash -c "[ $rc = 2 ] && grep -q \"unknown option '--bogus'\" '$TL_DIR/err' &&
		[ \"\$('$TIERCTL' find '$V/d/kept' --state archived)\" = '$V/d/kept' ]"
rc=0
"$TIERCTL" release -xr "$V/d/kept" 2>"$TL_DIR/err" || rc=$?
check "... a short one named as it was given (exit $rc: $(cat "$TL_DIR/err"))" \
	bash -c "[ $rc = 2 ] && grep -q \"unknown option '-x'\" '$TL_DIR/err'"
rc=0
"$TIERCTL" du --state released "$V/d" 2>"$TL_DIR/err" >/dev/null || rc=$?
check "du takes no find option (exit $rc: $(cat "$TL_DIR/err"))" bash -c "[ $rc = 2 ] && grep -q \"'--state'\" '$TL_DIR/err'"
check "a file named like an option, after --" bash -c "cp '$V/d/new' '$V/d/-r' && cd '$V/d' && timeout 60 '$TIERCTL' archive -- -r >/dev/null &&
	[ \"\$('$TIERCTL' find '$V/d/-r' --state archived)\" = '$V/d/-r' ]"
# The other verbs' options: getopt_long too, exit 2 and said for a wrong one.
rc=0
timeout 20 "$TIERCTL" gc --bogus alpha 2>"$TL_DIR/err" || rc=$?
check "gc --bogus: exit 2, said (exit $rc: $(cat "$TL_DIR/err"))" bash -c "[ $rc = 2 ] && grep -q \"unknown option '--bogus'\" '$TL_DIR/err'"
rc=0
timeout 20 "$TIERCTL" gc alpha --dry-run=1 2>"$TL_DIR/err" || rc=$?
check "gc --dry-run=1: exit 2, the option named as given (exit $rc: $(tr -d '\0' <"$TL_DIR/err"))" \
	bash -c "[ $rc = 2 ] && grep -q \"option '--dry-run=1' takes no value\" '$TL_DIR/err'"
rc=0
timeout 20 "$TIERCTL" audit alpha beta 2>"$TL_DIR/err" || rc=$?
check "audit with two tenants: exit 2, its usage (exit $rc)" bash -c "[ $rc = 2 ] && grep -q 'usage: tierctl audit TENANT' '$TL_DIR/err'"
rc=0
timeout 20 "$TIERCTL" tenant import alpha --from 2>"$TL_DIR/err" || rc=$?
check "tenant import --from without its value: exit 2, said (exit $rc)" \
	bash -c "[ $rc = 2 ] && grep -q \"value is missing for the option '--from'\" '$TL_DIR/err'"
check "jobs --json: a JSON array (no job left running)" \
	bash -c "timeout 20 '$TIERCTL' jobs --json | python3 -c 'import json, sys; assert json.load(sys.stdin) == []'"
check "SIGTERM: tierd exits 0" tl_tierd_stop
tl_summary
