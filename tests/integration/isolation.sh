#!/bin/bash
# Tenant isolation of tierd itself: what one tenant, or any local user, does
# must never stall another tenant's readers. The rule it checks (README,
# "How it works"): the code that answers fanotify events never waits on
# anything a tenant, a caller or the network controls.
#
# On a loop btrfs with tenants alpha and beta (file:// stores on a tmpfs):
# 1. a FIFO made and opened for reading and writing by uid 65534 in alpha,
#    then closed (FAN_CLOSE_WRITE on a FIFO), and kept open by nobody;
# 2. a write lease taken by uid 65534 on its own released file in alpha
#    (SIGIO ignored: it keeps the lease), then a read of that file through
#    the leased fd: EPERM for it at once, nobody else waits;
# 3. 200,000 files in alpha and TenantStatus, the tenant's usage properties
#    and GetManagedObjects polled in a loop by uid 65534;
# 4. a rename storm in gamma, a tenant that keeps a catalog: a directory of
#    20,000 files renamed back and forth for 15 s (each rename was a walk
#    of the directory on the loop, queued without bound); tierd's memory
#    must stay bounded, and gamma's catalog must come back to releasing;
# 5. 256 parallel cold readers in alpha, each of its own released file;
#    then 400 more with alpha's worker stopped (it reads none of tierd's
#    requests: tierd must not wait on its full socket);
# 6. a release that must hash a 600 MiB file first (a write may have gone
#    unheard): the hash runs on a thread; delta, a tenant at its quota,
#    reads through it meanwhile (its releases wait for their checks);
# after each, beta's cold reads of released files give the right bytes,
# each within a bound far above its idle time (a hang fails the test, it
# never passes as an error: the exit status and the bytes are checked), and
# tierctl status answers.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
TIERCTL=$BUILD/tierctl
PREAD=$BUILD/tests/pread-at
BUSCTL="busctl --system"
FS=$TL_DIR/fs SA=$TL_DIR/fs/alpha SB=$TL_DIR/fs/beta
VA=$TL_DIR/views/alpha VB=$TL_DIR/views/beta VG=$TL_DIR/views/gamma VD=$TL_DIR/views/delta ORIG=$TL_DIR/orig
# A read that takes longer than this has been stalled: beta's idle cold
# read of 4 KiB takes tens of milliseconds here.
BOUND_MS=${ISOLATION_BOUND_MS:-2500}

tl_loopfs btrfs 4G "$FS" || { not_ok "mkfs"; tl_summary; exit 1; }
for t in alpha beta gamma delta; do tl_subvol btrfs "$FS/$t"; done
mkdir -p "$ORIG" "$TL_DIR/store"
mount -t tmpfs -o size=2G,mode=700 tmpfs "$TL_DIR/store" && TL_MOUNTS+=("$TL_DIR/store")
cat >"$TL_DIR/policy.json" <<EOF
{"tenants": [
  {"name": "alpha", "subvolume": "$SA", "mount": "$VA", "backend": "file://$TL_DIR/store/alpha"},
  {"name": "beta", "subvolume": "$SB", "mount": "$VB", "backend": "file://$TL_DIR/store/beta"},
  {"name": "gamma", "subvolume": "$FS/gamma", "mount": "$VG", "backend": "file://$TL_DIR/store/gamma",
   "catalog": true, "catalog_key": "$TL_CATALOG_KEY"},
  {"name": "delta", "subvolume": "$FS/delta", "mount": "$VD", "backend": "file://$TL_DIR/store/delta",
   "quota": "8M", "restore": "whole"}]}
EOF
tl_dbus_start || { not_ok "dbus-daemon"; tl_summary; exit 1; }
check "tierd starts" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }
TIERD=$TL_TIERD_PID
chmod 755 "$TL_DIR/views" "$VA" "$VB"
mkdir -p "$VA/nobody" && chown 65534:65534 "$VA/nobody"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# beta: 70 released files of 1 MiB, each read once (cold) per check.
for i in $(seq 70); do head -c 1M /dev/urandom >"$ORIG/b$i"; cp "$ORIG/b$i" "$VB/b$i"; done
"$TIERCTL" archive "$VB"/b* >/dev/null && "$TIERCTL" release "$VB"/b* >/dev/null
check "beta: 70 files archived and released" test "$(tl_allocated "$VB/b1")" -eq 0
# The thread that answers events runs ahead of readers and workers (nice
# -10: supervisor/events/loopnice.h); the workers it starts do not inherit that.
nice_of() { awk '{ sub(/^.*\) /, ""); print $17 }' "/proc/$1/stat"; }
LOOP_NICE=$(nice_of "$TIERD")
WORKER_NICES=$(for w in $(pgrep -P "$TIERD" -x tierd-worker); do nice_of "$w"; done | sort -u | tr '\n' ' ')
check "tierd's event loop at nice -10 (it is $LOOP_NICE), its workers at 0 ($WORKER_NICES)" \
	test "$LOOP_NICE $WORKER_NICES" = "-10 0 "
NEXT=1
# beta_reads NAME N: N cold 4 KiB reads of beta files not read yet, each
# within BOUND_MS, each the original bytes; the slowest is printed.
beta_reads() {
	local name=$1 n=$2 i rc t0 ms worst=0 bad=""
	for _ in $(seq "$n"); do
		i=$NEXT NEXT=$((NEXT + 1))
		t0=$(date +%s%N)
		timeout 20 "$PREAD" "$VB/b$i" 8192 4096 >"$TL_DIR/got" 2>"$TL_DIR/err"
		rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
		[ "$ms" -gt "$worst" ] && worst=$ms
		if [ "$rc" -ne 0 ]; then bad="b$i: exit $rc ($(cat "$TL_DIR/err"))"; break; fi
		if ! cmp -s "$TL_DIR/got" <(tail -c +8193 "$ORIG/b$i" | head -c 4096); then bad="b$i: wrong bytes"; break; fi
		if [ "$ms" -gt "$BOUND_MS" ]; then bad="b$i: took $ms ms (bound $BOUND_MS)"; break; fi
	done
	echo "# $name: slowest of beta's cold reads $worst ms"
	if [ -z "$bad" ]; then ok "$name: beta's cold reads right and within ${BOUND_MS} ms"
	else not_ok "$name: $bad"; fi
}
status_answers() { # NAME
	local rc
	timeout 20 "$TIERCTL" status >/dev/null 2>&1
	rc=$?
	if [ "$rc" -eq 0 ]; then ok "$1: tierctl status answers"; else not_ok "$1: tierctl status exit $rc (124: hung)"; fi
}
beta_reads "idle" 5

# 1. The FIFO: its close raises FAN_CLOSE_WRITE, and an open of it for
# reading would wait for a writer that never comes.
as_nobody bash -c "cd '$VA/nobody' && mkfifo p && exec 3<>p && exec 3>&-"
check "fifo: made and closed by uid 65534" test -p "$VA/nobody/p"
sleep 0.5
beta_reads "fifo" 5
status_answers "fifo"
timeout 20 touch "$VA/nobody/after-fifo" "$VB/after-fifo"
check "fifo: a first open of new files on the filesystem answers (exit $?)" test -e "$VB/after-fifo"
# A second FIFO closed after being written through.
as_nobody bash -c "cd '$VA/nobody' && mkfifo q && exec 3<>q && echo x >&3 && exec 3>&-"
sleep 0.5
beta_reads "fifo written" 5
check "fifo: tierd still runs" kill -0 "$TIERD"

# 2. A write lease on a released file of the tenant's own, and a read of it
# through the leased fd: breaking the lease would wait for its holder, who
# waits for tierd.
head -c 3M /dev/urandom >"$VA/nobody/leased"
chown 65534:65534 "$VA/nobody/leased"
"$TIERCTL" archive "$VA/nobody/leased" >/dev/null && "$TIERCTL" release "$VA/nobody/leased" >/dev/null
setpriv --reuid=65534 --regid=65534 --clear-groups timeout 60 python3 - "$VA/nobody/leased" >"$TL_DIR/lease.out" 2>&1 <<'PY' &
import fcntl, os, signal, sys
F_SETLEASE = 1024
# The lease break's SIGIO would end us: a holder that keeps its lease.
signal.signal(signal.SIGIO, signal.SIG_IGN)
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.fcntl(fd, F_SETLEASE, fcntl.F_WRLCK)
print("leased", flush=True)
try:
    os.pread(fd, 4096, 1 << 20)
    print("read", flush=True)
except OSError as e:
    print("error", e.errno, flush=True)
PY
LEASER=$!
TL_PIDS+=("$LEASER")
for _ in $(seq 50); do grep -q leased "$TL_DIR/lease.out" && break; sleep 0.1; done
check "lease: uid 65534 holds a write lease on its released file" grep -q leased "$TL_DIR/lease.out"
beta_reads "lease" 5
status_answers "lease"
wait "$LEASER"
# Its own read: EPERM at once (the kernel could not open the event's fd
# without waiting for the lease to be broken, and denied the event), not a
# wait of the kernel's lease-break-time with tierd stuck in read(2).
check "lease: the holder's own read gets EPERM at once ($(tr '\n' ' ' <"$TL_DIR/lease.out"))" grep -qx "error 1" "$TL_DIR/lease.out"

# 3. Status polled by an unprivileged caller while alpha holds many files.
N=${ISOLATION_FILES:-200000}
mkdir "$VA/many"
"$BUILD/tests/mkfiles" "$VA/many" "$N"
check "status: $N files made in alpha" test -e "$VA/many/d$(((N - 1) / 1000))/f$(((N - 1) % 1000))"
POLLERS=()
for _ in 1 2; do
	# setpriv, not the as_nobody function: & would fork a subshell for it,
	# and $! would name the subshell, not the poller. setpriv execs
	# timeout, which passes a TERM on to the loop; and each poller ends
	# by itself after a while, should a kill miss it.
	setpriv --reuid=65534 --regid=65534 --clear-groups timeout 300 bash -c "while :; do
		$BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager TenantStatus >/dev/null 2>&1
		$BUSCTL get-property org.tierd1 /org/tierd1/tenant/alpha org.tierd1.Tenant ResidentBytes FilesByState >/dev/null 2>&1
		$BUSCTL call org.tierd1 /org/tierd1 org.freedesktop.DBus.ObjectManager GetManagedObjects >/dev/null 2>&1
	done" &
	POLLERS+=("$!")
	TL_PIDS+=("$!")
done
sleep 2
# TenantStatus itself answers at once (a walk of the tree on the loop took
# seconds here), each of 10 calls within 500 ms.
slow=0
for _ in $(seq 10); do
	t0=$(date +%s%N)
	timeout 20 $BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager TenantStatus >/dev/null || slow=99999
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$ms" -gt "$slow" ] && slow=$ms
done
check "status polled: TenantStatus answers within 500 ms (slowest of 10: $slow ms)" test "$slow" -le 500
beta_reads "status polled" 20
status_answers "status polled"
as_nobody timeout 20 "$TIERCTL" ping >"$TL_DIR/ping" 2>&1
check "status polled: tierctl ping by uid 65534 answers (exit $?): $(cat "$TL_DIR/ping")" grep -qx "tierd answers: 4 tenant(s)" "$TL_DIR/ping"
kill "${POLLERS[@]}" 2>/dev/null
wait "${POLLERS[@]}" 2>/dev/null
check "status: tierd still runs" kill -0 "$TIERD"

# 4. A rename storm where a catalog is kept.
R=${ISOLATION_RENAME_FILES:-20000}
mkdir "$VG/storm"
"$BUILD/tests/mkfiles" "$VG/storm" "$R"
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$TIERD/status"; }
kb0=$(hwm)
timeout 15 bash -c "cd '$VG' && while :; do mv storm storm2; mv storm2 storm; done" &
STORM=$!
TL_PIDS+=("$STORM")
sleep 3
beta_reads "rename storm" 10
status_answers "rename storm"
wait "$STORM"
grown=$((($(hwm) - kb0) / 1024))
echo "# rename storm: tierd's peak RSS grew by $grown MiB"
check "rename storm: tierd's memory stays bounded (peak RSS +$grown MiB, at most 256)" test "$grown" -le 256
check "rename storm: tierd still runs" kill -0 "$TIERD"
head -c 1M /dev/urandom >"$VG/after-storm"
"$TIERCTL" archive "$VG/after-storm" >/dev/null
released=no
for _ in $(seq 120); do
	"$TIERCTL" release "$VG/after-storm" >/dev/null 2>"$TL_DIR/release.err" && { released=yes; break; }
	sleep 0.5
done
check "rename storm: gamma's catalog comes back to releasing (last refusal: $(tail -n 1 "$TL_DIR/release.err"))" \
	test "$released" = yes

# 5. 256 readers at once in alpha.
mkdir "$VA/r"
for i in $(seq 256); do head -c 2M /dev/urandom >"$VA/r/f$i"; done
"$TIERCTL" archive "$VA"/r/f* >/dev/null && "$TIERCTL" release "$VA"/r/f* >/dev/null
check "256 readers: alpha's 256 files released" test "$(tl_allocated "$VA/r/f256")" -eq 0
READERS=()
for i in $(seq 256); do
	timeout 120 cat "$VA/r/f$i" >/dev/null &
	READERS+=("$!")
done
beta_reads "256 readers" 5
bad=0
for p in "${READERS[@]}"; do wait "$p" || bad=$((bad + 1)); done
check "256 readers: every alpha reader succeeded ($bad did not)" test "$bad" = 0

# 5b. A worker that stops reading (stopped here; a compromised one need
# only not read): 400 cold readers in alpha fill its socket. tierd keeps
# what the socket refuses for later (it used to wait in sendmsg, every
# tenant's events and the bus behind it) and serves beta and the bus
# meanwhile; once the worker goes on, every alpha reader gets its bytes.
mkdir "$VA/s" "$ORIG/s"
for i in $(seq 400); do head -c 64K /dev/urandom >"$ORIG/s/f$i"; cp "$ORIG/s/f$i" "$VA/s/f$i"; done
"$TIERCTL" archive "$VA"/s/f* >/dev/null && "$TIERCTL" release "$VA"/s/f* >/dev/null
check "stopped worker: alpha's 400 files released" test "$(tl_allocated "$VA/s/f400")" -eq 0
AW=$($BUSCTL get-property org.tierd1 /org/tierd1/tenant/alpha org.tierd1.Tenant WorkerPid | cut -d' ' -f2)
kill -STOP "$AW"
READERS=()
for i in $(seq 400); do
	timeout 120 cmp -s "$VA/s/f$i" "$ORIG/s/f$i" &
	READERS+=("$!")
done
sleep 2
beta_reads "stopped worker" 3
status_answers "stopped worker"
kill -CONT "$AW"
bad=0
for p in "${READERS[@]}"; do wait "$p" || bad=$((bad + 1)); done
check "stopped worker: once it goes on, all 400 alpha readers get their bytes ($bad did not)" test "$bad" = 0


# 6. Bytes checked against their SHA-256 before a release, once a write
# may have gone unheard: a file written while tierd was stopped and then
# leased by its writer before tierd could look (it cannot open a leased
# file without waiting for its holder). From then on every release hashes
# the whole file: on a thread, never on the loop.
head -c 64K /dev/urandom >"$VA/w"
head -c 600M /dev/urandom >"$ORIG/big" && cp "$ORIG/big" "$VA/big"
"$TIERCTL" archive "$VA/w" "$VA/big" >/dev/null
cat "$VA/w" >/dev/null # whole: tierd's ignore mark, so the write below raises no permission event
cp -p "$VA/w" "$TL_DIR/w-before"
kill -STOP "$TIERD"
# One byte flipped, size and mtime put back, then a write lease kept for 3 s
# (SIGIO ignored, as a holder that keeps its lease would).
python3 - "$VA/w" <<'PY' &
import fcntl, os, signal, sys, time
path = sys.argv[1]
st = os.stat(path)
with open(path, "r+b") as f:
    f.seek(100); b = f.read(1); f.seek(100); f.write(bytes([b[0] ^ 0xff]))
os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
signal.signal(signal.SIGIO, signal.SIG_IGN)
fd = os.open(path, os.O_RDONLY)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
open(sys.argv[1] + ".leased", "w").close()
time.sleep(3)
PY
LEASER=$!
for _ in $(seq 50); do [ -e "$VA/w.leased" ] && break; sleep 0.1; done
kill -CONT "$TIERD"
wait "$LEASER"
check "a write tierd could not look at (leased): every release checks bytes from now on" \
	bash -c "for _ in \$(seq 50); do grep -q 'every archived file is checked by its SHA-256' '$TL_TIERD_LOG' && exit 0; sleep 0.1; done; exit 1"
check "... the byte really changed (size and mtime did not)" bash -c "! cmp -s '$VA/w' '$TL_DIR/w-before' &&
	test \$(stat -c %s.%Y '$VA/w') = \$(stat -c %s.%Y '$TL_DIR/w-before')"
rc=0
out=$(timeout 60 "$TIERCTL" release "$VA/w" 2>&1) || rc=$?
check "... its release is refused (exit $rc): $out" test "$rc" = 1
check "... found by its SHA-256" grep -q "found by its SHA-256" <<<"$out"
check "... and the written bytes stay, whole" bash -c "cmp -s '$VA/w' <(python3 -c \"
import sys; b = bytearray(open('$TL_DIR/w-before', 'rb').read()); b[100] ^= 0xff; sys.stdout.buffer.write(b)\") &&
	test \$(du -k '$VA/w' | cut -f1) -gt 0"
# delta, a tenant at its quota (8 MiB) on the same filesystem, reads 4
# released files of 3 MiB in turn: room for each comes from releasing the
# one read before, whose bytes must be checked first. Its reads wait for
# those checks, never EDQUOT.
for i in 1 2 3 4; do head -c 3M /dev/urandom >"$ORIG/d$i"; cp "$ORIG/d$i" "$VD/d$i"; done
"$TIERCTL" archive "$VD"/d* >/dev/null && "$TIERCTL" release "$VD"/d* >/dev/null
bad=""
for i in 1 2 3 4; do
	timeout 60 cmp "$VD/d$i" "$ORIG/d$i" >"$TL_DIR/cmp.out" 2>&1 || { bad="d$i: exit $? ($(cat "$TL_DIR/cmp.out"))"; break; }
done
check "a tenant at its quota reads 12 MiB through 8: each release waits for its check, no EDQUOT${bad:+ ($bad)}" test -z "$bad"
check "... its releases were checked" grep -q "tenant delta: a file's bytes (3145728) checked before its release.*: the archived bytes" "$TL_TIERD_LOG"
# A big file's check runs while beta's reads go on.
sync && echo 3 >/proc/sys/vm/drop_caches
timeout 120 "$TIERCTL" release "$VA/big" >"$TL_DIR/release.out" 2>&1 &
RELEASER=$!
check "a check of 600 MiB starts" bash -c "for _ in \$(seq 100); do grep -q 'checking a file.s bytes (629145600)' '$TL_TIERD_LOG' && exit 0; sleep 0.05; done; exit 1"
beta_reads "bytes checked" 3
check "... beta's reads were served while it ran" bash -c "! grep -q 'tenant alpha: a file.s bytes (629145600) checked' '$TL_TIERD_LOG'"
rc=0
wait "$RELEASER" || rc=$?
check "... then the big file is released (exit $rc)" test "$rc" = 0 -a "$(tl_allocated "$VA/big")" -eq 0
check "... and reads back right" cmp -s "$VA/big" "$ORIG/big"

check "SIGTERM: tierd exits 0" tl_tierd_stop
tl_summary
