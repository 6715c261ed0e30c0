#!/bin/bash
# The catalog under SIGKILL: tierd is killed at random moments while files
# change and are archived again (and so while it writes journal objects and
# snapshots), then restarted, round after round. Another tierd then
# imports the tenant: every file reads back as one of the versions it had
# (one whose archive a kill cut short may be older), never anything else,
# never an error; and the files changed, archived and released in a last
# round without a kill read back as they were last written.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
echo "# catalog: tierd SIGKILLed at random while it writes the catalog"
TIERCTL=$BUILD/tierctl
FSA=$TL_DIR/fsa FSB=$TL_DIR/fsb STORE=$TL_DIR/store/alpha VA=$TL_DIR/views/a VB=$TL_DIR/views/b
ROUNDS=${CATALOG_KILL_ROUNDS:-12} N=200
mkdir -p "$TL_DIR/store" "$TL_DIR/versions"
tl_loopfs btrfs 1G "$FSA" || { not_ok "mkfs A"; tl_summary; exit 1; }
tl_loopfs btrfs 1G "$FSB" || { not_ok "mkfs B"; tl_summary; exit 1; }
tl_subvol btrfs "$FSA/alpha"
tl_subvol btrfs "$FSB/alpha"
policy() { # FILE SUBVOLUME VIEW
	cat >"$1" <<-EOF2
	{"tenants": [{"name": "alpha", "subvolume": "$2", "mount": "$3", "backend": "file://$STORE", "catalog": true, "catalog_key": "$TL_CATALOG_KEY"}]}
	EOF2
}
policy "$TL_DIR/a.json" "$FSA/alpha" "$VA"
policy "$TL_DIR/b.json" "$FSB/alpha" "$VB"
tl_dbus_start || { not_ok "dbus-daemon"; tl_summary; exit 1; }

# versions/NAME: the hashes a file had, one a line, the last last.
version() { # NAME: writes a new content into A's file, records its hash
	local tmp="$TL_DIR/new.$BASHPID" # this shell's: a pipeline's parts have their own
	head -c $((1000 + RANDOM % 60000)) /dev/urandom >"$tmp"
	mkdir -p "$(dirname "$TL_DIR/versions/$1")"
	sha256sum <"$tmp" | cut -d' ' -f1 >>"$TL_DIR/versions/$1"
	cat "$tmp" >"$VA/$1"
}
# With tierd-holder: readers and writers of A's files wait for the next
# tierd while it is dead, as in production.
HOLDER_SOCK=$TL_DIR/holder.sock
"$BUILD/tierd-holder" --socket "$HOLDER_SOCK" >>"$TL_DIR/holder.log" 2>&1 &
TL_PIDS+=("$!")
export TL_TIERD_ARGS="--holder $HOLDER_SOCK"
check "tierd A starts (with tierd-holder)" tl_tierd_start "$TL_DIR/a.json" || { tl_summary; exit 1; }
mkdir -p "$VA/d1/d2" "$VA/d3"
for i in $(seq $N); do
	f=d$((i % 3 + 1))/f$i
	[ $((i % 3)) = 1 ] && f=d1/d2/f$i
	version "$f"
done
( cd "$TL_DIR/versions" && find . -type f | sed 's|^\./||' | sort ) >"$TL_DIR/names"
[ "$(wc -l <"$TL_DIR/names")" -eq "$N" ] || not_ok "the test's own list of $N files"

check "$N files archived, half released" bash -c "
	sed 's|^|$VA/|' '$TL_DIR/names' | tr '\n' '\0' | xargs -0 '$TIERCTL' archive &&
	sed -n 'p;n' '$TL_DIR/names' | sed 's|^|$VA/|' | tr '\n' '\0' | xargs -0 '$TIERCTL' release"

kills=0
for round in $(seq "$ROUNDS"); do
	# Changes and archives in the background, a SIGKILL at a random moment.
	mapfile -t some < <(shuf -n 20 "$TL_DIR/names")
	(
		for f in "${some[@]}"; do "$TIERCTL" restore "$VA/$f" >/dev/null 2>&1; version "$f"; done
		for f in "${some[@]}"; do echo "$VA/$f"; done | tr '\n' '\0' | xargs -0 "$TIERCTL" archive >/dev/null 2>&1
		for f in "${some[@]:0:10}"; do echo "$VA/$f"; done | tr '\n' '\0' | xargs -0 "$TIERCTL" release >/dev/null 2>&1
	) &
	worker=$!
	sleep "$(printf "%d.%03d" $((RANDOM % 3)) $((RANDOM % 1000)))" # within the restores, writes, archive, journal or release
	kill -KILL "$TL_TIERD_PID" && kills=$((kills + 1))
	wait "$TL_TIERD_PID" 2>/dev/null
	TL_TIERD_PID=
	# The writers wait in the kernel for the next tierd: it starts first.
	tl_tierd_start "$TL_DIR/a.json" || { not_ok "round $round: tierd A restarts"; break; }
	timeout 60 tail --pid="$worker" -f /dev/null || echo "# round $round: the changes still run 60 s after tierd is back"
	wait "$worker" 2>/dev/null
done
check "$kills SIGKILLs of tierd A, each restarted" test "$kills" -eq "$ROUNDS"
# A last round without a kill: released, their entries are in the store.
mapfile -t last < <(shuf -n 20 "$TL_DIR/names")
for f in "${last[@]}"; do "$TIERCTL" restore "$VA/$f" >/dev/null 2>&1; version "$f"; done
check "a last round: 20 files changed, archived and released" bash -c "
	printf '$VA/%s\0' $(printf '%q ' "${last[@]}") | xargs -0 '$TIERCTL' archive &&
	printf '$VA/%s\0' $(printf '%q ' "${last[@]}") | xargs -0 '$TIERCTL' release"
check "SIGTERM: tierd A exits 0" tl_tierd_stop

export TL_TIERD_ARGS=--no-holder
check "tierd B starts" tl_tierd_start "$TL_DIR/b.json"
check "tierctl tenant import" "$TIERCTL" tenant import alpha --from "file://$STORE"
consistent() {
	local f h last=0 older=0 bad=0
	while read -r f; do
		if ! h=$(sha256sum <"${CV:-$VB}/$f" 2>/dev/null | cut -d' ' -f1) || [ -z "$h" ]; then
			echo "# $f: cannot be read on B"; bad=$((bad + 1)); continue
		fi
		if [ "$h" = "$(tail -n 1 "$TL_DIR/versions/$f")" ]; then last=$((last + 1))
		elif grep -qx "$h" "$TL_DIR/versions/$f"; then older=$((older + 1))
		else echo "# $f: none of the versions it had ($h; $(tr "\n" " " <"$TL_DIR/versions/$f"))"; bad=$((bad + 1)); fi
	done <"$TL_DIR/names"
	echo "# $last files as last written, $older as an earlier version (an archive a kill cut short), $bad wrong"
	[ "$bad" -eq 0 ] && [ $((last + older)) -eq "$N" ]
}
check "every file on B reads back as one of the versions it had" consistent
last_round() {
	local f
	for f in "${last[@]}"; do
		[ "$(sha256sum <"${CV:-$VB}/$f" | cut -d' ' -f1)" = "$(tail -n 1 "$TL_DIR/versions/$f")" ] || { echo "# $f"; return 1; }
	done
}
check "... and the last round's 20 files as last written" last_round
check "... and B has no file A never had" bash -c "
	[ \$(find '$FSB/alpha' -type f | wc -l) -eq $N ]"
check "SIGTERM: tierd B exits 0" tl_tierd_stop

# A stop while an import makes its tree, on a node of its own (a new
# subvolume, a state directory of its own). A test build makes one entry
# each 200 ms (over 40 s for the tree: longer than the 30 s a stop waits
# for fills). tierd stops between two entries, finishes the directories
# made, and tells the import's caller; the next start imports again (the
# import's mark), and the tree is whole.
node() { # NAME: a node importing alpha into $FSB/NAME, its view views/NAME
	tl_subvol btrfs "$FSB/$1"
	mkdir -p "$TL_DIR/state-$1"
	policy "$TL_DIR/$1.json" "$FSB/$1" "$TL_DIR/views/$1"
}
files_in() { find "$FSB/$1" -type f | wc -l; }
dirs_755() { # NAME [DIR...]: 755 as in A (default: all three)
	local n=$1 d
	shift
	[ $# -gt 0 ] || set -- d1 d1/d2 d3
	for d in "$@"; do
		[ "$(stat -c %a "$FSB/$n/$d")" = 755 ] || { echo "# $d: $(stat -c %a "$FSB/$n/$d")"; return 1; }
	done
}
all_made() { # NAME: once the import said it is done
	for _ in $(seq 1200); do
		[ "$(grep -c "made from snapshot" "$TL_TIERD_LOG")" -gt "$imports" ] && break
		sleep 0.1
	done
	[ "$(files_in "$1")" -eq "$N" ]
}
restart() { TL_TIERD_ARGS="--no-holder --state-dir $TL_DIR/state-$1" tl_tierd_start "$TL_DIR/$1.json"; }
slow_start() { # NAME
	TL_TIERD_ARGS="--no-holder --state-dir $TL_DIR/state-$1" TIERD_TEST_IMPORT_PAUSE_MS=200 BUILD=$BUILD/testhooks \
		tl_tierd_start "$TL_DIR/$1.json" || not_ok "tierd $1 (test build) starts"
	"$TIERCTL" tenant import alpha --from "file://$STORE" >"$TL_DIR/import-$1.out" 2>&1 &
	importer=$!
	for _ in $(seq 600); do [ "$(files_in "$1")" -gt 0 ] && break; sleep 0.1; done
}
node c
slow_start c
kill -INT "$TL_TIERD_PID"
check "SIGINT while an import makes its tree: tierd exits within 15 s" tl_tierd_exits 15
made=$(files_in c)
check "... the tree half made ($made of $N files)" test "$made" -gt 0 -a "$made" -lt "$N"
check "... the log says the import stopped" grep -q "cannot make the tree: Operation canceled" "$TL_TIERD_LOG"
irc=0
timeout 10 tail --pid="$importer" -f /dev/null && wait "$importer" || irc=$?
check "... tierctl tenant import fails (exit $irc), saying the next start imports again" \
	bash -c "[ $irc -ne 0 ] && [ $irc -ne 124 ] && grep -q 'imports again at its next start' '$TL_DIR/import-c.out'"
check "... the directories made (those of the first files) finished all the same: 755, not the 700 they are made with" dirs_755 c d1 d1/d2
imports=$(grep -c "made from snapshot" "$TL_TIERD_LOG")
check "tierd c starts again" restart c
check "... and imports again: all $N files made" all_made c
CV=$TL_DIR/views/c
check "... every file reads back as one of the versions it had" consistent
unset CV
check "... its directories with their own mode (755)" dirs_755 c
check "SIGTERM: tierd c exits 0" tl_tierd_stop

# The same cut by SIGKILL: nothing finishes the directories made; the next
# start imports again and gives the directories it finds as it makes them
# (root's, 0700) their owners and modes too.
node d
slow_start d
kill -KILL "$TL_TIERD_PID"
wait "$TL_TIERD_PID" 2>/dev/null
TL_TIERD_PID=
check "... tierctl tenant import ends once tierd is killed (not a hang)" timeout 10 tail --pid="$importer" -f /dev/null
kill "$importer" 2>/dev/null
wait "$importer" 2>/dev/null
check "SIGKILL while an import makes its tree: d1/d2 left 700" test "$(stat -c %a "$FSB/d/d1/d2")" = 700
# A directory the import had not made yet, made meanwhile by a tenant's
# user: not the import's, left as it is (only root's 0700 ones are).
install -d -o 65534 -g 65534 -m 755 "$FSB/d/d3"
imports=$(grep -c "made from snapshot" "$TL_TIERD_LOG")
check "tierd d starts again" restart d
check "... and imports again: all $N files made" all_made d
check "... its directories with their own mode (755)" dirs_755 d
check "... and d3, a tenant user's, still that user's" test "$(stat -c %u "$FSB/d/d3")" = 65534
check "SIGTERM: tierd d exits 0" tl_tierd_stop
tl_summary
