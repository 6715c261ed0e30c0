#!/bin/bash
# make check: every test, ending with one line "N passed, N failed, N skipped".
# Each suite prints TAP-like lines ("ok ...", "not ok ...", "skip ..."); a
# suite that exits non-zero without saying why counts as one failure.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-$PWD/build}
export BUILD
PASS=0 FAIL=0 SKIP=0
LOG=$(mktemp /tmp/tierd-check.XXXXXX)

run_suite() { # NAME COMMAND...
	local name=$1 rc p f s
	shift
	echo "== $name"
	"$@" >"$LOG" 2>&1
	rc=$?
	cat "$LOG"
	p=$(grep -cE '^ok ' "$LOG")
	f=$(grep -cE '^not ok ' "$LOG")
	s=$(grep -cE '^skip ' "$LOG")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $name exited with status $rc"
		f=1
	fi
	PASS=$((PASS + p)) FAIL=$((FAIL + f)) SKIP=$((SKIP + s))
}

skip_suite() { echo "skip - $1: $2"; SKIP=$((SKIP + 1)); }

for t in "$BUILD"/unit/test-*; do run_suite "unit $(basename "$t")" "$t"; done
for t in "$BUILD"/unit-asan/test-*; do run_suite "unit (ASan+UBSan) $(basename "$t")" "$t"; done
for t in "$BUILD"/fuzz/fuzz-*; do
	run_suite "fuzz driver (ASan+UBSan) $(basename "$t")" "$t" 200000 "tests/fuzz/corpus/$(basename "$t")"
done
# libFuzzer, a few seconds each: new inputs go to a scratch directory given
# first, the seeds in tests/fuzz/corpus stay as they are.
libfuzz() { # BINARY
	local name scratch rc
	name=$(basename "$1") scratch=$(mktemp -d /tmp/tierd-fuzz.XXXXXX)
	"$1" -max_total_time="${FUZZ_SECONDS:-8}" -print_final_stats=1 "$scratch" "tests/fuzz/corpus/$name" 2>"$scratch.log"
	rc=$?
	grep -E "stat::number_of_executed_units|ERROR|SUMMARY" "$scratch.log" | sed 's/^/# /'
	if [ "$rc" -eq 0 ]; then echo "ok - libFuzzer $name: no crash, leak or undefined behaviour"
	else echo "not ok - libFuzzer $name found a crash (exit $rc): $(grep -m1 -E 'ERROR|SUMMARY' "$scratch.log")"; fi
	rm -rf "$scratch" "$scratch.log"
}
for t in "$BUILD"/libfuzzer/fuzz-*; do [ -x "$t" ] && run_suite "libFuzzer $(basename "$t")" libfuzz "$t"; done

run_suite "Kubernetes manifests, the OCI hook's config, the image's paths" bash tests/integration/manifests.sh
run_suite "static analysis: cppcheck and clang-tidy" bash tests/lint.sh
run_suite "documentation: man pages, the policy table, verbs and options against the code" bash tests/docs.sh

if [ "$(id -u)" -ne 0 ]; then
	skip_suite "integration" "needs root (loop devices, fanotify pre-content groups): run sudo make check"
else
	run_suite "refusals" bash tests/integration/refuse.sh
	run_suite "make install" bash tests/integration/install.sh
	run_suite "the journal: priorities and fields, on a journald of the test's own" bash tests/integration/journal.sh
	run_suite "remote stores (nginx WebDAV, Ceph RGW)" bash tests/integration/remote.sh
	run_suite "AWS credentials: env, file, web identity (RGW STS), container, IMDSv2; refreshed" bash tests/integration/awscreds.sh
	run_suite "the store's host name: every address, looked up again, never on the loop" bash tests/integration/dns.sh
	run_suite "proxies: a store reached through an HTTP proxy (tinyproxy), no_proxy" bash tests/integration/proxy.sh
	run_suite "access traces: recorded, merged, fetched ahead" bash tests/integration/traces.sh
	run_suite "the worker's sandbox" bash tests/integration/sandbox.sh
	run_suite "the D-Bus API through busctl, dbus-send and dbus-monitor" bash tests/integration/dbus.sh
	run_suite "tierctl on trees: find, du, -r, --files-from" bash tests/integration/cli.sh
	run_suite "containers: runc, the OCI hook, a worker per container" bash tests/integration/containers.sh
	run_suite "boot: the policy's filesystems, mounted and marked by tierd" bash tests/integration/boot.sh
	run_suite "faults: a store that misbehaves (tests/lib/faultserver.py)" bash tests/integration/faults.sh
	run_suite "attacks: paths, stubs, archive safety under SIGKILL" bash tests/integration/attacks.sh
	run_suite "isolation: a FIFO, a lease, status polled: other tenants' readers never wait" \
		bash tests/integration/isolation.sh
	run_suite "fail closed: a stopped, killed or absent tierd never lets a stub read as zeros" \
		bash tests/integration/failclosed.sh
	run_suite "local faults: a full filesystem, read-only mounts and snapshots, immutable files, a deleted subvolume, load" \
		bash tests/integration/localfaults.sh
	run_suite "durability: a power cut on the file store after a release" bash tests/integration/durability.sh
	run_suite "quotas and the policy engine" bash tests/integration/quota.sh
	run_suite "integrity: chunk manifests" bash tests/integration/integrity.sh
	run_suite "catalog: import on another node, --at, fencing" bash tests/integration/catalog.sh
	run_suite "catalog on Ceph RGW" bash tests/integration/catalog.sh s3
	run_suite "catalog: tierd SIGKILLed at random while it writes it" bash tests/integration/catalogkill.sh
	run_suite "gc: mark and sweep of the store" bash tests/integration/gc.sh
	run_suite "gc on Ceph RGW" bash tests/integration/gc.sh s3
	run_suite "crashes: worker and tierd killed, handover, fd limit" bash tests/integration/crash.sh
	run_suite "valgrind memcheck of the worker's fill path" bash tests/integration/valgrind.sh
	run_suite "core on btrfs, daemons built with ASan+UBSan" env BUILD="$BUILD/asan" bash tests/integration/core.sh btrfs
	for fs in btrfs xfs ext4; do
		if grep -qw "$fs" /proc/filesystems || modprobe "$fs" 2>/dev/null; then
			run_suite "core on $fs" bash tests/integration/core.sh "$fs"
		else
			skip_suite "core on $fs" "this kernel has no $fs"
		fi
	done
fi
rm -f "$LOG"
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" -eq 0 ]
