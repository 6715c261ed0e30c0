#!/bin/bash
# make demo: the main job on the embedded default. A loop btrfs with one
# tenant, a file:// store, a private dbus-daemon and a real tierd; archive,
# release and read back, saying what happens at each step.
set -eu
source "$(dirname "$0")/lib/lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "make demo needs root: sudo make demo" >&2; exit 1; }
tl_init
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
TIERCTL=$BUILD/tierctl
SUB=$TL_DIR/tiered/alpha VIEW=$TL_DIR/views/alpha STORE=$TL_DIR/store/alpha

say "a 1 GiB btrfs on a loop device, with a subvolume for tenant alpha"
tl_loopfs btrfs 1G "$TL_DIR/tiered"
tl_subvol btrfs "$SUB"
mkdir -p "$TL_DIR/store"
cat >"$TL_DIR/policy.json" <<EOF2
{"tenants": [{"name": "alpha",
              "subvolume": "$SUB",
              "mount": "$VIEW",
              "backend": "file://$STORE"}]}
EOF2
cat "$TL_DIR/policy.json"

say "tierd starts: one fanotify group for the filesystem, a worker, the view $VIEW"
echo "  (it starts tierd-holder, which keeps its groups and in-flight record across tierd restarts)"
tl_dbus_start
export TL_TIERD_ARGS="--holder $TL_DIR/holder.sock"
tl_tierd_start "$TL_DIR/policy.json"
sed 's/^/  /' "$TL_TIERD_LOG"

say "files written into the view"
head -c $((64 << 20)) /dev/urandom >"$VIEW/data.bin"
seq 1 200000 >"$VIEW/numbers.txt"
cp "$VIEW/data.bin" "$TL_DIR/data.orig"
ls -l "$VIEW"
"$TIERCTL" status "$VIEW/data.bin" "$VIEW/numbers.txt"

say "tierctl archive: uploaded to the store (content-addressed), still local"
"$TIERCTL" archive "$VIEW/data.bin" "$VIEW/numbers.txt"
"$TIERCTL" status "$VIEW/data.bin" "$VIEW/numbers.txt"
find "$STORE" -type f | sed 's/^/  store: /'

say "tierctl release: the local blocks are punched; stat is unchanged"
stat -c '  before: %n %s bytes, %b blocks, mtime %y' "$VIEW/data.bin"
"$TIERCTL" release "$VIEW/data.bin" "$VIEW/numbers.txt"
sync
stat -c '  after:  %n %s bytes, %b blocks, mtime %y' "$VIEW/data.bin"
"$TIERCTL" status "$VIEW/data.bin" "$VIEW/numbers.txt"

say "a 4 KiB read in the middle: only its chunk comes back"
"$BUILD/tests/pread-at" "$VIEW/data.bin" $((32 << 20)) 4096 | cmp - <("$BUILD/tests/pread-at" "$TL_DIR/data.orig" $((32 << 20)) 4096) && echo "  bytes match the original"
"$TIERCTL" status "$VIEW/data.bin"

say "reading everything back: real bytes, never zeros"
cmp "$VIEW/data.bin" "$TL_DIR/data.orig" && echo "  data.bin: identical to the original"
tail -n 1 "$VIEW/numbers.txt" | sed 's/^/  numbers.txt ends with /'
"$TIERCTL" status

say "tierd is killed (SIGKILL) while a reader waits for a fill; a new tierd takes over"
"$TIERCTL" release "$VIEW/data.bin" >/dev/null
cmp "$VIEW/data.bin" "$TL_DIR/data.orig" && echo "  the reader got the original bytes" &
reader=$!
sleep 0.1
kill -KILL "$TL_TIERD_PID"
wait "$TL_TIERD_PID" 2>/dev/null || true
echo "  tierd $TL_TIERD_PID killed; starting another"
tl_tierd_start "$TL_DIR/policy.json"
wait $reader
grep -E "taken over|taking over|being served" "$TL_TIERD_LOG" | sed 's/^/  /'

say "tierd stops for good on SIGINT: in-flight fills answered, workers stopped, view removed"
"$TIERCTL" release "$VIEW/data.bin" >/dev/null
kill -INT "$TL_TIERD_PID"
wait "$TL_TIERD_PID" && echo "  tierd exited 0; tierd-holder keeps the groups and guards them"
TL_TIERD_PID=
grep -E "archived|released|restored" "$TL_TIERD_LOG" | sed 's/^/  /'
say "with no tierd, a released file gives EIO, never zeros (tierd-holder's guard)"
timeout 10 "$BUILD/tests/pread-at" "$SUB/data.bin" 0 4096 >/dev/null 2>"$TL_DIR/err" ||
	sed 's/^/  /' "$TL_DIR/err"
echo "  (the next tierd takes the groups back; SIGKILL to tierd-holder lets them go)"
HOLDER=$(pgrep -f "tierd-holder --socket $TL_DIR/holder.sock")
[ -n "$HOLDER" ] && kill -KILL $HOLDER
say "demo done: everything it made is removed"
