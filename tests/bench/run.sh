#!/bin/bash
# make bench: every benchmark, each row a figure for tierd against a
# baseline measured in the same run (ratio = figure / baseline), then one
# table and a JSON file (BENCH_OUT, default bench/results.json) with the
# machine's kernel, CPU count and the versions of the peers. None passes or
# fails on speed; a wrong byte read fails the run. BENCH_SCALE=small for a
# quick run; BENCH_ONLY="hot cold" for some benchmarks only.
set -u
cd "$(dirname "$0")/../.."
export BENCH_ROWS
BENCH_ROWS=$(mktemp /tmp/tierd-bench.XXXXXX)
OUT=${BENCH_OUT:-bench/results.json}
ORDER="hot cold events scale recovery verify scan import neighbour coldstart hydrate"
STATUS=0
for b in ${BENCH_ONLY:-$ORDER}; do
	[ -f "tests/bench/$b.sh" ] || { echo "bench: no benchmark '$b'"; STATUS=2; continue; }
	echo "== $b"
	bash "tests/bench/$b.sh"
	rc=$?
	[ "$rc" -eq 3 ] && STATUS=3 # wrong bytes
	[ "$rc" -ne 0 ] && echo "bench $b: did not complete (status $rc)" && [ "$STATUS" -eq 0 ] && STATUS=1
done
mkdir -p "$(dirname "$OUT")"
python3 - "$BENCH_ROWS" "$OUT" <<'PY'
import json, os, platform, subprocess, sys, time
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def version(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except Exception:
        return None
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
machine = {
    "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "kernel": platform.release(), "cpus": os.cpu_count(), "cpu": cpu,
    "memory_mib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20,
    "tierd": version(["git", "describe", "--always", "--dirty"]),
    "peers": {"curl": version(["curl", "--version"]), "rclone": version(["rclone", "--version"]),
              "s3fs": version(["s3fs", "--version"]), "radosgw": version(["radosgw", "--version"])},
    "scale": os.environ.get("BENCH_SCALE", "default"),
}
json.dump({"machine": machine, "rows": rows}, open(sys.argv[2], "w"), indent=1)
print()
print(f"{machine['date']}: Linux {machine['kernel']}, {machine['cpus']} CPUs ({cpu}), {machine['memory_mib']} MiB")
print(f"{'row':<5} {'what':<58} {'tierd':>12} {'baseline':>12} {'unit':<7} {'ratio':>7}  target")
for r in rows:
    if "error" in r:
        print(f"      WRONG BYTES READ")
        continue
    t = "-" if r["target"] is None else f"{r['target_op']} {r['target']:g} ({r['met']})"
    print(f"{r['id']:<5} {r['what'][:58]:<58} {r['figure']:>12g} {r['baseline']:>12g} {r['unit']:<7} {r['ratio']:>7.3f}  {t}")
    print(f"{'':<5}   baseline: {r['baseline_name']}; spread {r['figure_spread_pct']}% / {r['baseline_spread_pct']}% over {r['runs']} runs"
          + (f"; {r['note']}" if r['note'] else ""))
print(f"\n{len(rows)} rows; JSON in {sys.argv[2]}")
PY
rm -f "$BENCH_ROWS"
exit "$STATUS"
