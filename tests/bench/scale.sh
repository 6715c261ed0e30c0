#!/bin/bash
# Many tenants on one node: 100 (small: 20) btrfs subvolumes of one loop
# filesystem, each a tenant with its own file:// store, one tierd with a
# worker each. Memory is PSS (/proc/PID/smaps_rollup: a page shared by k
# processes counts 1/k in each, so shared library pages are counted once):
#   8a a worker's PSS after it served fills (median over the workers),
#      against the target of 4 MiB
#   8b tierd's PSS (with its keeper, which shares its pages) with every
#      tenant, against tierd's with one tenant, same load, same run
#   8c, 8d D-Bus GetTenant latency p50 and p99 (tests/helpers/bus-latency,
#      one connection, calls back to back), against the bus's own round
#      trip (org.freedesktop.DBus.GetId) measured the same way
# Each round releases every tenant's file and reads it back (a 4 KiB pread
# in the middle, then the whole file), compared with the original.
set -u
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/lib.sh"
tl_init
N=$(bench_size 100 20)
CALLS=$(bench_size 2000 1000)
MIB=4
tl_loopfs btrfs 2G "$TL_DIR/fs" || { echo "bench scale: cannot make the filesystem"; exit 1; }
mkdir -p "$TL_DIR/orig" "$TL_DIR/store"
policy() { # COUNT: a policy of the first COUNT tenants
	local i sep=
	printf '{"tenants": ['
	for i in $(seq "$1"); do
		printf '%s\n {"name": "t%d", "subvolume": "%s", "mount": "%s", "backend": "file://%s"}' "$sep" "$i" \
			"$TL_DIR/fs/t$i" "$TL_DIR/views/t$i" "$TL_DIR/store/t$i"
		sep=,
	done
	printf ']}\n'
}
for i in $(seq "$N"); do tl_subvol btrfs "$TL_DIR/fs/t$i"; done
policy 1 >"$TL_DIR/policy1.json"
policy "$N" >"$TL_DIR/policyN.json"
tl_dbus_start || exit 1

pss() { awk '/^Pss:/ { print $2 }' "/proc/$1/smaps_rollup"; }
workers() { pgrep -P "$TL_TIERD_PID" -x tierd-worker; }
# tierd and its keeper (a copy of its memory sharing its pages): their sum.
tierd_pss() {
	local k; k=$(pgrep -P "$TL_TIERD_PID" -x tierd-keeper)
	echo $(($(pss "$TL_TIERD_PID") + ${k:+$(pss "$k")} + 0))
}
wait_workers() { # COUNT: until tierd runs that many workers
	for _ in $(seq 300); do
		[ "$(workers | wc -l)" -ge "$1" ] && return 0
		sleep 0.1
	done
	echo "bench scale: tierd started $(workers | wc -l) of $1 workers"; return 1
}
# put FIRST LAST: a file of MIB MiB in each of these tenants, archived.
put() {
	local i paths=()
	for i in $(seq "$1" "$2"); do
		head -c $((MIB << 20)) /dev/urandom >"$TL_DIR/orig/t$i"
		cp "$TL_DIR/orig/t$i" "$TL_DIR/views/t$i/f"
		paths+=("$TL_DIR/views/t$i/f")
	done
	"$BUILD/tierctl" archive "${paths[@]}" >/dev/null || { echo "bench scale: archive failed"; exit 1; }
}
# round LAST: every tenant's file up to LAST released, then read back, 8
# tenants at a time: a 4 KiB pread in the middle (a ranged, verified fill),
# then the whole file. Every byte compared.
round() {
	local i paths=() pids=() off=$(((MIB << 20) / 2 + 4096))
	for i in $(seq "$1"); do paths+=("$TL_DIR/views/t$i/f"); done
	"$BUILD/tierctl" release "${paths[@]}" >/dev/null || { echo "bench scale: release failed"; exit 1; }
	sync -f "$TL_DIR/fs"
	for i in $(seq "$1"); do
		(
			"$BUILD/tests/pread-at" "$TL_DIR/views/t$i/f" "$off" 4096 |
				cmp -s - <(dd if="$TL_DIR/orig/t$i" bs=4096 skip=$((off / 4096)) count=1 status=none) &&
				cmp -s "$TL_DIR/views/t$i/f" "$TL_DIR/orig/t$i" || echo "t$i" >>"$TL_DIR/wrong"
		) &
		pids+=($!)
		[ $((i % 8)) = 0 ] && { wait "${pids[@]}"; pids=(); }
	done
	[ ${#pids[@]} = 0 ] || wait "${pids[@]}"
	[ -s "$TL_DIR/wrong" ] && bench_fail "released files of tenants $(tr '\n' ' ' <"$TL_DIR/wrong")"
	return 0
}

echo "# tierd with 1 tenant: $BENCH_RUNS rounds of fills, then its PSS"
tl_tierd_start "$TL_DIR/policy1.json" || exit 1
wait_workers 1 || exit 1
put 1 1
T1=()
for _ in $(seq "$BENCH_RUNS"); do round 1; sleep 0.5; T1+=("$(tierd_pss)"); done
tl_tierd_stop || { echo "bench scale: tierd did not stop cleanly"; exit 1; }

echo "# tierd with $N tenants"
t0=$(bench_now)
tl_tierd_start "$TL_DIR/policyN.json" || exit 1
wait_workers "$N" || exit 1
echo "# ... $N workers running $(bench_since "$t0") s after tierd started"
IDLE=()
for w in $(workers); do IDLE+=("$(pss "$w")"); done
echo "# idle workers (before any request): PSS median $(bench_median "${IDLE[@]}") KiB"
t0=$(bench_now)
put 2 "$N"
echo "# ... $N files of $MIB MiB archived in $(bench_since "$t0") s"
TN=() W=()
for r in $(seq "$BENCH_RUNS"); do
	t0=$(bench_now)
	round "$N"
	sleep 0.5
	P=()
	for w in $(workers); do P+=("$(pss "$w")"); done
	[ "${#P[@]}" = "$N" ] || { echo "bench scale: $N workers expected, ${#P[@]} found"; exit 1; }
	W+=("$(bench_median "${P[@]}")")
	TN+=("$(tierd_pss)")
	echo "# round $r: $N files released and read back in $(bench_since "$t0") s; workers' PSS median ${W[-1]} KiB" \
		"(min $(printf '%s\n' "${P[@]}" | sort -n | head -n 1), max $(printf '%s\n' "${P[@]}" | sort -n | tail -n 1));" \
		"tierd+keeper ${TN[-1]} KiB"
done

# What a worker's memory is: the rollup's parts, and its largest mappings.
w=$(workers | head -n 1)
PARTS=$(awk '/^(Rss|Pss_Anon|Pss_File|Private_Clean|Private_Dirty|Shared_Clean):/ { printf "%s%s %s", s, $1, $2; s = ", " }' \
	"/proc/$w/smaps_rollup")
echo "# one worker ($w, $(ls "/proc/$w/task" | wc -l) threads), KiB: $PARTS; its largest mappings:"
awk '/^[0-9a-f]+-[0-9a-f]+ / { name = ($6 == "") ? "anonymous " $1 : $6 } /^Pss:/ { p[name] += $2 }
	END { for (n in p) if (p[n] >= 64) printf "%d %s\n", p[n], n }' "/proc/$w/smaps" | sort -rn | head -n 8 |
	awk '{ printf "#   %6d KiB PSS  %s %s\n", $1, $2, $3 }'
ARENAS=$(awk '/^[0-9a-f]+-[0-9a-f]+ / { anon = ($6 == "") } /^Pss:/ && anon && $2 >= 512 { n++; k += $2 }
	END { printf "%d anonymous mappings of 512 KiB or more (the fill threads'"'"' malloc arenas) hold %d KiB", n, k }' \
	"/proc/$w/smaps")
echo "# ... $ARENAS"

BENCH_FIGURE_SPREAD=$(bench_spread "${W[@]}")
bench_row 8a "a worker's PSS, median of $N (each served fills)" KiB "$(bench_median "${W[@]}")" 4096 \
	"the target: 4 MiB" "<=" 1.0 "one worker: $PARTS; $ARENAS; idle before any request: $(bench_median "${IDLE[@]}") KiB"
BENCH_FIGURE_SPREAD=$(bench_spread "${TN[@]}") BENCH_BASELINE_SPREAD=$(bench_spread "${T1[@]}")
bench_row 8b "tierd's PSS (with its keeper), $N tenants" KiB "$(bench_median "${TN[@]}")" "$(bench_median "${T1[@]}")" \
	"tierd's PSS with 1 tenant, same load" "-" 0 "shared library pages are split with the workers: more workers, smaller share"

echo "# D-Bus: $CALLS calls back to back, $BENCH_RUNS runs"
G50=() G99=() B50=() B99=() P50=()
for _ in $(seq "$BENCH_RUNS"); do
	read -r a b < <("$BUILD/tests/bus-latency" "$CALLS" org.tierd1 /org/tierd1 org.tierd1.Manager GetTenant "t$N") &&
		[ -n "$b" ] || { echo "bench scale: GetTenant failed"; exit 1; }
	G50+=("$a") G99+=("$b")
	read -r a b < <("$BUILD/tests/bus-latency" "$CALLS" org.freedesktop.DBus /org/freedesktop/DBus \
		org.freedesktop.DBus GetId) && [ -n "$b" ] || { echo "bench scale: GetId failed"; exit 1; }
	B50+=("$a") B99+=("$b")
	read -r a b < <("$BUILD/tests/bus-latency" "$CALLS" org.tierd1 /org/tierd1 org.freedesktop.DBus.Peer Ping) &&
		[ -n "$b" ] || { echo "bench scale: Peer.Ping failed"; exit 1; }
	P50+=("$a")
	echo "# GetTenant p50 ${G50[-1]} us, p99 ${G99[-1]} us; GetId p50 ${B50[-1]} us, p99 ${B99[-1]} us;" \
		"Peer.Ping to tierd p50 $a us"
done
p50=$(bench_median "${P50[@]}")
BENCH_FIGURE_SPREAD=$(bench_spread "${G50[@]}") BENCH_BASELINE_SPREAD=$(bench_spread "${B50[@]}")
bench_row 8c "D-Bus GetTenant p50 ($CALLS calls, $N tenants)" us "$(bench_median "${G50[@]}")" \
	"$(bench_median "${B50[@]}")" "the bus's own round trip (org.freedesktop.DBus.GetId) p50" "-" 0 \
	"GetTenant crosses the bus twice (caller to bus to tierd, and back); Peer.Ping to tierd (answered by sd-bus, no handler) p50 $p50 us"
BENCH_FIGURE_SPREAD=$(bench_spread "${G99[@]}") BENCH_BASELINE_SPREAD=$(bench_spread "${B99[@]}")
bench_row 8d "D-Bus GetTenant p99 ($CALLS calls, $N tenants)" us "$(bench_median "${G99[@]}")" \
	"$(bench_median "${B99[@]}")" "the bus's own round trip (org.freedesktop.DBus.GetId) p99" "-" 0
tl_tierd_stop
