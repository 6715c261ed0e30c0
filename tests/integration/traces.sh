#!/bin/bash
# Access traces on the real kernel: a host trace records the first touches
# of the tenant's readers in its window and stores them in the tenant's
# store (file://), merged across runs; the next start fetches exactly those
# ranges ahead of the readers (before any read), skips a file whose content
# changed since (logged), refuses a trace object that is not one, and
# leaves files nobody touched alone.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
# A trace's object: "trace/" and the SHA-256 of its name.
tkey() { printf '%s' "$1" | sha256sum | cut -c1-64; }
echo "# access traces and prefetch (btrfs, file:// store)"
TIERCTL=$BUILD/tierctl PREAD=$BUILD/tests/pread-at
FS=$TL_DIR/fs W=$TL_DIR/views/web STORE=$TL_DIR/store/web ORIG=$TL_DIR/orig
mkdir -p "$ORIG" "$STORE"

tl_loopfs btrfs 1G "$FS" || { not_ok "mkfs"; tl_summary; exit 1; }
tl_subvol btrfs "$FS/web"
tl_subvol btrfs "$FS/slow"
tl_subvol btrfs "$FS/prog"
tl_subvol btrfs "$FS/progq"
tl_subvol btrfs "$FS/paced"
tl_subvol btrfs "$FS/pinh"
mkdir -p "$TL_DIR/store/prog" "$TL_DIR/store/progq"
# Tenant slow's store can hold its answers (tests/lib/faultserver.py, a
# fake for a store that stalls), for a reader racing queued prefetches.
PORT=${FAULT_PORT:-18197} CONTROL=$TL_DIR/fault FLOG=$TL_DIR/fault.log
mkdir -p "$TL_DIR/slowstore"; echo none >"$CONTROL"
python3 "$TL_ROOT/tests/lib/faultserver.py" "$PORT" "$TL_DIR/slowstore" "$CONTROL" "$FLOG" >"$TL_DIR/server.out" 2>&1 &
TL_PIDS+=("$!")
for _ in $(seq 50); do grep -q ready "$TL_DIR/server.out" 2>/dev/null && break; sleep 0.1; done
cat >"$TL_DIR/policy.json" <<EOF2
{"version": 1,
 "defaults": {"chunk": "1M", "readahead": "1M", "small_file": "64K"},
 "tenants": [{"name": "web", "subvolume": "$FS/web", "mount": "$W", "backend": "file://$STORE",
              "trace_window": "3s"},
             {"name": "slow", "subvolume": "$FS/slow", "mount": "$TL_DIR/views/slow",
              "backend": "http://127.0.0.1:$PORT/t", "connect_timeout": "2s", "stall_timeout": "20s",
              "trace_window": "3s"},
             {"name": "prog", "subvolume": "$FS/prog", "mount": "$TL_DIR/views/prog", "backend": "file://$TL_DIR/store/prog",
              "restore": "progressive", "prefetch_rate": "4M"},
             {"name": "progq", "subvolume": "$FS/progq", "mount": "$TL_DIR/views/progq", "backend": "file://$TL_DIR/store/progq",
              "restore": "progressive", "quota": "24M"},
             {"name": "paced", "subvolume": "$FS/paced", "mount": "$TL_DIR/views/paced", "backend": "file://$TL_DIR/store/paced",
              "restore_rate": "4M", "trace_window": "0s"},
             {"name": "pinh", "subvolume": "$FS/pinh", "mount": "$TL_DIR/views/pinh", "backend": "file://$TL_DIR/store/pinh",
              "pin": ["keep/*"], "hydrate_pinned": true}]}
EOF2
tl_dbus_start || { not_ok "dbus-daemon"; tl_summary; exit 1; }
check "tierd starts" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }

mkdir -p "$W/lib" "$W/bin"
for f in lib/a.so lib/b.so bin/app bin/unused; do head -c 8M /dev/urandom >"$ORIG/${f//\//_}"; cp "$ORIG/${f//\//_}" "$W/$f"; done
release_all() { timeout 60 "$TIERCTL" archive "$W"/lib/* "$W"/bin/* >/dev/null &&
	timeout 60 "$TIERCTL" release "$W"/lib/* "$W"/bin/* >/dev/null; }
check "files archived and released" release_all
same() { cmp -s "$W/$1" "$ORIG/${1//\//_}"; }
prop() { busctl --system get-property org.tierd1 /org/tierd1/tenant/web org.tierd1.Tenant "$1" | cut -d' ' -f2; }

# No trace yet: said, with tierctl's failure status, not a hang.
out=$(timeout 20 "$TIERCTL" trace show web app 2>&1); rc=$?
check "trace show of a trace never stored fails with status 1 (got $rc)" test "$rc" -eq 1
check "... saying so" grep -q "no trace of that name is stored yet" <<<"$out"
out=$(timeout 20 "$TIERCTL" trace start web ../app 2>&1); rc=$?
check "a trace name with '..' is refused with status 1 (got $rc), saying why" \
	bash -c "[ $rc -eq 1 ] && grep -q 'a trace name has' <<<'$out'"
out=$(timeout 20 "$TIERCTL" trace start paced app 2>&1); rc=$?
check "trace start on a tenant whose traces are off (trace_window 0s) fails with status 1 (got $rc), saying so" \
	bash -c "[ $rc -eq 1 ] && grep -q 'tenant paced: traces are off' <<<'$out'"

# Run 1: the app reads bin/app's first chunk, then all of lib/a.so.
tl_log_mark
check "trace start web app" timeout 20 "$TIERCTL" trace start web app
check "... nothing stored yet to fetch ahead: said" tl_logged 10 "trace app: none stored yet"
read1() {
	timeout 20 "$PREAD" "$W/bin/app" 0 4096 >/dev/null && timeout 20 cat "$W/lib/a.so" >/dev/null
}
check "run 1 reads bin/app's first 4 KiB and lib/a.so" read1
check "the window ends and the trace is stored: run 1, 2 files" tl_logged 20 "trace app stored: run 1, 2 files"
check "... as an object of the tenant's store" test -s "$STORE/trace/$(tkey app)"
out=$(timeout 20 "$TIERCTL" trace show web app --json)
check "trace show: 1 run, bin/app then lib/a.so, in first-touch order" \
	python3 -c "
import json, sys
t = json.loads(sys.argv[1])
paths = [f['path'] for f in t['files']]
assert t['runs'] == 1 and paths == ['bin/app', 'lib/a.so'], t
assert t['files'][0]['bytes'] == 1 << 20 and t['files'][1]['bytes'] == 8 << 20, t
" "$out"

# Run 2: everything released again; the trace's ranges come before any read.
check "released again" release_all
for f in bin/app lib/a.so lib/b.so bin/unused; do
	check "$f holds no data before run 2" test "$(tl_allocated "$W/$f")" -eq 0
done
tl_log_mark
check "trace start web app (run 2)" timeout 20 "$TIERCTL" trace start web app
check "... fetched ahead: 2 files, nothing skipped or failed" \
	tl_logged 20 "trace app fetched ahead of the host in"
check "... the log line counts 2 files, 0 skipped, 0 failed" \
	bash -c "tail -n +$((TL_LOG_MARK + 1)) '$TL_TIERD_LOG' | grep 'trace app fetched ahead' | grep -q ': 2 files (9437184 bytes), 0 already here, 0 skipped, 0 failed'"
check "lib/a.so is whole before anyone read it" test "$(tl_allocated "$W/lib/a.so")" -eq $((8 << 20))
check "bin/app has its first chunk, and only that" test "$(tl_allocated "$W/bin/app")" -eq $((1 << 20))
check "lib/b.so and bin/unused, never read, are left alone" \
	bash -c "[ $(tl_allocated "$W/lib/b.so") -eq 0 ] && [ $(tl_allocated "$W/bin/unused") -eq 0 ]"
check "run 2 reads the same" read1
check "... lib/a.so is the original" same lib/a.so
check "run 2 is merged: 2 runs" tl_logged 20 "trace app stored: run 2, 2 files"
check "PrefetchedBytes counts the 9 MiB fetched ahead ($(prop PrefetchedBytes))" test "$(prop PrefetchedBytes)" -eq 9437184
check "PrefetchHits counts the reads that found their bytes here ($(prop PrefetchHits))" test "$(prop PrefetchHits)" -ge 2
check "PrefetchWastedBytes is 0: both files were read" test "$(prop PrefetchWastedBytes)" -eq 0
out=$(timeout 20 "$TIERCTL" trace show web app --json)
check "trace show: both files seen in 2 runs (reads of prefetched files are heard)" \
	python3 -c "
import json, sys
t = json.loads(sys.argv[1])
assert t['runs'] == 2 and [f['runs'] for f in t['files']] == [2, 2], t
" "$out"

# lib/a.so's content changes: the next prefetch skips it, and says so.
head -c 8M /dev/urandom >"$ORIG/lib_a.so"
cp "$ORIG/lib_a.so" "$W/lib/a.so"
check "lib/a.so rewritten, archived and everything released" release_all
tl_log_mark
check "trace start web app (run 3)" timeout 20 "$TIERCTL" trace start web app
check "... lib/a.so skipped: its content changed since the trace" \
	tl_logged 20 "trace app: lib/a.so skipped: its content changed since the trace"
check "... and not fetched" test "$(tl_allocated "$W/lib/a.so")" -eq 0
check "... bin/app still is" tl_eventually test "$(tl_allocated "$W/bin/app")" -eq $((1 << 20))
check "... reading the new lib/a.so gives its new bytes" bash -c "timeout 20 cat '$W/lib/a.so' | cmp -s - '$ORIG/lib_a.so'"
check "run 3 stored" tl_logged 20 "trace app stored: run 3"
check "... bin/app's chunk, fetched ahead and not read, counted wasted" \
	tl_logged 20 "1048576 bytes fetched ahead in files this run did not read"
check "... PrefetchWastedBytes 1 MiB, in tierctl metrics too" \
	bash -c "[ \$(busctl --system get-property org.tierd1 /org/tierd1/tenant/web org.tierd1.Tenant PrefetchWastedBytes | cut -d' ' -f2) -eq 1048576 ] &&
		timeout 20 '$TIERCTL' metrics | grep -qx 'tierd_prefetch_wasted_bytes_total{tenant=\"web\"} 1048576'"

# A trace object that is not one: refused, nothing fetched, said.
mkdir -p "$STORE/trace"
printf '{"tierd_trace":1,"name":"bad","runs":1,"files":[{"path":"../../etc/passwd","key":"k","size":10,"ranges":[[0,10,1,1,0]]}]}' >"$STORE/trace/$(tkey bad)"
tl_log_mark
check "trace start web bad" timeout 20 "$TIERCTL" trace start web bad
check "... the object is refused: a path out of the subvolume" \
	tl_logged 20 "trace bad in the store is refused: a path is not one beneath a subvolume"
out=$(timeout 20 "$TIERCTL" trace show web bad 2>&1); rc=$?
check "trace show of it fails with status 1 (got $rc), saying it is refused" \
	bash -c "[ $rc -eq 1 ] && grep -q 'the stored trace is refused' <<<'$out'"
out=$(timeout 20 "$TIERCTL" trace start web other 2>&1); rc=$?
check "a second host trace while one records is refused with status 1 (got $rc), saying why" \
	bash -c "[ $rc -eq 1 ] && grep -q 'a host trace is running already' <<<'$out'"
check "tierd is still serving: bin/unused reads right" bash -c "timeout 20 cat '$W/bin/unused' | cmp -s - '$ORIG/bin_unused'"

# A hostile trace: 3500 paths that are hard links to one released file,
# each with 256 one-byte ranges. Fetched once; the loop is never held
# (every 16 files it lets other events in): cold reads of other files all
# through the prefetch are served as if alone (they took seconds before).
mkdir -p "$W/links" "$W/probes"
head -c 4M /dev/urandom >"$ORIG/linked"; cp "$ORIG/linked" "$W/links/l0"
for i in $(seq 40); do head -c 64K /dev/urandom >"$W/probes/p$i"; done
check "a file and 40 probe files archived and released" \
	bash -c "timeout 60 '$TIERCTL' archive '$W/links/l0' '$W'/probes/* >/dev/null && timeout 60 '$TIERCTL' release '$W/links/l0' '$W'/probes/* >/dev/null"
KEY=$(getfattr --only-values -n security.tierd "$W/links/l0" | sed -n 's/^key=\(sha256\/[0-9a-f]*\).*/\1/p')
python3 - "$STORE/trace/$(tkey links)" "$KEY" "$W/links" <<'PY'
import json, os, sys
n = 3500
for i in range(1, n):
    os.link(sys.argv[3] + "/l0", sys.argv[3] + "/l%d" % i)
files = [{"path": "links/l%d" % i, "key": sys.argv[2], "size": 4 << 20,
          "ranges": [[k, k + 1, 1, 1, 0] for k in range(256)]} for i in range(n)]
json.dump({"tierd_trace": 1, "name": "links", "runs": 1, "files": files}, open(sys.argv[1], "w"), separators=(",", ":"))
PY
check "... 3500 hard links to it, and a trace of $(($(stat -c %s "$STORE/trace/$(tkey links)") >> 20)) MiB naming them all" \
	test "$(stat -c %h "$W/links/l0")" = 3500
check "... once trace bad's window is over" tl_logged 20 "trace bad stored"
# probe_reads: a cold 4 KiB read of each probe in turn until the prefetch
# is over; the slowest, in ms, to $TL_DIR/slowest (a read over 10 s: 10000).
probe_reads() {
	local slowest=0 ms t0 i
	for i in $(seq 40); do
		t0=$(date +%s%N)
		timeout 10 "$PREAD" "$W/probes/p$i" 0 4096 >/dev/null || { slowest=10000; break; }
		ms=$((($(date +%s%N) - t0) / 1000000))
		[ "$ms" -gt "$slowest" ] && slowest=$ms
		tail -n +$((TL_LOG_MARK + 1)) "$TL_TIERD_LOG" | grep -q "trace links fetched ahead" && break
		sleep 0.05
	done
	echo "$slowest" >"$TL_DIR/slowest"
	echo "# $i probe reads during the prefetch, the slowest $slowest ms"
}
tl_log_mark
check "trace start web links" timeout 20 "$TIERCTL" trace start web links
probe_reads
check "cold reads of other files all through it are served within 1 s (slowest: $(cat "$TL_DIR/slowest") ms)" \
	test "$(cat "$TL_DIR/slowest")" -lt 1000
check "... the prefetch ends, none skipped or failed" tl_logged 60 "3500 files (896000 bytes), 0 already here, 0 skipped, 0 failed"
check "... the file came in once, right" cmp -s "$W/links/l3499" "$ORIG/linked"

# A reader whose range a queued prefetch fill holds does not wait behind
# other prefetches: three traced files stall at the store (a fake, for a
# store that holds its answers), the reader of the fourth is served at once.
S=$TL_DIR/views/slow
for f in a b c d; do head -c 4M /dev/urandom >"$ORIG/slow_$f"; done
cp "$ORIG"/slow_a "$S/a"; cp "$ORIG"/slow_b "$S/b"; cp "$ORIG"/slow_c "$S/c"; cp "$ORIG"/slow_d "$S/d"
slow_release() { timeout 60 "$TIERCTL" archive "$S"/? >/dev/null && timeout 60 "$TIERCTL" release "$S"/? >/dev/null; }
check "its files a, b, c, d archived and released" slow_release
tl_log_mark
check "trace start slow abcd" timeout 20 "$TIERCTL" trace start slow abcd
check "... a, b, c, d read in order" bash -c "for f in a b c d; do timeout 20 cat '$S'/\$f >/dev/null || exit 1; done"
check "... the trace is stored" tl_logged 20 "trace abcd stored: run 1, 4 files"
# The lock goes after the trace is stored, read and compared first: polled.
check "... and its lock deleted after, on a store that says no ages (no Last-Modified)" \
	tl_eventually_for 10 bash -c "[ -s '$TL_DIR/slowstore/t/trace/$(tkey abcd)' ] && [ ! -e '$TL_DIR/slowstore/t/tracelock/abcd' ]"
check "released again" slow_release
skey() { getfattr --only-values -n security.tierd "$S/$1" | sed -n 's/^key=sha256\/\([0-9a-f]*\).*/\1/p'; }
printf 'stall 100 %s\nstall 100 %s\nstall 100 %s\n' "$(skey a)" "$(skey b)" "$(skey c)" >"$CONTROL"
tl_log_mark
check "trace start slow abcd, with a, b and c stalling at the store" timeout 20 "$TIERCTL" trace start slow abcd
sleep 0.5
t0=$(date +%s%N)
check "a read of d (its prefetch queued behind the three) is served within 5 s" \
	bash -c "timeout 5 '$PREAD' '$S/d' 0 4096 >/dev/null"
echo "# the read of d took $((($(date +%s%N) - t0) / 1000000)) ms"
check "... its bytes are d's" cmp -s <(timeout 20 cat "$S/d") "$ORIG/slow_d"
echo none >"$CONTROL"

# "restore": "progressive": a file read in part comes whole next, in the
# background at prefetch priority, with no read of the rest; at most
# HYDRATE_FILES at a time, the others queued; at most prefetch_rate (4M)
# a second, averaged, after a burst of a second's worth: the 20 files'
# other 20 MiB take at least 4 s (unpaced, well under a second here).
P=$TL_DIR/views/prog
head -c 12M /dev/urandom >"$ORIG/prog_big"; cp "$ORIG/prog_big" "$P/big"
for i in $(seq 20); do head -c 2M /dev/urandom >"$ORIG/prog_s$i"; cp "$ORIG/prog_s$i" "$P/s$i"; done
check "tenant prog's files archived and released" bash -c "timeout 60 '$TIERCTL' archive '$P'/* >/dev/null &&
	timeout 60 '$TIERCTL' release '$P'/* >/dev/null"
whole() { # FILE...: every one whole (all its bytes local)
	timeout 20 "$TIERCTL" status --json "$@" | python3 -c "
import json, sys
fs = json.load(sys.stdin)
sys.exit(0 if len(fs) == len(sys.argv) - 1 and all(f['resident'] == f['size'] for f in fs) else 1)" "$@"
}
pprop() { busctl --system get-property org.tierd1 /org/tierd1/tenant/prog org.tierd1.Tenant "$1" | cut -d' ' -f2; }
check "a 4 KiB read in the middle of a released 12 MiB file is served, its bytes right" \
	bash -c "cmp -s <(timeout 20 '$PREAD' '$P/big' 8388608 4096) <(tail -c +8388609 '$ORIG/prog_big' | head -c 4096)"
check "... and the whole file comes next, unread (within 20 s)" tl_eventually_for 20 whole "$P/big"
check "... its bytes the original's" cmp -s "$P/big" "$ORIG/prog_big"
check "HydratedFiles counts it" tl_eventually_for 10 bash -c "[ \$(busctl --system get-property org.tierd1 /org/tierd1/tenant/prog org.tierd1.Tenant HydratedFiles | cut -d' ' -f2) -eq 1 ]"
t0=$(date +%s%N)
check "a 4 KiB read of each of 20 more released files" \
	bash -c "for i in \$(seq 20); do timeout 20 '$PREAD' '$P/s'\$i 1048576 4096 >/dev/null || exit 1; done"
check "... all 20 come whole, queued behind the two fetched at a time (within 60 s)" \
	tl_eventually_for 60 whole $(for i in $(seq 20); do echo "$P/s$i"; done)
took=$((($(date +%s%N) - t0) / 1000000))
check "... paced by prefetch_rate: 20 MiB at 4 MiB/s took $took ms, at least 3,000" test "$took" -ge 3000
check "... right" bash -c "for i in \$(seq 20); do cmp -s '$P/s'\$i '$ORIG/prog_s'\$i || exit 1; done"
check "... HydratedFiles is 21" tl_eventually_for 10 bash -c "[ \$(busctl --system get-property org.tierd1 /org/tierd1/tenant/prog org.tierd1.Tenant HydratedFiles | cut -d' ' -f2) -eq 21 ]"
echo "# HydratedFiles: $(pprop HydratedFiles)"

# restore_rate: readers' own fills at most 4 MiB a second, averaged, after
# a burst of a second's worth: 16 MiB read takes at least 3 s (unpaced,
# well under a second here); every read gets its bytes, none an error.
R=$TL_DIR/views/paced
for i in $(seq 16); do head -c 1M /dev/urandom >"$ORIG/paced_$i"; cp "$ORIG/paced_$i" "$R/f$i"; done
check "tenant paced's files archived and released" bash -c "timeout 60 '$TIERCTL' archive '$R'/* >/dev/null &&
	timeout 60 '$TIERCTL' release '$R'/* >/dev/null"
t0=$(date +%s%N)
check "16 released files of 1 MiB read under restore_rate 4M, each right" \
	bash -c "for i in \$(seq 16); do timeout 30 cmp -s '$R/f'\$i '$ORIG/paced_'\$i || exit 1; done"
took=$((($(date +%s%N) - t0) / 1000000))
check "... paced: 16 MiB at 4 MiB/s took $took ms, at least 2,500" test "$took" -ge 2500
check "... and another tenant's reads, meanwhile, are not held behind them" \
	bash -c "'$TIERCTL' release '$R'/* >/dev/null; (for i in \$(seq 16); do cat '$R/f'\$i >/dev/null; done) &
		'$TIERCTL' release '$W/lib/a.so' >/dev/null && timeout 5 cmp -s '$W/lib/a.so' '$ORIG/lib_a.so'; rc=\$?; wait; exit \$rc"

# A policy reload that lifts restore_rate lets the readers it parked go at
# once: at 64K a second, the second 1 MiB file would wait some 15 s.
sed -i 's/"restore_rate": "4M"/"restore_rate": "64K"/' "$TL_DIR/policy.json"
check "restore_rate 64K: tierctl reload" timeout 20 "$TIERCTL" reload
# park_reader N: R's files released, a reader of the first N (2 or 3) in
# the background (slow_reader), parked by restore_rate 64K on the second.
park_reader() {
	READ_N=$1
	"$TIERCTL" release "$R"/* >/dev/null
	(for i in $(seq "$READ_N"); do cat "$R/f$i" >/dev/null || exit 1; done) &
	slow_reader=$!
	sleep 2
	check "... a reader of $READ_N files is parked on the second" kill -0 "$slow_reader"
}
# reader_goes_on WHY: the parked reader goes on within 10 s, its bytes right.
reader_goes_on() {
	local rc=0 st=0
	timeout 10 bash -c "while kill -0 $slow_reader 2>/dev/null; do sleep 0.1; done" || rc=$?
	check "$1: the parked reader goes on at once, not at 64K a second (within 10 s)" test "$rc" = 0
	kill "$slow_reader" 2>/dev/null # a reader still parked fails the check above, never hangs the suite
	wait "$slow_reader" || st=$?
	check "... its reads all succeeded (status $st)" test "$st" = 0
	# Through the subvolume: tierd takes its views away when it stops.
	check "... each file right" bash -c "for i in \$(seq $READ_N); do cmp -s '$FS/paced/f'\$i '$ORIG/paced_'\$i || exit 1; done"
}
park_reader 3
sed -i 's/"restore_rate": "64K"/"restore_rate": "0"/' "$TL_DIR/policy.json"
check "restore_rate 0: tierctl reload" timeout 20 "$TIERCTL" reload
reader_goes_on "reload"

# Under a quota a hydration takes only free room below the high watermark
# (0.9 of 24M): it never makes the tenant release other files. A 12 MiB
# file released, four of 3 MiB archived and resident (12 MiB): the whole
# file would fit the quota but not the watermark.
Q=$TL_DIR/views/progq
for f in r1 r2 r3 r4 big; do head -c $([ $f = big ] && echo 12M || echo 3M) /dev/urandom >"$ORIG/progq_$f"; done
cp "$ORIG/progq_big" "$Q/big"
check "tenant progq: a 12 MiB file released, four of 3 MiB archived and resident" \
	bash -c "timeout 60 '$TIERCTL' archive '$Q/big' >/dev/null && timeout 60 '$TIERCTL' release '$Q/big' >/dev/null &&
		for f in r1 r2 r3 r4; do cp '$ORIG'/progq_\$f '$Q'/\$f; done && timeout 60 '$TIERCTL' archive '$Q'/r? >/dev/null"
tl_log_mark
check "a 4 KiB read of the released one is served, right" \
	bash -c "cmp -s <(timeout 20 '$PREAD' '$Q/big' 0 4096) <(head -c 4096 '$ORIG/progq_big')"
check "... it stays partial: no free room under the high watermark, said" \
	tl_logged 20 "stays partial: no free room under the quota's high watermark"
qprop() { busctl --system get-property org.tierd1 /org/tierd1/tenant/progq org.tierd1.Tenant "$1" | cut -d' ' -f2; }
check "... and nothing was released for it (QuotaReleases $(qprop QuotaReleases))" test "$(qprop QuotaReleases)" -eq 0
check "... the four others are still whole" whole "$Q/r1" "$Q/r2" "$Q/r3" "$Q/r4"

# "hydrate_pinned": pinned files only (a glob's, tierctl pin's) read in
# part come whole next; a file no pin names stays as its read left it.
H=$TL_DIR/views/pinh
mkdir -p "$H/keep" "$H/other"
for f in keep/a other/b other/c; do head -c 12M /dev/urandom >"$ORIG/pinh_${f//\//_}"; cp "$ORIG/pinh_${f//\//_}" "$H/$f"; done
check "tenant pinh: keep/a (pinned by a glob), other/b, other/c archived and released, other/c then pinned" \
	bash -c "timeout 60 '$TIERCTL' archive '$H'/keep/a '$H'/other/b '$H'/other/c >/dev/null &&
		timeout 60 '$TIERCTL' release '$H'/keep/a '$H'/other/b '$H'/other/c >/dev/null &&
		timeout 20 '$TIERCTL' pin '$H'/other/c >/dev/null"
for f in keep/a other/b other/c; do
	check "a 4 KiB read in the middle of $f is served, right" \
		bash -c "cmp -s <(timeout 20 '$PREAD' '$H/$f' 8388608 4096) <(tail -c +8388609 '$ORIG/pinh_${f//\//_}' | head -c 4096)"
done
check "... keep/a and other/c come whole next (within 20 s)" tl_eventually_for 20 whole "$H/keep/a" "$H/other/c"
check "... with their bytes" bash -c "cmp -s '$H/keep/a' '$ORIG/pinh_keep_a' && cmp -s '$H/other/c' '$ORIG/pinh_other_c'"
sleep 1
check "... other/b, pinned by nothing, stays partial ($("$BUILD/tests/data-bytes" "$H/other/b") bytes here)" \
	test "$("$BUILD/tests/data-bytes" "$H/other/b")" -lt $((12 << 20))

# trace_window "0s" by a reload ends a recording already open: nothing
# more is recorded, and its run is not stored when its window would end.
tl_log_mark
check "trace start web late" timeout 20 "$TIERCTL" trace start web late
check "... reads while it records" bash -c "timeout 20 '$PREAD' '$W/lib/b.so' 0 4096 >/dev/null"
web_window() { sed -i "/\"name\": \"web\"/,/trace_window/ s/\"trace_window\": \"[0-9]*s\"/\"trace_window\": \"$1\"/" "$TL_DIR/policy.json" &&
	grep -q "\"trace_window\": \"$1\"" "$TL_DIR/policy.json" && timeout 20 "$TIERCTL" reload; }
check "web's trace_window 0s: tierctl reload" web_window 0s
check "... the open recording ends, said" tl_logged 10 "tenant web: traces turned off (trace_window 0s): "
sleep 4 # past the 3 s window it had
check "... and its run is never stored" bash -c "! tail -n +$((TL_LOG_MARK + 1)) '$TL_TIERD_LOG' | grep -q 'trace late stored' && [ ! -e '$STORE/trace/$(tkey late)' ]"
out=$(timeout 20 "$TIERCTL" trace start web late 2>&1); rc=$?
check "... a new one is refused with status 1 (got $rc)" bash -c "[ $rc -eq 1 ] && grep -q 'tenant web: traces are off' <<<'$out'"
check "web's trace_window 3s again: tierctl reload" web_window 3s

# Two nodes saving runs of one name at once would each merge into the same
# stored trace, and one run would be lost: a save holds the name's lock
# in the store (tracelock/NAME, created only if absent). Another node's
# lock is played here by the object written by hand, as that node writes it.
# Each run reads a file of its own: a file one run made whole is not heard
# by the next.
mkdir -p "$W/lk"
for n in evicted held stale again atstop future atsave; do head -c 2M /dev/urandom >"$ORIG/lk_$n"; cp "$ORIG/lk_$n" "$W/lk/$n"; done
check "a file for each of the lock's runs, archived and released" \
	bash -c "timeout 60 '$TIERCTL' archive '$W'/lk/* >/dev/null && timeout 60 '$TIERCTL' release '$W'/lk/* >/dev/null"
check "... run 1's save left no lock behind" test ! -e "$STORE/tracelock/app"
lock_of() { # NAME TAKEN [MTIME]: another node's lock of trace NAME, taken at TAKEN (epoch s)
	mkdir -p "$STORE/tracelock" && printf 'tierd trace lock\nnode=node-b\npid=7\ntaken=%s\n' "$2" >"$STORE/tracelock/$1" &&
		{ [ -z "${3:-}" ] || touch -d "$3" "$STORE/tracelock/$1"; }
}
run_of() { # NAME: a run of trace NAME that reads lk/NAME's first 4 KiB (its window, 3 s, ends by itself)
	timeout 20 "$TIERCTL" trace start web "$1" &&
		timeout 20 "$PREAD" "$W/lk/$1" 0 4096 | cmp -s - <(head -c 4096 "$ORIG/lk_$1")
}
# The files are named when the window closes: one whose dentry memory
# pressure dropped meanwhile is named all the same (its touch kept its
# parent's handle too), not left out as deleted.
tl_log_mark
check "a run of trace 'evicted'" run_of evicted
for _ in 1 2 3 4 5 6; do sync && echo 2 >/proc/sys/vm/drop_caches && sleep 0.5; done
check "... dentries dropped until its window closed: the run stored, with its file" \
	tl_logged 20 "trace evicted stored: run 1, 1 files"
check "... none left out" bash -c "! tail -n +$((TL_LOG_MARK + 1)) '$TL_TIERD_LOG' | grep -q 'trace evicted: .* touches left out'"
tl_log_mark
lock_of held "$(date +%s)"
check "a run of trace 'held' while node-b holds its lock" run_of held
check "... its save waits for node-b's, said with who holds it" tl_logged 20 "trace held: waits for another save of it to end (node node-b since"
sleep 2
check "... and writes nothing meanwhile (2 s more)" test ! -e "$STORE/trace/$(tkey held)"
rm -f "$STORE/tracelock/held"
check "... node-b's lock gone: the run is stored" tl_logged 20 "trace held stored: run 1, 1 files"
check "... and its own lock is gone after" tl_eventually_for 10 bash -c "[ -s '$STORE/trace/$(tkey held)' ] && [ ! -e '$STORE/tracelock/held' ]"
tl_log_mark
lock_of stale "$(($(date +%s) - 1000))" "-20 min"
check "a run of trace 'stale': node-b's lock says 1000 s old, written 20 min ago" run_of stale
check "... it is deleted, said" tl_logged 20 "trace stale: a lock older than 120 s deleted"
check "... and the run stored" tl_logged 20 "trace stale stored: run 1, 1 files"
tl_log_mark
lock_of again "$(($(date +%s) - 1000))"
check "a run of trace 'again': the lock says 1000 s old, but the store saw it written just now" run_of again
check "... it is not deleted: the save waits" tl_logged 20 "trace again: waits for another save of it to end (a lock taken again)"
check "... the lock is still there" test -s "$STORE/tracelock/again"
rm -f "$STORE/tracelock/again"
check "... node-b's lock gone: the run is stored" tl_logged 20 "trace again stored: run 1, 1 files"
# A run still waiting for a lock at the stop below is dropped: it holds
# nothing in the worker's hands that would end it, nor the stop.
tl_log_mark
lock_of atstop "$(date +%s)"
check "a run of trace 'atstop' while node-b holds its lock" run_of atstop
check "... said" tl_logged 20 "trace atstop: waits for another save of it to end"

# A stopping tierd paces nothing: at SIGTERM the readers restore_rate
# parked get their fills (it exits once they end), rather than holding its
# stop for as long as 64K a second would take (some 30 s here).
sed -i 's/"restore_rate": "0"/"restore_rate": "64K"/' "$TL_DIR/policy.json"
check "restore_rate 64K again: tierctl reload" timeout 20 "$TIERCTL" reload
# The reader stops at the file it is parked on: tierd exits as soon as
# that fill ends, and takes the view away, so a file the reader opened
# next would not be there.
park_reader 2
kill -TERM "$TL_TIERD_PID"
reader_goes_on "SIGTERM"
check "... and tierd exits (within 20 s)" tl_tierd_exits 20
check "... with status 0 (got $TL_TIERD_STATUS)" test "$TL_TIERD_STATUS" = 0
check "... the run waiting for a lock dropped, said" tl_logged 1 "trace atstop: a run waiting for another node's save of it at the stop: dropped"
check "... nothing stored for it" test ! -e "$STORE/trace/$(tkey atstop)"

# A lock is also its dead holder's once read unchanged for 120 s by this
# node's clock, whatever it says (a test build: 3 s): one that says it was
# taken in the future, and one on a store that gives no ages (the plain
# HTTP store here sends no Last-Modified).
TIERD_TEST_TRACE_LOCK_STALE_SEC=3 BUILD=$BUILD/testhooks tl_tierd_start "$TL_DIR/policy.json" ||
	{ not_ok "tierd (a test build) starts again"; tl_summary; exit 1; }
rm -f "$STORE/tracelock/atstop"
tl_log_mark
lock_of future "$(($(date +%s) + 100000))"
check "a run of trace 'future': node-b's lock says it was taken in a day" run_of future
check "... the save waits" tl_logged 20 "trace future: waits for another save of it to end (node node-b since"
check "... until the lock was read unchanged for 3 s: deleted, said" \
	tl_logged 20 "trace future: a lock read unchanged for 3 s deleted"
check "... and the run stored" tl_logged 20 "trace future stored: run 1, 1 files"
head -c 1M /dev/urandom >"$ORIG/slow_e"; cp "$ORIG/slow_e" "$S/e"
check "a file of tenant slow (a store with no ages) archived and released" \
	bash -c "timeout 60 '$TIERCTL' archive '$S/e' >/dev/null && timeout 60 '$TIERCTL' release '$S/e' >/dev/null"
mkdir -p "$TL_DIR/slowstore/t/tracelock"
printf 'tierd trace lock\nnode=node-b\npid=7\ntaken=%s\n' "$(($(date +%s) - 1000))" >"$TL_DIR/slowstore/t/tracelock/noage"
tl_log_mark
check "a run of trace 'noage' of tenant slow: the lock says 1000 s old, the store cannot say" \
	bash -c "timeout 20 '$TIERCTL' trace start slow noage && timeout 20 cat '$S/e' | cmp -s - '$ORIG/slow_e'"
check "... the save waits: the store gives no age" tl_logged 20 "trace noage: waits for another save of it to end (a lock the store gives no age of)"
check "... until read unchanged for 3 s: deleted" tl_logged 20 "trace noage: a lock read unchanged for 3 s deleted"
check "... the run stored" tl_logged 20 "trace noage stored: run 1, 1 files"
check "... and its own lock deleted after" tl_eventually_for 10 test ! -e "$TL_DIR/slowstore/t/tracelock/noage"

# A stop lets a save under way end (a test build makes its merge take 3 s):
# the trace written and its lock deleted, each a request to the worker, and
# tierd exits as soon as the last is answered, not at its 30 s stop timeout
# (nor at once, the save lost with its merge).
kill -TERM "$TL_TIERD_PID"
tl_tierd_exits 30 || { not_ok "tierd (a test build) stops within 30 s"; tl_summary; exit 1; }
TIERD_TEST_TRACE_SAVE_PAUSE_MS=3000 BUILD=$BUILD/testhooks tl_tierd_start "$TL_DIR/policy.json" ||
	{ not_ok "tierd (a test build, slow merges) starts again"; tl_summary; exit 1; }
tl_log_mark
check "a run of trace 'atsave'" run_of atsave
check "... its window over: the save starts" tl_logged 20 "trace atsave: window over after"
sleep 1 # its lock taken, the merge under way
kill -TERM "$TL_TIERD_PID"
check "SIGTERM during its merge: tierd exits within 20 s" tl_tierd_exits 20
check "... with status 0 (got $TL_TIERD_STATUS)" test "$TL_TIERD_STATUS" = 0
check "... once the run was stored" tl_logged 1 "trace atsave stored: run 1, 1 files"
check "... and its lock deleted" test ! -e "$STORE/tracelock/atsave"
check "... without its stop timing out" bash -c "! tail -n +$((TL_LOG_MARK + 1)) '$TL_TIERD_LOG' | grep -q 'did not finish in time'"
tl_summary
