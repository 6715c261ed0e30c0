# Shared by the benchmarks (source it after tests/lib/lib.sh). Each row is
# a figure for tierd against a baseline measured in the same run; the ratio
# is figure / baseline and the target says which way is good. Rows go to
# $BENCH_ROWS (one JSON object a line) for run.sh's table and results file,
# and to stdout as they come. No row passes or fails on speed; a wrong byte
# read fails the run (bench_fail).

BENCH_SCALE=${BENCH_SCALE:-default}
BENCH_RUNS=${BENCH_RUNS:-5} # each row: the median of this many runs, interleaved with its baseline

# bench_size DEFAULT SMALL: the size for this scale.
bench_size() { if [ "$BENCH_SCALE" = small ]; then echo "$2"; else echo "$1"; fi; }

bench_drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

bench_now() { date +%s.%N; }
bench_since() { awk -v a="$1" -v b="$(bench_now)" 'BEGIN { printf "%.6f", b - a }'; }

# bench_median V...: the median; bench_spread V...: (max - min) / median, in %.
bench_median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# bench_pair_ratio N F1..FN B1..BN: the median of the N ratios Fi/Bi, each
# of a run and the baseline run next to it. Where the machine's own speed
# drifts between pairs (the disk under a loop device), this is steadier
# than the ratio of the medians.
bench_pair_ratio() {
	local n=$1 i r=()
	shift
	local v=("$@")
	for ((i = 0; i < n; i++)); do r+=("$(awk -v f="${v[i]}" -v b="${v[n + i]}" 'BEGIN { printf "%.3f", b ? f / b : 0 }')"); done
	bench_median "${r[@]}"
}
bench_spread() {
	local m; m=$(bench_median "$@")
	printf '%s\n' "$@" | sort -g | awk -v m="$m" 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.1f", m ? 100 * (hi - lo) / m : 0 }'
}

# bench_row ID WHAT UNIT FIGURE BASELINE BASELINE_NAME OP TARGET [NOTE]
#   FIGURE and BASELINE as medians; OP ">=" or "<=" for ratio vs TARGET
#   ("-" when the issue sets none). Set BENCH_FIGURE_SPREAD and
#   BENCH_BASELINE_SPREAD (in %) before calling, if measured, and
#   BENCH_RATIO for a ratio other than of the two medians (bench_pair_ratio).
bench_row() {
	local id=$1 what=$2 unit=$3 fig=$4 base=$5 bname=$6 op=$7 target=$8 note=${9:-}
	local ratio met
	ratio=${BENCH_RATIO:-$(awk -v f="$fig" -v b="$base" 'BEGIN { printf "%.3f", b ? f / b : 0 }')}
	met=$(awk -v r="$ratio" -v op="$op" -v t="$target" 'BEGIN {
		if (op == "-") print "n/a"; else if ((op == ">=" && r >= t) || (op == "<=" && r <= t)) print "yes"; else print "no" }')
	printf '%-5s %-58s %12s %12s %-7s %7s  target %s %s: %s\n' "$id" "$what" "$fig" "$base" "$unit" "$ratio" "$op" "$target" "$met"
	[ -z "$note" ] || printf '      (%s)\n' "$note"
	[ -n "${BENCH_ROWS:-}" ] || return 0
	python3 - "$BENCH_ROWS" "$id" "$what" "$unit" "$fig" "$base" "$bname" "$ratio" "$op" "$target" "$met" "$note" \
		"$BENCH_RUNS" "${BENCH_FIGURE_SPREAD:-0}" "${BENCH_BASELINE_SPREAD:-0}" "$BENCH_SCALE" <<'PY'
import json, sys
(out, id_, what, unit, fig, base, bname, ratio, op, target, met, note, runs, fsp, bsp, scale) = sys.argv[1:]
row = {"id": id_, "what": what, "unit": unit, "figure": float(fig), "baseline": float(base), "baseline_name": bname,
       "ratio": float(ratio), "target_op": op, "target": None if op == "-" else float(target), "met": met,
       "note": note, "runs": int(runs), "figure_spread_pct": float(fsp), "baseline_spread_pct": float(bsp),
       "scale": scale}
open(out, "a").write(json.dumps(row) + "\n")
PY
	BENCH_FIGURE_SPREAD= BENCH_BASELINE_SPREAD=
}

# A wrong byte ends the run: benchmarks check what they read.
bench_fail() { echo "bench: WRONG BYTES: $*" >&2; [ -n "${BENCH_ROWS:-}" ] && echo '{"error": "wrong bytes"}' >>"$BENCH_ROWS"; exit 3; }

# bench_same FILE SHA256: the file's bytes are the original's.
bench_same() { [ "$(sha256sum <"$1" | cut -d' ' -f1)" = "$2" ] || bench_fail "$1"; }

# bench_cgroup VAR NAME: VAR names a CPU cgroup of the run's own, as a
# container runtime gives every pod (cgroup v2 with the cpu controller, else
# v1's cpu hierarchy), or is empty where there is none. Removed at exit
# (tl_cleanup); on cgroup v2, the cpu controller enabled at the root
# stays so. bench_in_cgroup DIR CMD...: CMD runs in it (DIR empty: where
# we are); bench_spawn DIR CMD...: the same in the background, its pid in
# BENCH_PID.
bench_cgroup() {
	local d=
	if grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
		grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
		grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control && d=/sys/fs/cgroup/tierd-bench-$2-$$
	elif [ -w /sys/fs/cgroup/cpu/cgroup.procs ]; then
		d=/sys/fs/cgroup/cpu/tierd-bench-$2-$$
	fi
	if [ -n "$d" ] && mkdir -p "$d" 2>/dev/null; then TL_CGROUPS+=("$d"); else d=; fi
	printf -v "$1" '%s' "$d"
}
bench_in_cgroup() { bench_spawn "$@" && wait "$BENCH_PID"; }
bench_spawn() {
	local d=$1
	shift
	if [ -z "$d" ]; then "$@" & else
		bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' bench_spawn "$d" "$@" &
	fi
	BENCH_PID=$!
}


# bench_cold_rounds N OUT CGROUP VIEW ORIG: N rounds of $ROUND cold 4 KiB
# first reads (tests/cold-reads) of VIEW/b$NEXT, VIEW/b$((NEXT + 1))...,
# checked against ORIG/b*, in CGROUP (empty: where we are); NEXT moves on.
# The latencies (us) are appended to OUT.lat, each round's p99 to OUT.p99.
# bench_pct FILE Q: quantile Q (0.5, 0.99) of FILE's latencies, in ms.
bench_cold_rounds() {
	local n=$1 out=$2 cg=$3 view=$4 orig=$5
	for _ in $(seq "$n"); do
		bench_in_cgroup "$cg" timeout 300 "$BUILD/tests/cold-reads" "$view" "$orig" "$NEXT" "$ROUND" >"$out.round" ||
			bench_fail "the cold reads ($?)"
		NEXT=$((NEXT + ROUND))
		cat "$out.round" >>"$out.lat"
		sort -n "$out.round" | awk '{ v[NR] = $1 } END { print v[int(NR * 0.99 + 0.999)] }' >>"$out.p99"
	done
}
bench_pct() { sort -n "$1" | awk -v p="$2" '{ v[NR] = $1 } END { i = int(NR * p + 0.999); if (i < 1) i = 1; print v[i] / 1000 }'; }
