#!/bin/bash
# Recovery: how long a reader of a released file (1 MiB, read whole and
# compared with the original) waits when what serves it dies, against the
# same read with nothing killed, measured in the same run:
#   9a SIGKILL of the tenant's worker, then the read: from the kill to the
#      read's last byte (tierd starts a replacement and serves the fill on it)
#   9b SIGKILL of tierd, tierd-holder keeping its groups and in-flight record, while
#      a reader is blocked on the file (its fill parked in tierd: the worker
#      is stopped first, so the event is surely in flight): from the kill to
#      the read's last byte, a new tierd started at once as crash.sh does
#   9c the same under systemd's fd store, played by tests/helpers/fdstore-harness
#      (it restarts tierd 100 ms after its death, systemd's RestartSec=)
set -u
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/lib.sh"
tl_init
# On any exit, tierd stops for good before tl_cleanup: a SIGTERM there would
# hand its groups over, to a holder of its own if ours is gone, which would
# outlive the run. A stopped worker is let go first (a stop waits for fills).
recovery_cleanup() {
	local k p
	if [ -n "${TL_TIERD_PID:-}" ] && kill -0 "$TL_TIERD_PID" 2>/dev/null; then
		for p in $(pgrep -P "$TL_TIERD_PID" -x tierd-worker); do kill -CONT "$p"; done
		if [ -n "${HARNESS:-}" ]; then
			k=$(pgrep -P "$TL_TIERD_PID" -x tierd-keeper)
			kill -TERM "$HARNESS" && wait "$HARNESS"
			[ -n "$k" ] && kill -KILL "$k"
		else
			kill -INT "$TL_TIERD_PID"
			for _ in $(seq 50); do kill -0 "$TL_TIERD_PID" 2>/dev/null || break; sleep 0.1; done
		fi
	fi
	tl_cleanup
}
trap recovery_cleanup EXIT
MIB=1
VIEW=$TL_DIR/views/a
tl_loopfs btrfs 1G "$TL_DIR/fs" || { echo "bench recovery: cannot make the filesystem"; exit 1; }
tl_subvol btrfs "$TL_DIR/fs/a"
mkdir -p "$TL_DIR/store"
cat >"$TL_DIR/policy.json" <<EOF
{"tenants": [{"name": "a", "subvolume": "$TL_DIR/fs/a", "mount": "$VIEW", "backend": "file://$TL_DIR/store/a"}]}
EOF
tl_dbus_start || exit 1
HOLDER_SOCK=$TL_DIR/holder.sock
"$BUILD/tierd-holder" --socket "$HOLDER_SOCK" >>"$TL_DIR/holder.log" 2>&1 &
HOLDER=$!
TL_PIDS+=("$HOLDER")
export TL_TIERD_ARGS="--holder $HOLDER_SOCK"
tl_tierd_start "$TL_DIR/policy.json" || exit 1

head -c $((MIB << 20)) /dev/urandom >"$TL_DIR/orig"
cp "$TL_DIR/orig" "$VIEW/f"
"$BUILD/tierctl" archive "$VIEW/f" >/dev/null || { echo "bench recovery: archive failed"; exit 1; }

ms() { awk -v s="$1" 'BEGIN { printf "%.1f", s * 1000 }'; }
worker() { pgrep -P "$TL_TIERD_PID" -x tierd-worker; }
release() {
	"$BUILD/tierctl" release "$VIEW/f" >/dev/null || { echo "bench recovery: release failed"; exit 1; }
	sync -f "$TL_DIR/fs/a"
}
# baseline: the read with nothing killed, every byte compared; its ms
# appended to B.
baseline() {
	local t0
	release
	t0=$(bench_now)
	cmp -s "$VIEW/f" "$TL_DIR/orig" || bench_fail "$VIEW/f"
	B+=("$(ms "$(bench_since "$t0")")")
}
in_flight() {
	busctl --system get-property org.tierd1 /org/tierd1/tenant/a org.tierd1.Tenant InFlightRequests 2>/dev/null |
		awk '{ print $2 + 0 }'
}
# blocked_reader: stops the worker, starts a reader of the released file
# and returns once its fill is in flight in tierd. READER: the reader's
# subshell, which writes "STATUS END-TIME" to $TL_DIR/end.
blocked_reader() {
	local w
	release
	w=$(worker) && [ -n "$w" ] || { echo "bench recovery: no worker"; exit 1; }
	kill -STOP "$w"
	rm -f "$TL_DIR/end"
	( cmp -s "$VIEW/f" "$TL_DIR/orig"; echo "$? $(bench_now)" >"$TL_DIR/end" ) &
	READER=$!
	for _ in $(seq 200); do
		[ "$(in_flight)" -ge 1 ] 2>/dev/null && return 0
		sleep 0.01
	done
	echo "bench recovery: the reader's fill never showed in flight"; exit 1
}
# reader_done T0: waits for the reader; appends the ms from T0 to its end to F.
reader_done() {
	local rc end
	wait "$READER"
	read -r rc end <"$TL_DIR/end"
	[ "$rc" = 0 ] || bench_fail "$VIEW/f, read across a kill (cmp status $rc)"
	F+=("$(awk -v a="$1" -v b="$end" 'BEGIN { printf "%.1f", (b - a) * 1000 }')")
}

echo "# 9a: SIGKILL of the worker, then a read ($BENCH_RUNS runs)"
F=() B=()
for _ in $(seq "$BENCH_RUNS"); do
	baseline
	release
	w=$(worker)
	t0=$(bench_now)
	kill -KILL "$w"
	cmp -s "$VIEW/f" "$TL_DIR/orig" || bench_fail "$VIEW/f, read after the worker's death"
	F+=("$(ms "$(bench_since "$t0")")")
	for _ in $(seq 100); do [ -n "$(worker)" ] && [ "$(worker)" != "$w" ] && break; sleep 0.05; done
	echo "#   ${F[-1]} ms (no kill: ${B[-1]} ms)"
done
LOGGED=$(grep -o 'serving [0-9.]* ms after its predecessor died' "$TL_TIERD_LOG" | awk '{ print $2 }')
BENCH_FIGURE_SPREAD=$(bench_spread "${F[@]}") BENCH_BASELINE_SPREAD=$(bench_spread "${B[@]}")
bench_row 9a "worker SIGKILL to a read of a released file served ($MIB MiB)" ms "$(bench_median "${F[@]}")" \
	"$(bench_median "${B[@]}")" "the same read with a live worker" "-" 0 \
	"tierd's log, death to the replacement's first reply: median $(bench_median ${LOGGED:-0}) ms"

echo "# 9b: SIGKILL of tierd (tierd-holder) with a reader blocked ($BENCH_RUNS runs)"
F=() B=() UP=()
for _ in $(seq "$BENCH_RUNS"); do
	baseline
	blocked_reader
	t0=$(bench_now)
	kill -KILL "$TL_TIERD_PID"
	wait "$TL_TIERD_PID" 2>/dev/null
	tl_tierd_start "$TL_DIR/policy.json" || { echo "bench recovery: tierd did not come back"; exit 1; }
	UP+=("$(ms "$(bench_since "$t0")")")
	reader_done "$t0"
	echo "#   ${F[-1]} ms (no kill: ${B[-1]} ms); tierd answering again after ${UP[-1]} ms"
done
grep -q "taking over .* event(s) the previous tierd left" "$TL_TIERD_LOG" ||
	{ echo "bench recovery: no new tierd took over an orphaned event"; exit 1; }
BENCH_FIGURE_SPREAD=$(bench_spread "${F[@]}") BENCH_BASELINE_SPREAD=$(bench_spread "${B[@]}")
bench_row 9b "tierd SIGKILL (holder) to a blocked read served" ms "$(bench_median "${F[@]}")" \
	"$(bench_median "${B[@]}")" "the same read with no kill" "-" 0 \
	"a new tierd started at once; it answered tierctl status $(bench_median "${UP[@]}") ms after the kill (median, 0.1 s polls)"

# A stop for good: the holder lets go; then the fd-store harness.
kill -INT "$TL_TIERD_PID"
wait "$TL_TIERD_PID" || { echo "bench recovery: tierd did not stop cleanly"; exit 1; }
TL_TIERD_PID=
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null
"$BUILD/tests/fdstore-harness" "$TL_DIR/notify.sock" "$TL_DIR/tierd.pid" "$BUILD/tierd" --policy "$TL_DIR/policy.json" \
	--state-dir "$TL_DIR/state" >>"$TL_TIERD_LOG" 2>&1 &
HARNESS=$!
TL_PIDS+=("$HARNESS")
harness_ready() { # [OLD-PID]: a tierd other than OLD-PID answers; TL_TIERD_PID: it
	local p
	for _ in $(seq 200); do
		p=$(cat "$TL_DIR/tierd.pid" 2>/dev/null)
		[ -n "$p" ] && [ "$p" != "${1:-}" ] && "$BUILD/tierctl" status >/dev/null 2>&1 && { TL_TIERD_PID=$p; return 0; }
		sleep 0.05
	done
	return 1
}
harness_ready || { echo "bench recovery: tierd does not run under the fd-store harness"; exit 1; }
echo "# 9c: SIGKILL of tierd under the fd-store harness with a reader blocked ($BENCH_RUNS runs)"
F=() B=() UP=()
for _ in $(seq "$BENCH_RUNS"); do
	for _ in $(seq 100); do [ -n "$(worker)" ] && break; sleep 0.05; done
	baseline
	blocked_reader
	old=$TL_TIERD_PID
	t0=$(bench_now)
	kill -KILL "$old"
	harness_ready "$old" || { echo "bench recovery: tierd did not come back under the harness"; exit 1; }
	UP+=("$(ms "$(bench_since "$t0")")")
	reader_done "$t0"
	echo "#   ${F[-1]} ms (no kill: ${B[-1]} ms); tierd answering again after ${UP[-1]} ms"
done
grep -q "groups taken over from the previous tierd" "$TL_TIERD_LOG" ||
	{ echo "bench recovery: no tierd took its groups from the fd store"; exit 1; }
BENCH_FIGURE_SPREAD=$(bench_spread "${F[@]}") BENCH_BASELINE_SPREAD=$(bench_spread "${B[@]}")
bench_row 9c "tierd SIGKILL (fd-store harness) to a blocked read served" ms "$(bench_median "${F[@]}")" \
	"$(bench_median "${B[@]}")" "the same read with no kill" "-" 0 \
	"includes the harness's 100 ms restart delay (RestartSec=); the new tierd answered tierctl status $(bench_median "${UP[@]}") ms after the kill"

# The end: the harness's SIGTERM hands tierd over (as a restart would);
# its keeper would wait a minute for a successor, so recovery_cleanup ends it.
