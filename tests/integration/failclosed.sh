#!/bin/bash
# Fail closed: no mode of tierd lets a stub read as zeros. tierd-holder
# keeps the groups whenever tierd is absent, and its guard (holder/guard.c)
# answers reads of files not whole EIO:
# 1. at once after a stop for good (SIGINT);
# 2. after the policy's guard_after (2 s here) when tierd was killed and no
#    tierd followed: readers first wait, as they would for a restart; and
#    tierds that take the groups and die before serving (a crash loop) do
#    not keep the guard away;
# 3. for an event tierd had read but not recorded when it died (a test
#    build dies there), from the dead tierd's journal;
# Then the explicit final stop (tierctl release-groups): refused while a
# stub is not whole, while tierd runs, or for a filesystem not named;
# done once every file is whole.
# 4. under systemd's fd store (tests/helpers/fdstore-harness, stopped with
#    SIGINT as the unit's KillSignal= does): systemd empties its store, so
#    tierd moves the groups to a holder it starts.
# After each, a released file gives EIO (exit 1 and the message: a hang or
# bytes fail), a file whole locally and a file never tiered read their
# bytes, and the next tierd takes the groups back and serves again.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
TIERCTL=$BUILD/tierctl
PREAD=$BUILD/tests/pread-at
VIEW=$TL_DIR/views/a SUB=$TL_DIR/fs/a ORIG=$TL_DIR/orig

tl_loopfs btrfs 1G "$TL_DIR/fs" || { not_ok "mkfs"; tl_summary; exit 1; }
tl_subvol btrfs "$SUB"
mkdir -p "$ORIG" "$TL_DIR/store"
cat >"$TL_DIR/policy.json" <<EOF
{"guard_after": "2s",
 "tenants": [{"name": "a", "subvolume": "$SUB", "mount": "$VIEW", "backend": "file://$TL_DIR/store/a"}]}
EOF
tl_dbus_start || { not_ok "dbus-daemon"; tl_summary; exit 1; }
HOLDER_SOCK=$TL_DIR/holder.sock HLOG=$TL_DIR/holder.log
"$BUILD/tierd-holder" --socket "$HOLDER_SOCK" >>"$HLOG" 2>&1 &
HOLDER=$!
TL_PIDS+=("$HOLDER")
export TL_TIERD_ARGS="--holder $HOLDER_SOCK"
check "tierd starts with tierd-holder" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }

for f in r1 r2 r3 w o; do
	head -c $((1 << 20)) /dev/urandom >"$ORIG/$f"
	cp "$ORIG/$f" "$VIEW/$f"
done
check "files archived" "$TIERCTL" archive "$VIEW/r1" "$VIEW/r2" "$VIEW/r3" "$VIEW/w"
check "... and three released" "$TIERCTL" release "$VIEW/r1" "$VIEW/r2" "$VIEW/r3"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# eio FILE: one read of FILE; succeeds only if it failed with EIO within
# 10 s. A hang (124), bytes (0) or another error fail, and say so.
eio() {
	local out rc
	out=$(timeout 10 "$PREAD" "$1" 0 4096 2>&1 >/dev/null)
	rc=$?
	[ "$rc" = 1 ] && [[ $out == *"Input/output error"* ]] && return 0
	echo "# $1: exit $rc ($out)"
	return 1
}
# ends PID: waits up to 30 s for PID to end, then gives its exit status; a
# process still running then is killed and fails (a hang never passes).
ends() {
	for _ in $(seq 300); do kill -0 "$1" 2>/dev/null || { wait "$1"; return; }; sleep 0.1; done
	echo "# pid $1 still runs after 30 s: killed"
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 124
}
logged() { # PATTERN FILE: within 5 s
	for _ in $(seq 50); do grep -q "$1" "$2" && return 0; sleep 0.1; done
	return 1
}
same() { timeout 10 cmp "$1" "$ORIG/$(basename "$1")"; }
# refused TEXT ARGS...: it exits 1 (a hang is 124) saying TEXT.
refused() {
	local want=$1 out rc
	shift
	out=$(timeout 60 "$TIERCTL" release-groups --holder "$HOLDER_SOCK" "$@" 2>&1)
	rc=$?
	[ "$rc" = 1 ] && [[ $out == *"$want"* ]] && return 0
	echo "# release-groups $*: exit $rc: $out"
	return 1
}
others_read() { # the files the guard must let through
	same "$SUB/w" && same "$SUB/o" && echo new >"$SUB/new-$1" && test "$(cat "$SUB/new-$1")" = new
}

# 1. A stop for good.
kill -INT "$TL_TIERD_PID"
check "SIGINT: tierd stops for good (exit 0)" ends "$TL_TIERD_PID"
TL_TIERD_PID=
check "... its view is removed" bash -c "! findmnt -rn '$VIEW' >/dev/null"
check "... tierd-holder keeps the groups and guards them at once" logged "tierd stopped: guarding" "$HLOG"
check "a released file then gives EIO, not zeros" eio "$SUB/r1"
check "... files whole locally and files never tiered read and write as before" others_read 1
check "the next tierd takes the groups back" tl_tierd_start "$TL_DIR/policy.json"
check "... and the guard stopped" grep -q "a tierd connected: the guard stops" "$HLOG"
check "... the released file reads its bytes" same "$VIEW/r1"

# 2. Killed, and no tierd follows.
kill -KILL "$TL_TIERD_PID"
wait "$TL_TIERD_PID" 2>/dev/null
TL_TIERD_PID=
t0=$(now_ms)
check "release-groups right after, while the guard waits guard_after: refused" refused "guard is not running" "$TL_DIR/fs"
check "tierd SIGKILLed, none started: a reader of a released file gets EIO, not zeros nor a hang" eio "$SUB/r2"
waited=$(($(now_ms) - t0))
check "... after it waited for a tierd first, as it would for a restart (${waited} ms; guard_after 2 s)" test "$waited" -ge 1500
check "... the holder logged it" grep -q "no tierd for 2 s: guarding" "$HLOG"
check "... files whole locally still read" others_read 2
# A crash loop: tierds that take the groups and die before serving (no
# bus here), one every 0.2 s for 8 s, must not keep the guard away.
(for _ in $(seq 40); do
	DBUS_SYSTEM_BUS_ADDRESS=unix:path=$TL_DIR/no-bus timeout 20 "$BUILD/tierd" --policy "$TL_DIR/policy.json" \
		--state-dir "$TL_DIR/state" --holder "$HOLDER_SOCK" >>"$TL_DIR/loop.log" 2>&1
	sleep 0.2
done) &
LOOP=$!
TL_PIDS+=("$LOOP")
sleep 1
check "a crash loop of tierds that never serve: a reader still gets EIO" eio "$SUB/r2"
check "... while the loop still runs" kill -0 "$LOOP"
check "... the holder saw them go before they served" grep -q "gone before it served" "$HLOG"
wait "$LOOP"
check "the next tierd serves again" tl_tierd_start "$TL_DIR/policy.json"
check "... the released file reads its bytes" same "$VIEW/r2"

# 3. Killed between reading an event and recording it.
kill -INT "$TL_TIERD_PID" && ends "$TL_TIERD_PID"
BUILD=$BUILD/testhooks tl_tierd_start "$TL_DIR/policy.json"
setfattr -n user.tierd-test-die -v 1 "$SUB/r3"
t0=$(now_ms)
eio "$SUB/r3" >"$TL_DIR/r3.out" &
READER=$!
ends "$TL_TIERD_PID"
rc=$?
check "a test build dies reading that reader's event (exit $rc: SIGKILLed)" test "$rc" = 137
TL_TIERD_PID=
check "tierd died reading a reader's event, none started: that reader gets EIO, not a hang" wait "$READER"
cat "$TL_DIR/r3.out"
check "... answered by the guard, as every event the dead tierd left" logged "the last tierd left unanswered: answered EIO" "$HLOG"
setfattr -x user.tierd-test-die "$SUB/r3"
check "the next tierd serves again" tl_tierd_start "$TL_DIR/policy.json"
check "... the released file reads its bytes" same "$VIEW/r3"
"$TIERCTL" release "$VIEW/r1" >/dev/null
kill -INT "$TL_TIERD_PID" && ends "$TL_TIERD_PID"
TL_TIERD_PID=
kill -TERM "$HOLDER"
check "SIGTERM does not end a holder guarding groups (they would close: zeros)" \
	bash -c "$(declare -f logged); logged 'SIGTERM ignored' '$HLOG' && kill -0 $HOLDER"

# The explicit final stop: tierctl release-groups makes the holder let go
# only once a walk of the filesystem found no stub that is not whole.
check "release-groups with a released file there: refused (exit 1), naming it" refused "$TL_DIR/fs/a/r1" "$TL_DIR/fs"
check "... nothing changed: the holder still guards (EIO)" eio "$SUB/r1"
check "release-groups of a directory that is not a mount point: refused" refused "not a mount point" "$SUB"
check "release-groups not naming the holder's filesystem: refused" refused "not given" /
check "the next tierd serves" tl_tierd_start "$TL_DIR/policy.json"
check "release-groups while it runs: refused within 60 s (not a hang)" refused "serves a running tierd" "$TL_DIR/fs"
check "... the released file restored" "$TIERCTL" restore "$VIEW/r1"
kill -INT "$TL_TIERD_PID" && ends "$TL_TIERD_PID"
TL_TIERD_PID=
out=$(timeout 60 "$TIERCTL" release-groups --holder "$HOLDER_SOCK" "$TL_DIR/fs" 2>&1)
rc=$?
echo "# $out"
check "tierd stopped for good, no stub left not whole: release-groups succeeds (exit $rc)" test "$rc" = 0
check "... and says so" grep -q "let go of the groups of 1 filesystem" <<<"$out"
check "... the holder let go and exited 0" ends "$HOLDER"
check "... its log says so" grep -q "let go of .* fds on request" "$HLOG"
check "... the files read their bytes, with no group left" bash -c "$(declare -f same); ORIG='$ORIG'; same '$SUB/r1' && same '$SUB/w'"

# 4. systemd's fd store, played by the harness; stopping the unit sends
# SIGINT, and systemd then empties its store.
H2=$TL_DIR/h2.sock
"${TL_AS_SERVICE[@]}" "$BUILD/tests/fdstore-harness" "$TL_DIR/notify.sock" "$TL_DIR/tierd.pid" "$BUILD/tierd" \
	--policy "$TL_DIR/policy.json" \
	--state-dir "$TL_DIR/state" --holder "$H2" >>"$TL_TIERD_LOG" 2>&1 &
HARNESS=$!
TL_PIDS+=("$HARNESS")
harness_ready() {
	for _ in $(seq 100); do
		TL_TIERD_PID=$(cat "$TL_DIR/tierd.pid" 2>/dev/null)
		[ -n "$TL_TIERD_PID" ] && "$TIERCTL" status >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	return 1
}
check "tierd runs under the fd-store harness, no holder listening" harness_ready
check "... and stores its groups in systemd's store" grep -q "stored pre-" "$TL_TIERD_LOG"
check "... tells systemd what it does in one STATUS= line (tenants, containers, workers, fills)" tl_eventually \
	grep -qE "^status [0-9]+ tenant\(s\), 0 container\(s\), ([0-9]+) of \1 worker\(s\) running, [0-9]+ fill\(s\) in flight, [0-9]+ done, [0-9]+ failed$" \
	"$TL_TIERD_LOG"
kill -HUP "$TL_TIERD_PID"
# The harness prints what systemd hears as it reads it, beside tierd's own
# lines in the same file: the two writers' order is not the events' order,
# so each is checked in its own lines.
check "SIGHUP (systemctl reload): systemd hears RELOADING=1, then READY=1" \
	tl_eventually bash -c "grep -v '^tierd\[' '$TL_TIERD_LOG' | sed -n '/^reloading\$/,\$p' | grep -qx ready"
check "... and tierd applied the policy read again" \
	tl_eventually bash -c "sed -n '/SIGHUP: reloading/,\$p' '$TL_TIERD_LOG' | grep -q 'info: policy .* reloaded'"
"$TIERCTL" release "$VIEW/r1" >/dev/null
kill -INT "$HARNESS"
check "the unit stopped (SIGINT): the harness exits once tierd has" ends "$HARNESS"
TL_TIERD_PID=
for _ in $(seq 50); do pgrep -f "tierd-holder --socket $H2" >/dev/null && break; sleep 0.1; done
H2PID=$(pgrep -f "tierd-holder --socket $H2")
[ -n "$H2PID" ] && TL_PIDS+=("$H2PID")
check "... tierd moved its groups to a holder it started" test -n "$H2PID"
check "... which guards them" grep -q "stopped for good: tierd-holder ($H2) keeps the groups" "$TL_TIERD_LOG"
check "a released file then gives EIO, not zeros" eio "$SUB/r1"
check "... files whole locally still read" others_read 4
export TL_TIERD_ARGS="--holder $H2"
check "the next tierd takes the groups from that holder" tl_tierd_start "$TL_DIR/policy.json"
check "... the released file reads its bytes" same "$VIEW/r1"
tl_summary
