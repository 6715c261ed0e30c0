#!/bin/bash
# The worker's sandbox, proven from the running worker (a build with test
# hooks: objects whose keys make the worker try what it must not do).
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
TL_FILLWATCH_EXPECTED=1 # the keeper tenant's worker writes through a fill fd it kept
BUILD=$BUILD/testhooks
TIERCTL=$BUILD/tierctl
tl_loopfs btrfs 1G "$TL_DIR/fs" || { not_ok "mkfs"; tl_summary; exit 1; }
for t in probe mounter killer hung other crashloop nolandlock keeper truncator mapper forker allocator locker liar trusting honest; do tl_subvol btrfs "$TL_DIR/fs/$t"; done
mkdir -p "$TL_DIR/store"
# verify off: the hook stubs have no chunk manifest (they would restore
# whole), and the kill hook takes its pid from a ranged fill's offset.
cat >"$TL_DIR/policy.json" <<EOF2
{"worker_uids": "59100-59199",
 "defaults": {"chunk": "4K", "small_file": 0, "verify": false},
 "tenants": [
  {"name": "probe", "subvolume": "$TL_DIR/fs/probe", "mount": "$TL_DIR/views/probe", "backend": "file://$TL_DIR/store/probe"},
  {"name": "mounter", "subvolume": "$TL_DIR/fs/mounter", "mount": "$TL_DIR/views/mounter", "backend": "file://$TL_DIR/store/mounter"},
  {"name": "killer", "subvolume": "$TL_DIR/fs/killer", "mount": "$TL_DIR/views/killer", "backend": "file://$TL_DIR/store/killer"},
  {"name": "hung", "subvolume": "$TL_DIR/fs/hung", "mount": "$TL_DIR/views/hung", "backend": "file://$TL_DIR/store/hung",
   "stall_timeout": "1s", "connect_timeout": "1s"},
  {"name": "other", "subvolume": "$TL_DIR/fs/other", "mount": "$TL_DIR/views/other", "backend": "file://$TL_DIR/store/other"},
  {"name": "crashloop", "subvolume": "$TL_DIR/fs/crashloop", "mount": "$TL_DIR/views/crashloop",
   "backend": "file://$TL_DIR/store/crashloop"},
  {"name": "nolandlock", "subvolume": "$TL_DIR/fs/nolandlock", "mount": "$TL_DIR/views/nolandlock",
   "backend": "file://$TL_DIR/store/nolandlock"},
  {"name": "keeper", "subvolume": "$TL_DIR/fs/keeper", "mount": "$TL_DIR/views/keeper", "backend": "file://$TL_DIR/store/keeper"},
  {"name": "truncator", "subvolume": "$TL_DIR/fs/truncator", "mount": "$TL_DIR/views/truncator",
   "backend": "file://$TL_DIR/store/truncator"},
  {"name": "mapper", "subvolume": "$TL_DIR/fs/mapper", "mount": "$TL_DIR/views/mapper", "backend": "file://$TL_DIR/store/mapper"},
  {"name": "forker", "subvolume": "$TL_DIR/fs/forker", "mount": "$TL_DIR/views/forker", "backend": "file://$TL_DIR/store/forker"},
  {"name": "allocator", "subvolume": "$TL_DIR/fs/allocator", "mount": "$TL_DIR/views/allocator",
   "backend": "file://$TL_DIR/store/allocator"},
  {"name": "locker", "subvolume": "$TL_DIR/fs/locker", "mount": "$TL_DIR/views/locker", "backend": "file://$TL_DIR/store/locker"},
  {"name": "liar", "subvolume": "$TL_DIR/fs/liar", "mount": "$TL_DIR/views/liar", "backend": "file://$TL_DIR/store/liar",
   "restore": "whole", "fill_check": 1},
  {"name": "trusting", "subvolume": "$TL_DIR/fs/trusting", "mount": "$TL_DIR/views/trusting",
   "backend": "file://$TL_DIR/store/trusting", "restore": "whole", "fill_check": 0},
  {"name": "honest", "subvolume": "$TL_DIR/fs/honest", "mount": "$TL_DIR/views/honest", "backend": "file://$TL_DIR/store/honest",
   "restore": "whole", "fill_check": 1}]}
EOF2
# A stub by hand (root may write security.tierd) whose object is a test hook.
hook_stub() { # FILE TENANT HOOK SIZE
	truncate -s "$4" "$1"
	setfattr -n security.tierd -v "v=1
tenant=$2
state=released
key=sha256/00000000000000000000000000000000000000000000000000000000000000$3
size=$4
sha256=0000000000000000000000000000000000000000000000000000000000000000
mode=100644
uid=0
gid=0
mtime=$(stat -c %Y "$1").000000000
chunk=4096
fcaps=
ranges=
" "$1"
}
# Made before tierd starts: a file tierd saw without a stub carries an
# ignore mark while cached, and a stub written behind its back by hand
# would not be heard of.
while read -r tenant file hook size; do hook_stub "$TL_DIR/fs/$tenant/$file" "$tenant" "$hook" "$size"; done <<EOF2
probe selftest 01 $((5 << 30))
probe ptrace 02 $((1 << 20))
mounter mount 03 $((1 << 20))
killer kill 04 $((5 << 30))
hung hang 05 $((1 << 20))
crashloop any 01 $((1 << 20))
nolandlock selftest 01 $((1 << 20))
keeper keep 06 $((1 << 20))
truncator cut 07 $((1 << 20))
mapper map 08 $((1 << 20))
forker fork 09 $((1 << 20))
allocator grow 10 $((1 << 20))
locker lock 11 $((1 << 20))
liar lie 12 4096
trusting lie 12 4096
EOF2
tl_dbus_start
# Content checks start 2 s late (test build): the honest tenant's owner
# writes in that time.
TIERD_TEST_CHECK_PAUSE_MS=2000 \
	check "tierd (test-hook build) starts" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }

worker_of() { "$TIERCTL" status --json | grep -o "\"name\":\"$1\"[^}]*}" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p'; }
status_field() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status"; }
# alive PID: a running process whose /proc entry reads. The checks of /proc
# below start with it: a missing process must fail them, not pass for
# want of anything to read.
alive() {
	[ "${1:-0}" -gt 1 ] && kill -0 "$1" && grep -q '^Pid:' "/proc/$1/status" ||
		{ echo "# process '${1:-}' is gone or its /proc entry unreadable"; return 1; }
}
# eio_read FILE OFFSET LENGTH: one pread under timeout 120 (a hang ends as
# 124); sets RC and MS (how long it took), keeps what it read and said.
eio_read() {
	local t0; t0=$(date +%s%N)
	timeout 120 "$BUILD/tests/pread-at" "$@" >"$TL_DIR/eio.out" 2>"$TL_DIR/eio.err"
	RC=$?
	MS=$((($(date +%s%N) - t0) / 1000000))
}
# got_eio LIMIT: that read failed with EIO (pread-at exits 1 and prints the
# error; not a hang's 124), returned no byte, within LIMIT seconds.
got_eio() {
	[ "${RC:-}" = 1 ] && grep -q "Input/output error" "$TL_DIR/eio.err" && [ ! -s "$TL_DIR/eio.out" ] &&
		[ "${MS:-999999}" -le $(($1 * 1000)) ] && return 0
	echo "# the read: rc ${RC:-none} after ${MS:-?} ms, $(wc -c <"$TL_DIR/eio.out") bytes: $(cat "$TL_DIR/eio.err")"
	return 1
}
P=$(worker_of probe) O=$(worker_of other)
check "each tenant has a running worker ($P, $O)" bash -c "$(declare -f alive); alive '$P' && alive '$O'"
check "the probe worker runs as its own uid and gid (59100)" \
	bash -c "[ \"\$(sed -n 's/^Uid:\t//p' /proc/$P/status)\" = \$'59100\t59100\t59100\t59100' ] && [ \"\$(sed -n 's/^Gid:\t//p' /proc/$P/status)\" = \$'59100\t59100\t59100\t59100' ]"
check "another tenant's worker has another uid (59104)" bash -c "grep -q \$'^Uid:\t59104\t' /proc/$O/status"
check "CapEff, CapPrm, CapBnd and CapAmb are 0" \
	bash -c "for c in CapEff CapPrm CapBnd CapAmb; do grep -q \"^\$c:[[:space:]]*0000000000000000\" /proc/$P/status || exit 1; done"
check "NoNewPrivs is 1" test "$(status_field "$P" NoNewPrivs)" = 1
check "Seccomp is 2 (a filter)" test "$(status_field "$P" Seccomp)" = 2
check "no supplementary groups" grep -qx $'Groups:[[:space:]]*' "/proc/$P/status"
check "its store belongs to it" test "$(stat -c %u:%g "$TL_DIR/store/probe")" = 59100:59100
echo "# the probe worker's fds: $(ls -l "/proc/$P/fd" 2>&1 | awk 'NR > 1 { print $9 $10 $11 }' | tr '\n' ' ')"
check "only the control socket, stdio and the store are open in it (at most 6 fds, a socket among them)" \
	bash -c "$(declare -f alive); alive '$P' && ls /proc/$P/fd >$TL_DIR/fds && [ \$(wc -l <$TL_DIR/fds) -le 6 ] &&
		ls -l /proc/$P/fd | grep -q ' -> socket:'"

"$BUILD/tests/pread-at" "$TL_DIR/views/probe/selftest" $((O * 4096)) 4096 | tr -d '\0' >"$TL_DIR/verdict"
sed 's/^/# worker says: /' "$TL_DIR/verdict"
check "the worker cannot open a file outside its store (EACCES)" grep -q "open /etc/passwd: EACCES" "$TL_DIR/verdict"
check "... not even its own /proc entries" grep -q "open /proc/self/status: EACCES" "$TL_DIR/verdict"
check "the worker cannot connect to another port (EACCES)" grep -q "connect 127.0.0.1:22: EACCES" "$TL_DIR/verdict"
check "it runs as uid 59100" grep -q "uid 59100" "$TL_DIR/verdict"
check "it cannot pass tierd an fd (SO_PASSRIGHTS: EPERM)" grep -q "sendmsg of an fd to tierd: EPERM" "$TL_DIR/verdict"

eio_read "$TL_DIR/views/probe/ptrace" 0 4096
check "a worker that calls ptrace is ended: its reader gets EIO (3 worker deaths, after $MS ms, bound 10 s)" got_eio 10
check "... and tierd logs which call" grep -q "seccomp filter at system call 101 (ptrace)" "$TL_TIERD_LOG"
# A file of the same tenant, read while the mount request keeps killing
# workers: the deaths are blamed on the request alone in progress.
head -c $((8 << 20)) /dev/urandom >"$TL_DIR/fs/mounter/plain" && cp "$TL_DIR/fs/mounter/plain" "$TL_DIR/plain.orig"
"$TIERCTL" archive "$TL_DIR/views/mounter/plain" >/dev/null && "$TIERCTL" release "$TL_DIR/views/mounter/plain" >/dev/null
timeout 60 cmp "$TL_DIR/views/mounter/plain" "$TL_DIR/plain.orig" & plain_reader=$!
eio_read "$TL_DIR/views/mounter/mount" 0 4096
check "a worker that calls mount is ended: its reader gets EIO (3 worker deaths, after $MS ms, bound 10 s)" got_eio 10
check "... a reader of another file of that tenant, at the same time, gets the original bytes" wait $plain_reader
check "... and tierd logs which call" grep -q "seccomp filter at system call 165 (mount)" "$TL_TIERD_LOG"
check "... the request alone in progress at 3 worker deaths fails alone" grep -q "tenant mounter: request .* was alone in progress at 3 worker deaths: failing it" "$TL_TIERD_LOG"
worker_failed() { # TENANT
	for _ in $(seq 100); do
		"$TIERCTL" status --json | grep -q "\"name\":\"$1\"[^}]*\"state\":\"failed\"" && return 0
		sleep 0.1
	done
	return 1
}
check "a worker crashing in a loop (test build: tenant crashloop dies at start) ends failed" worker_failed crashloop
eio_read "$TL_DIR/views/crashloop/any" 0 4096
check "... its readers get EIO at once (after $MS ms, bound 2 s)" got_eio 2
check "a worker on a kernel without Landlock (test build: tenant nolandlock sees none) will not start: it ends failed" \
	worker_failed nolandlock
check "... saying why" grep -q "Landlock is not available .*: the worker will not run with its files and network unfenced" \
	"$TL_TIERD_LOG"
eio_read "$TL_DIR/views/nolandlock/selftest" 0 4096
check "... its readers get EIO (after $MS ms, bound 2 s)" got_eio 2

eio_read "$TL_DIR/views/killer/kill" $((O * 4096)) 4096
check "a worker that tries to kill another is ended: its reader gets EIO (after $MS ms, bound 10 s)" got_eio 10
check "... by its seccomp filter at kill(2)" grep -q "seccomp filter at system call 62 (kill)" "$TL_TIERD_LOG"
check "... and the other worker lives on ($O)" kill -0 "$O"

# A compromised worker keeps a fill fd (test build: hook 06 keeps it and
# writes "EVIL" at offset 0 through it at its next fill, of another file).
K=$(worker_of keeper)
check "the keeper tenant has a running worker ($K)" alive "$K"
record_of() { getfattr -n security.tierd --only-values "$1" 2>/dev/null | sed -n 's/^state=//p'; }
state_is() { # FILE STATE: within 10 s
	for _ in $(seq 100); do [ "$(record_of "$1")" = "$2" ] && return 0; sleep 0.1; done
	echo "# $1: state '$(record_of "$1")', not '$2'"
	return 1
}
timeout 60 "$BUILD/tests/pread-at" "$TL_DIR/views/keeper/keep" 0 4096 | tr -d '\0' >"$TL_DIR/keep1"
check "a file the worker keeps a fill fd of reads what the fill wrote" grep -qx kept "$TL_DIR/keep1"
check "... and is recorded partial" state_is "$TL_DIR/fs/keeper/keep" partial
tl_log_mark
head -c $((1 << 20)) /dev/urandom >"$TL_DIR/fs/keeper/plain" && cp "$TL_DIR/fs/keeper/plain" "$TL_DIR/keeper.orig"
check "keeper/plain archived and released (bound 120 s each)" bash -c "timeout 120 '$TIERCTL' archive '$TL_DIR/views/keeper/plain' >/dev/null &&
	timeout 120 '$TIERCTL' release '$TL_DIR/views/keeper/plain' >/dev/null"
check "the next fill (of another file) gets its bytes" timeout 60 cmp "$TL_DIR/views/keeper/plain" "$TL_DIR/keeper.orig"
check "... while the worker wrote through the fill fd it kept" \
	tl_logged 10 "test hook: writing 4 bytes through a fill fd kept from an earlier fill"
check "tierd heard that write and killed the worker" \
	tl_logged 10 "tenant keeper: worker $K wrote to a file none of its fills is writing (through a fill fd it kept): killing it"
check "... the written file's record is released again" state_is "$TL_DIR/fs/keeper/keep" released
check "... logged" grep -q "tenant keeper: .*/keeper/keep (sha256/0*06), written outside a fill, is fetched and checked again" "$TL_TIERD_LOG"
# replaced TENANT PID: a running worker other than PID serves TENANT, within 5 s.
replaced() {
	local n
	for _ in $(seq 50); do
		n=$(worker_of "$1")
		[ -n "$n" ] && [ "$n" != "$2" ] && alive "$n" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "# $1's worker: '$2' -> '$n'"
	return 1
}
check "... and a new worker serves the tenant" replaced keeper "$K"
timeout 60 "$BUILD/tests/pread-at" "$TL_DIR/views/keeper/keep" 0 4096 | tr -d '\0' >"$TL_DIR/keep2"
check "the file reads as its fill wrote it, not as the kept fd did (EVIL)" grep -qx kept "$TL_DIR/keep2"
# What a kept fill fd could do unheard, or by a pid that is no worker's:
# each ends the worker at its seccomp filter (3 deaths: EIO).
ended_at() { # TENANT FILE NR NAME WHY
	eio_read "$TL_DIR/views/$1/$2" 0 4096
	check "a worker that calls $4 is ended ($5): EIO after $MS ms" got_eio 10
	check "... by its seccomp filter at $4 (system call $3)" grep -q "tenant $1: worker .* seccomp filter at system call $3 ($4)" "$TL_TIERD_LOG"
}
ended_at truncator cut 77 ftruncate "a truncate raises no event on the fill mount"
ended_at mapper map 9 mmap "MAP_SHARED of a file: its writes raise no event"
ended_at forker fork 56 clone "fork: a child's pid is no worker's"
ended_at allocator grow 285 fallocate "mode 0: one that fails part-way may grow the file unheard"
ended_at locker lock 72 fcntl "F_OFD_SETLK: a lock on a kept fd would hold the tenant's programs"

# A worker that writes wrong bytes in its own fill and says it checked them
# (test build: hook 12 writes "LIES" and reports a whole-file fill as
# verified): tierd hashes a share of whole restores itself (fill_check).
L=$(worker_of liar)
check "the liar tenant has a running worker ($L)" alive "$L"
tl_log_mark
check "a file of the liar tenant reads what its worker wrote" \
	bash -c "timeout 60 cat '$TL_DIR/views/liar/lie' | tr -d '\0' | grep -qx LIES"
check "tierd's own hash of it (fill_check 1) does not match: the tenant's workers are replaced" \
	tl_logged 10 "/liar/lie, restored by its worker and called checked, does not hash to its archived SHA-256: the tenant's workers are replaced"
check "... the file's record is released again" state_is "$TL_DIR/fs/liar/lie" released
check "... and a new worker serves the tenant" replaced liar "$L"
check "with fill_check 0, the same lie stays archived (nothing looks)" \
	bash -c "timeout 60 cat '$TL_DIR/views/trusting/lie' | tr -d '\0' | grep -qx LIES"
sleep 1
check "... archived, and no check logged" bash -c "[ \"\$(getfattr -n security.tierd --only-values '$TL_DIR/fs/trusting/lie' | sed -n 's/^state=//p')\" = archived ] &&
	! grep -q 'tenant trusting: .*restored by its worker and called checked' '$TL_TIERD_LOG'"

# An honest worker, and the file's owner writing it after tierd queued its
# hash and before it read the file (it starts 2 s late in this build):
# nothing is blamed on the worker.
head -c $((256 << 20)) /dev/urandom >"$TL_DIR/fs/honest/big"
check "honest/big archived and released (bound 120 s each)" bash -c "timeout 120 '$TIERCTL' archive '$TL_DIR/views/honest/big' >/dev/null &&
	timeout 120 '$TIERCTL' release '$TL_DIR/views/honest/big' >/dev/null"
O2=$(worker_of honest)
tl_log_mark
check "a released 256 MiB file of the honest tenant (fill_check 1) is restored whole by a read" \
	bash -c "timeout 120 cat '$TL_DIR/views/honest/big' >/dev/null"
head -c $((1 << 20)) /dev/urandom >"$TL_DIR/owner.bytes"
check "... its owner writes 1 MiB into it at once" \
	timeout 60 dd if="$TL_DIR/owner.bytes" of="$TL_DIR/views/honest/big" bs=1M count=1 conv=notrunc status=none
check "... while tierd hashes it (fill_check)" tl_logged 20 "tenant honest: checking a file's bytes (268435456) against its SHA-256 as restored by its worker"
hash_ended() {
	for _ in $(seq 600); do
		tail -n +$((TL_LOG_MARK + 1)) "$TL_TIERD_LOG" |
			grep -qE "tenant honest: (a file's bytes .268435456. checked|cannot check a file's bytes .268435456.)" && return 0
		sleep 0.1
	done
	return 1
}
check "... and that hash ends (within 60 s)" hash_ended
honest_untouched() { [ "$(worker_of honest)" = "$O2" ] && ! grep -q "tenant honest: .*does not hash" "$TL_TIERD_LOG"; }
check "... nothing is blamed on the worker ($O2)" honest_untouched
check "... and the file holds its owner's bytes" cmp -n $((1 << 20)) "$TL_DIR/fs/honest/big" "$TL_DIR/owner.bytes"

H=$(worker_of hung)
check "the hung tenant has a running worker ($H)" alive "$H"
(eio_read "$TL_DIR/views/hung/hang" 0 4096; echo "$RC $MS" >"$TL_DIR/hung.result") & hung_reader=$!
for _ in $(seq 200); do grep -q "made no progress" "$TL_TIERD_LOG" && break; sleep 0.1; done
check "a hung worker is killed after the stall timeout" grep -q "tenant hung: worker $H made no progress on request .* for 7 s: killing it" "$TL_TIERD_LOG"
check "... and replaced by a running worker" replaced hung "$H"
wait $hung_reader
RC= MS=; read -r RC MS <"$TL_DIR/hung.result"
check "... and a request that hangs worker after worker fails: its reader gets EIO (3 workers x 7 s, after $MS ms, bound 30 s)" got_eio 30
check "... logged" grep -q "tenant hung: request .* hung 3 workers: failing it" "$TL_TIERD_LOG"

head -c 3000000 /dev/urandom >"$TL_DIR/fs/other/data" && cp "$TL_DIR/fs/other/data" "$TL_DIR/data.orig"
"$TIERCTL" archive "$TL_DIR/views/other/data" && "$TIERCTL" release "$TL_DIR/views/other/data"
check "another tenant's worker keeps serving" cmp "$TL_DIR/views/other/data" "$TL_DIR/data.orig"
check "... the same worker ($O)" test "$(worker_of other)" = "$O"
check "SIGTERM: tierd exits 0" tl_tierd_stop

# "require_landlock": false: the worker runs unfenced, and says so.
sed 's/^{"worker_uids"/{"require_landlock": false, "worker_uids"/' "$TL_DIR/policy.json" >"$TL_DIR/policy-nl.json"
check "tierd with \"require_landlock\": false starts" tl_tierd_start "$TL_DIR/policy-nl.json"
timeout 120 "$BUILD/tests/pread-at" "$TL_DIR/views/nolandlock/selftest" 0 4096 | tr -d '\0' >"$TL_DIR/verdict-nl"
check "... the nolandlock worker serves, unfenced (it opened /etc/passwd)" grep -q "open /etc/passwd: allowed" "$TL_DIR/verdict-nl"
check "... and warned" grep -q "Landlock is not available: the worker's files and network are not fenced" "$TL_TIERD_LOG"
check "SIGTERM: tierd exits 0" tl_tierd_stop
tl_summary
