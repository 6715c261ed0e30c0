#!/bin/bash
# Attacks on a real tierd (loop btrfs, file:// stores on a tmpfs, private
# dbus-daemon, tierd-holder):
# 1. paths named by a caller (D-Bus *Paths and FileStatus through busctl and
#    dbus-send, tierctl's verbs by fd) are resolved inside the tenant's
#    subvolume only: symlinks out (to another tenant's file, to a file outside
#    every tenant, to /etc/hostname), a directory symlink, '..', a bind mount
#    of an outside directory, a FIFO, device nodes, a socket: refused with a
#    named error and nothing outside touched; a queued job whose file (or
#    directory) is swapped for a symlink after it was named touches nothing
#    outside and reports an error for that file;
# 2. a tenant user (uid 65534, also in a user namespace of its own) cannot
#    create, change or delete security.tierd or security.tierd.pin; stubs
#    written corrupt by root (bad version, missing key, garbage, truncated, a
#    huge size, ranges beyond the size...) give EIO and a logged reason for
#    that file only, tierd and its workers keep their pids;
# 3. a file written during its upload (write(2), and a shared mapping) is
#    never left archived with the old content; tierd SIGKILLed at random
#    moments of archive and of release, with tierd-holder and without: after
#    each restart every file is resident or has a valid stub matching its
#    bytes, and reads back identical.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
TIERCTL=$BUILD/tierctl
PREAD=$BUILD/tests/pread-at
BUSCTL="busctl --system"
SEND="dbus-send --system --print-reply --dest=org.tierd1"
PY=/usr/bin/python3
FS=$TL_DIR/fs SA=$TL_DIR/fs/alpha SB=$TL_DIR/fs/beta OUT=$TL_DIR/fs/outside
VA=$TL_DIR/views/alpha VB=$TL_DIR/views/beta ORIG=$TL_DIR/orig

tl_loopfs btrfs 3G "$FS" || { not_ok "mkfs"; tl_summary; exit 1; }
# strictatime: every follow of a symlink updates its atime, which a walk
# from the lookup cache (tierd's loop) cannot do; tierd's own mount of the
# filesystem, a clone of this one, is noatime for that.
mount -o remount,strictatime "$FS" || not_ok "remount strictatime"
LOOPDEV=${TL_LOOPS[0]}
for t in alpha beta; do tl_subvol btrfs "$FS/$t"; done
mkdir -p "$OUT" "$ORIG" "$TL_DIR/store"
mount -t tmpfs -o size=3G,mode=700 tmpfs "$TL_DIR/store" && TL_MOUNTS+=("$TL_DIR/store")
cat >"$TL_DIR/policy.json" <<EOF
{"tenants": [
  {"name": "alpha", "subvolume": "$SA", "mount": "$VA", "backend": "file://$TL_DIR/store/alpha"},
  {"name": "beta", "subvolume": "$SB", "mount": "$VB", "backend": "file://$TL_DIR/store/beta"}]}
EOF
tl_dbus_start || { not_ok "dbus-daemon"; tl_summary; exit 1; }
HOLDER_SOCK=$TL_DIR/holder.sock
"$BUILD/tierd-holder" --socket "$HOLDER_SOCK" >>"$TL_DIR/holder.log" 2>&1 &
HOLDER=$!
TL_PIDS+=("$HOLDER")
export TL_TIERD_ARGS="--holder $HOLDER_SOCK"
check "tierd starts (with tierd-holder)" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }
chmod 755 "$TL_DIR/views" "$VA" "$VB"

dbus-monitor --system "type='signal',sender='org.tierd1',member='JobRemoved'" >"$TL_DIR/monitor" 2>&1 &
TL_PIDS+=("$!")

state_of() { "$TIERCTL" status --json "$1" 2>/dev/null | sed -n 's/.*"state":"\([a-z]*\)".*/\1/p'; }
stub_of() { getfattr --absolute-names --only-values -n security.tierd "$1" 2>/dev/null; }
has_stub() { getfattr --absolute-names -n security.tierd "$1" >/dev/null 2>&1; }
dbus_err() { "$@" 2>&1 >/dev/null | sed -n 's/^Error \([^:]*\):.*/\1/p'; }
job_of() { sed -n 's/^o "\(.*\)"$/\1/p'; }
job_block() { # JOBPATH: its JobRemoved signal as dbus-monitor printed it
	awk -v P="$1" '/^signal /{ if (hit) exit; rm = /member=JobRemoved/; buf = "" }
		rm { buf = buf $0 "\n"; if (index($0, "object path \"" P "\"")) hit = 1 }
		END { if (hit) printf "%s", buf }' "$TL_DIR/monitor"
}
wait_job() { for _ in $(seq 300); do [ -n "$(job_block "$1")" ] && return 0; sleep 0.1; done; return 1; }
worker_pids() { pgrep -P "$TL_TIERD_PID" -x tierd-worker | sort | tr '\n' ' '; }
# snap FILE: what must not change: content, size, mtime, ctime (an xattr
# written changes it) and tierd's attributes.
snap() {
	printf '%s|%s|%s\n' "$(sha256sum <"$1" | cut -c1-64)" "$(stat -c '%s %y %z' "$1")" \
		"$(getfattr --absolute-names -d -m '^security\.tierd' "$1" 2>/dev/null | grep -v '^#')"
}

# --- 1. Paths resolved inside the tenant's subvolume only --------------------

echo "# paths named by a caller"
echo "alpha's own" >"$VA/own"
mkdir -p "$OUT/bmdir" "$OUT/bmdir2" "$SA/bm" "$SA/sub"
declare -A TARGET_SNAP
target() { # FILE: an outside file, remembered as it is now
	[ -e "$1" ] || head -c 70000 /dev/urandom >"$1"
	TARGET_SNAP[$1]=$(snap "$1")
}
untouched() { # FILE...: as remembered, and no stub, no pin
	local f
	for f in "$@"; do
		has_stub "$f" && { echo "# $f got a stub: $(stub_of "$f" | tr '\n' ' ')"; return 1; }
		getfattr --absolute-names -n security.tierd.pin "$f" >/dev/null 2>&1 && { echo "# $f got a pin mark"; return 1; }
		[ "$(snap "$f")" = "${TARGET_SNAP[$f]}" ] || { echo "# $f changed: ${TARGET_SNAP[$f]} -> $(snap "$f")"; return 1; }
	done
}
NAMED='org.tierd1.Error.(NotInTenant|NotRegularFile|NoSuchFile)'
# paths_refused PATH: every *Paths method fails the call with a named error.
paths_refused() {
	local m e
	for m in ArchivePaths ReleasePaths RestorePaths PinPaths UnpinPaths RehashPaths; do
		e=$(dbus_err $SEND /org/tierd1 org.tierd1.Manager.$m "array:string:$1")
		[[ $e =~ ^$NAMED$ ]] || { echo "# $m $1: ${e:-accepted, a job was made}"; return 1; }
	done
	echo "#   ${1#$TL_DIR/}: ${e#org.tierd1.Error.}"
}
paths_refused_all() { local p; for p; do paths_refused "$p" || return 1; done; }
# status_refused PATH: FileStatus answers an error for it, no tenant, no state.
status_refused() {
	local out
	out=$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager FileStatus as 1 "$1")
	[[ $out =~ ^a\(ssssttb\)\ 1\ \".*\"\ \"[^\"]+\"\ \"\"\ \"\"\ 0\ 0\ false$ ]] || { echo "# FileStatus: $out"; return 1; }
}
# verbs_refused PATH: tierctl status and its file verbs (by fd) fail with exit 1.
verbs_refused() {
	local v rc bad=0
	for v in status archive "archive --rehash" release restore pin unpin; do
		"$TIERCTL" $v "$1" >/dev/null 2>"$TL_DIR/verb.err"
		rc=$?
		[ $rc = 1 ] || { echo "# tierctl $v $1: exit $rc $(tr '\n' ' ' <"$TL_DIR/verb.err")"; bad=1; }
	done
	return $bad
}

# Targets: beta's files, files of the same filesystem outside every tenant,
# and /etc/hostname (only ever named through a symlink).
for n in lb db toc1 toc2; do target "$SB/t-$n"; done
for n in lo dd bm bm2 toc3; do target "$OUT/t-$n"; done
mv "$OUT/t-bm" "$OUT/bmdir/t-bm" && target "$OUT/bmdir/t-bm"
mv "$OUT/t-bm2" "$OUT/bmdir2/t-bm2" && target "$OUT/bmdir2/t-bm2"
target "$SB/t-dd2"
target /etc/hostname
ln -s "$SB/t-lb" "$SA/l-beta"
ln -s ../beta/t-lb "$SA/l-beta-rel"
ln -s /etc/hostname "$SA/l-host"
ln -s "$OUT/t-lo" "$SA/l-out"
ln -s "$SB" "$SA/d-beta"
mount --bind "$OUT/bmdir" "$SA/bm"
mkdir -p "$VA/bm2" && mount --bind "$OUT/bmdir2" "$VA/bm2"
mkfifo "$SA/fifo"
mknod "$SA/null" c 1 3
mknod "$SA/blk" b "$((16#$(stat -c %t "$LOOPDEV")))" "$((16#$(stat -c %T "$LOOPDEV")))" # the filesystem itself
$PY -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$SA/sock"

check "a symlink to another tenant's file: every *Paths method refuses it with a named error" paths_refused "$VA/l-beta"
check "... also a relative one (../beta/...), and through the subvolume path" paths_refused_all "$VA/l-beta-rel" "$SA/l-beta"
check "... FileStatus (busctl): an error, no tenant or state" status_refused "$VA/l-beta"
check "... tierctl status and its file verbs refuse it (exit 1)" verbs_refused "$VA/l-beta"
check "... beta's file is untouched" untouched "$SB/t-lb"
check "a symlink to /etc/hostname: every *Paths method refuses it" paths_refused "$VA/l-host"
check "... FileStatus (busctl): an error" status_refused "$VA/l-host"
check "... tierctl status and its file verbs refuse it (exit 1)" verbs_refused "$VA/l-host"
check "... /etc/hostname is untouched" untouched /etc/hostname
check "a symlink to a file of the same filesystem outside every tenant: *Paths refuse it" paths_refused "$VA/l-out"
check "... tierctl status and its file verbs refuse it" verbs_refused "$VA/l-out"
check "... the file is untouched" untouched "$OUT/t-lo"
check "a directory symlink into another tenant (d-beta/FILE): *Paths refuse it" paths_refused "$VA/d-beta/t-db"
check "... FileStatus: an error" status_refused "$VA/d-beta/t-db"
check "... tierctl status and its file verbs refuse it" verbs_refused "$VA/d-beta/t-db"
check "... beta's file is untouched" untouched "$SB/t-db"
check "'..' climbing out of the view to a file outside every tenant: *Paths refuse it" paths_refused "$VA/../../fs/outside/t-dd"
check "... out of the subvolume into another tenant: *Paths refuse it" paths_refused "$SA/../beta/t-dd2"
check "... '..' after a real directory (sub/../../beta/...): refused" paths_refused "$VA/sub/../../beta/t-dd2"
check "... FileStatus: an error" status_refused "$VA/../../fs/outside/t-dd"
check "... tierctl's verbs refuse the outside file" verbs_refused "$VA/../../fs/outside/t-dd"
check "... both files are untouched" untouched "$OUT/t-dd" "$SB/t-dd2"
check "a bind mount of an outside directory in the subvolume: *Paths refuse its file" paths_refused_all "$SA/bm/t-bm" "$VA/bm/t-bm"
check "... FileStatus: an error" status_refused "$SA/bm/t-bm"
check "... tierctl status and its file verbs refuse it" verbs_refused "$SA/bm/t-bm"
check "... a bind mount placed on the view: refused too" paths_refused "$VA/bm2/t-bm2"
check "... tierctl's verbs refuse that one" verbs_refused "$VA/bm2/t-bm2"
check "... both outside files are untouched" untouched "$OUT/bmdir/t-bm" "$OUT/bmdir2/t-bm2"
for node in fifo null blk sock; do
	check "a $node in the subvolume: every *Paths method refuses it" paths_refused "$VA/$node"
	check "... FileStatus: an error" status_refused "$VA/$node"
	check "... tierctl status and its file verbs refuse it" verbs_refused "$VA/$node"
done
check "... and none of them got a stub or a pin mark" \
	bash -c "! getfattr -h -d -m '^security\.tierd' '$SA/fifo' '$SA/null' '$SA/blk' '$SA/sock' 2>/dev/null | grep -q tierd"
check "tierd is still up, and serves alpha's own file" bash -c "kill -0 $TL_TIERD_PID && '$TIERCTL' archive '$VA/own'"

# A file swapped between check and use: a job waits behind another (beta's
# 16 released files restoring with beta's worker stopped: every job slot,
# until the worker goes on), one of its files is swapped for a symlink
# (or a directory of its path for a symlink or a bind mount) leading outside.
for i in $(seq 16); do head -c 1M /dev/urandom >"$VB/blk$i"; done
"$TIERCTL" archive "$VB"/blk* >/dev/null
BLOCKER= BETA_WORKER=
blocker() { # a RestorePaths job of 16 released files, beta's worker stopped: the job slots are busy
	[ -z "$BLOCKER" ] || wait_job "$BLOCKER" || echo "# the last blocker did not end"
	"$TIERCTL" release "$VB"/blk* >/dev/null || echo "# cannot release the blocker's files"
	BETA_WORKER=$($BUSCTL get-property org.tierd1 /org/tierd1/tenant/beta org.tierd1.Tenant WorkerPid | cut -d' ' -f2)
	kill -STOP "$BETA_WORKER"
	BLOCKER=$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager RestorePaths as 16 "$VB"/blk* | job_of)
	[ -n "$BLOCKER" ] || echo "# no blocker job"
}
unblock() { kill -CONT "$BETA_WORKER"; }
job_state() { $BUSCTL get-property org.tierd1 "$1" org.tierd1.Job State 2>/dev/null; }
# victim_failed JOB INDEX: the job ended, its file #INDEX with a named error.
victim_failed() {
	wait_job "$1" || { echo "# no JobRemoved for $1"; return 1; }
	job_block "$1" | grep -A2 -E "^ +uint32 $2\$" | grep -A1 -E "string \"$NAMED\"" | sed 's/^ */#   /' | grep . ||
		{ echo "# JobRemoved:"; job_block "$1" | sed 's/^/#   /'; return 1; }
}
qpaths() { for i in $(seq 0 9); do printf '%s ' "$VA/q/f$i"; done; }
qdpaths() { for i in $(seq 0 9); do printf '%s ' "$VA/qd/f$i"; done; }
job_done() { $BUSCTL get-property org.tierd1 "$1" org.tierd1.Job FilesDone 2>/dev/null; }
# toctou SETUP SWAP METHOD PATH...: SETUP, a blocker, METHOD on the paths,
# then SWAP; the job must still be waiting with no file started once the
# swap is done (else, a blocker too short: up to 3 tries).
toctou() {
	local setup=$1 swap=$2 method=$3 try
	shift 3
	for try in 1 2 3; do
		$setup
		blocker
		J=$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager "$method" as $# "$@" | job_of)
		$swap
		W="$(job_state "$J") $(job_done "$J")"
		unblock
		[ "$W" = 's "waiting" u 0' ] && return 0
		echo "# try $try: $method ${J:-(no job)} was '${W}' after the swap; blocker ${BLOCKER:-none}: $(job_state "$BLOCKER")"
		wait_job "$J"
	done
	return 1
}
new_q() { rm -rf "$SA/q" && mkdir -p "$SA/q" && for i in $(seq 0 9); do head -c 50000 /dev/urandom >"$SA/q/f$i"; done; }
archived_q() { new_q && "$TIERCTL" archive $(qpaths) >/dev/null; }
new_qd() { umount "$SA/qd" 2>/dev/null; rm -rf "$SA/qd" "$SA/qd.real" && mkdir -p "$SA/qd" && for i in $(seq 0 9); do head -c 50000 /dev/urandom >"$SA/qd/f$i"; done; }
swap_f9_out() { ln -s "$OUT/t-toc3" "$SA/q/.swap" && mv -T "$SA/q/.swap" "$SA/q/f9"; }
swap_f9_beta() { ln -s "$SB/t-toc1" "$SA/q/.swap" && mv -T "$SA/q/.swap" "$SA/q/f9"; }
swap_qd_link() { mv "$SA/qd" "$SA/qd.real" && ln -s "$OUT/qd" "$SA/qd"; }
swap_qd_mount() { mount --bind "$OUT/qb" "$SA/qd"; }
mkdir -p "$OUT/qd" "$OUT/qb"
for i in $(seq 0 9); do target "$OUT/qd/f$i"; target "$OUT/qb/f$i"; done

check "ArchivePaths job waiting behind another when its last file is swapped for a symlink out" \
	toctou new_q swap_f9_out ArchivePaths $(qpaths)
check "... the job reports a named error for that file" victim_failed "$J" 9
check "... the outside file is not archived, not touched" untouched "$OUT/t-toc3"
check "... the job's other files are archived" test "$(state_of "$VA/q/f3")" = archived

"$TIERCTL" archive "$SB/t-toc1" >/dev/null
TARGET_SNAP[$SB/t-toc1]=$(snap "$SB/t-toc1")
check "ReleasePaths job waiting when its last file is swapped for a symlink to beta's archived file" \
	toctou archived_q swap_f9_beta ReleasePaths $(qpaths)
check "... the job reports a named error for that file" victim_failed "$J" 9
still_archived() { [ "$(snap "$1")" = "${TARGET_SNAP[$1]}" ] && [ "$(tl_allocated "$1")" -gt 0 ] || { echo "# $1: $(snap "$1")"; return 1; }; }
check "... beta's file is not released: same stub, same bytes, same blocks" still_archived "$SB/t-toc1"
check "... the job's other files are released" test "$(state_of "$VA/q/f3")" = released

check "ArchivePaths job waiting when the directory of its files is swapped for a symlink out" \
	toctou new_qd swap_qd_link ArchivePaths $(qdpaths)
check "... every file of it fails with a named error" victim_failed "$J" 0
check "... no outside file is touched" untouched $(for i in $(seq 0 9); do echo "$OUT/qd/f$i"; done)
rm "$SA/qd" && mv "$SA/qd.real" "$SA/qd"

check "ArchivePaths job waiting when an outside directory is bind-mounted over its files' directory" \
	toctou new_qd swap_qd_mount ArchivePaths $(qdpaths)
wait_job "$J"
check "... no outside file is touched" untouched $(for i in $(seq 0 9); do echo "$OUT/qb/f$i"; done)
umount "$SA/qd"
wait_job "$BLOCKER"
check "tierd is still up after the swaps" kill -0 "$TL_TIERD_PID"

# A job's path is walked on tierd's loop from the kernel's lookup cache
# only (fileref.c: RESOLVE_CACHED; a level missing there is a lookup in
# the filesystem, as deep as the tenant chose): one the cache lost is
# walked on a thread first (pathwarm.c), and the job goes on.
DEEPD=$SA/deep/$(seq -f d%g 100 | paste -sd/)
mkdir -p "$DEEPD" && head -c 70000 /dev/urandom >"$DEEPD/f" && cp "$DEEPD/f" "$TL_DIR/deep.orig"
VDEEP=$VA/${DEEPD#"$SA"/}/f
cold_job() { # METHOD STATE: METHOD on the deep file with the dentries dropped just before, then its state
	local j
	sync
	echo 2 >/proc/sys/vm/drop_caches
	j=$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager "$1" as 1 "$VDEEP" | job_of) && wait_job "$j" &&
		[ "$(state_of "$VDEEP")" = "$2" ] || { echo "# $1: ${j:-no job}, state $(state_of "$VDEEP")"; return 1; }
}
check "ArchivePaths of a file 100 directories deep, its dentries dropped: archived" cold_job ArchivePaths archived
check "... ReleasePaths the same: released" cold_job ReleasePaths released
status_cold() { # FileStatus of the deep file and of a missing one, dentries dropped: read on the thread that walked them
	local out
	sync
	echo 2 >/proc/sys/vm/drop_caches
	out=$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager FileStatus as 2 "$VDEEP" "$VDEEP.none")
	[[ $out == *'"" "alpha" "released" 70000 0 false'* && $out == *'No such file or directory" "" "" 0 0 false'* ]] ||
		{ echo "# $out"; return 1; }
}
check "... FileStatus of it and of a missing file beside it, dentries dropped: released, and no such file" status_cold
check "... and it reads back right" cmp "$VDEEP" "$TL_DIR/deep.orig"
rm -rf "$SA/deep"
# Through a symlink inside the tenant, on this strictatime mount: the
# loop's walks from the lookup cache pass it (catalog.sh makes sure its
# atime is due by then; here it rarely is).
mkdir -p "$SA/real" && head -c 30000 /dev/urandom >"$SA/real/f" && cp "$SA/real/f" "$TL_DIR/via.orig" && ln -s real "$SA/via"
via_job() { # METHOD STATE
	local j
	j=$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager "$1" as 1 "$VA/via/f" | job_of) && wait_job "$j" &&
		[ "$(state_of "$VA/real/f")" = "$2" ] && ! job_block "$j" | grep -q TryAgain ||
		{ echo "# $1: ${j:-no job}, state $(state_of "$VA/real/f")"; job_block "$j" | sed 's/^/#   /'; return 1; }
}
check "ArchivePaths through a symlink to a directory (strictatime): archived" via_job ArchivePaths archived
check "... ReleasePaths through it: released" via_job ReleasePaths released
check "... RestorePaths through it: restored whole" via_job RestorePaths archived
check "... and it reads back right" cmp "$VA/via/f" "$TL_DIR/via.orig"
rm -rf "$SA/real" "$SA/via"

# --- 2. Stubs ---------------------------------------------------------------

echo "# stubs"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
head -c 200000 /dev/urandom >"$ORIG/u-own"
cp "$ORIG/u-own" "$VA/u-own"
echo "never archived" >"$VA/u-new"
chown 65534:65534 "$VA/u-own" "$VA/u-new"
"$TIERCTL" archive "$VA/u-own" >/dev/null && "$TIERCTL" pin "$VA/u-own" >/dev/null
STUB_BEFORE=$(stub_of "$VA/u-own")
# denied FILE SETFATTR-ARGS...: uid 65534 runs setfattr, which fails with
# EPERM or EACCES.
denied() {
	local f=$1 err
	shift
	err=$(as_nobody setfattr "$@" "$f" 2>&1) && { echo "# setfattr $* succeeded"; return 1; }
	echo "$err" | grep -Eq 'Operation not permitted|Permission denied' || { echo "# $err"; return 1; }
}
check "uid 65534 owns its file in the view and may write it" as_nobody bash -c "echo more >>'$VA/u-new'"
check "uid 65534 may read its file's stub" bash -c "setpriv --reuid=65534 --regid=65534 --clear-groups getfattr --absolute-names -n security.tierd '$VA/u-own' >/dev/null"
check "... cannot create security.tierd on its file (EPERM/EACCES)" denied "$VA/u-new" -n security.tierd -v "$STUB_BEFORE"
check "... cannot change it (a forged state=released)" denied "$VA/u-own" -n security.tierd -v "${STUB_BEFORE/state=archived/state=released}"
check "... cannot delete it" denied "$VA/u-own" -x security.tierd
check "... cannot create security.tierd.pin" denied "$VA/u-new" -n security.tierd.pin -v 1
check "... cannot change the pin mark" denied "$VA/u-own" -n security.tierd.pin -v 0
check "... cannot delete the pin mark" denied "$VA/u-own" -x security.tierd.pin
check "... nor through the raw subvolume path" denied "$SA/u-own" -x security.tierd
if as_nobody unshare -r true 2>/dev/null; then
	check "... nor as root of a user namespace of its own (unshare -r)" \
		bash -c "err=\$(setpriv --reuid=65534 --regid=65534 --clear-groups unshare -r setfattr -x security.tierd '$VA/u-own' 2>&1); [ \$? != 0 ] && echo \"\$err\" | grep -Eq 'Operation not permitted|Permission denied'"
	check "... nor the pin mark there" \
		bash -c "! setpriv --reuid=65534 --regid=65534 --clear-groups unshare -r setfattr -x security.tierd.pin '$VA/u-own' 2>/dev/null"
else
	skip "unprivileged user namespaces are not available"
fi
check "... its file's stub and pin mark are as they were" \
	bash -c "[ \"\$(getfattr --absolute-names --only-values -n security.tierd '$VA/u-own')\" = '$STUB_BEFORE' ] && getfattr --absolute-names -n security.tierd.pin '$VA/u-own' >/dev/null"
check "... and no stub or pin mark on the other" bash -c "! getfattr -d -m '^security\.tierd' '$VA/u-new' 2>/dev/null | grep -q tierd"
# The production build has no fault switch a tenant could pull.
"$TIERCTL" unpin "$VA/u-own" >/dev/null && "$TIERCTL" release "$VA/u-own" >/dev/null
as_nobody setfattr -n user.tierd-test-die -v 1 "$VA/u-own"
check "user.tierd-test-die set by the tenant user on a released file: a read gets the right bytes" \
	as_nobody cmp "$VA/u-own" "$ORIG/u-own"
check "... and tierd lives on" kill -0 "$TL_TIERD_PID"

# Stubs written corrupt by root: EIO and a logged reason for that file, no
# crash of tierd or a worker, other files unaffected.
CORRUPT="badver v0 nover nokey nosha garbage nul trunc trunclines empty long hugesize bigsize ranges rangesovf rangesfar chunk0 keyout tenantbad mode"
for c in ctl $CORRUPT; do head -c $((2 << 20)) /dev/urandom >"$ORIG/c-$c"; cp "$ORIG/c-$c" "$VA/c-$c"; done
"$TIERCTL" archive "$VA"/c-* >/dev/null && "$TIERCTL" release "$VA"/c-* >/dev/null
hexof() { printf '0x'; od -An -v -tx1 | tr -d ' \n'; }
corrupt_value() { # NAME: the bytes for that variant of c-NAME's stub, as setfattr -v takes them (0x...)
	local s S
	S=$(stub_of "$SA/c-$1")$'\n'
	case $1 in
	badver) s="v=2${S#v=1}" ;;
	v0) s="v=0${S#v=1}" ;;
	nover) s=$(printf '%s' "$S" | sed '/^v=/d')$'\n' ;;
	nokey) s=$(printf '%s' "$S" | sed '/^key=/d')$'\n' ;;
	nosha) s=$(printf '%s' "$S" | sed '/^sha256=/d')$'\n' ;;
	garbage) head -c 300 /dev/urandom | hexof; return ;;
	nul) { printf '%s' "${S:0:30}"; printf '\0'; printf '%s' "${S:31}"; } | hexof; return ;;
	trunc) s=${S:0:$((${#S} / 2))} ;;
	trunclines) s=$(printf '%s' "$S" | head -n 5)$'\n' ;;
	empty) return ;;
	long) s=$S$(printf 'x%.0s' $(seq 9000)) ;;
	hugesize) s=$(printf '%s' "$S" | sed 's/^size=.*/size=99999999999999999999999/')$'\n' ;;
	bigsize) s=$(printf '%s' "$S" | sed 's/^size=.*/size=9223372036854775807/')$'\n' ;;
	ranges) s=$(printf '%s' "$S" | sed 's/^state=.*/state=partial/; s/^ranges=.*/ranges=0+4096,4194304+1048576/')$'\n' ;;
	rangesovf) s=$(printf '%s' "$S" | sed 's/^state=.*/state=partial/; s/^ranges=.*/ranges=18446744073709551615+2/')$'\n' ;;
	rangesfar) s=$(printf '%s' "$S" | sed 's/^state=.*/state=partial/; s/^size=.*/size=1099511627776/; s/^ranges=.*/ranges=1099511623680+4096/')$'\n' ;;
	chunk0) s=$(printf '%s' "$S" | sed 's/^chunk=.*/chunk=0/')$'\n' ;;
	keyout) s=$(printf '%s' "$S" | sed 's|^key=.*|key=sha256/../../../../../etc/hostname|')$'\n' ;;
	tenantbad) s=$(printf '%s' "$S" | sed 's|^tenant=.*|tenant=../alpha|')$'\n' ;;
	mode) s=$(printf '%s' "$S" | sed 's/^mode=.*/mode=40755/')$'\n' ;;
	esac
	printf '%s' "$s" | hexof
}
PID0=$TL_TIERD_PID W0=$(worker_pids) LOG0=$(wc -l <"$TL_TIERD_LOG")
GOOD_STUB=$(stub_of "$SA/c-badver")$'\n'
for c in $CORRUPT; do
	setfattr -n security.tierd -v "$(corrupt_value "$c")" "$SA/c-$c" 2>"$TL_DIR/setfattr.err" ||
		echo "# cannot write the '$c' stub: $(cat "$TL_DIR/setfattr.err")"
done
# eio FILE: a read of its first 4 KiB, and one in its middle, get EIO; tierd
# logged an error since.
eio() {
	local lines err
	lines=$(wc -l <"$TL_TIERD_LOG")
	for off in 0 $((1 << 20)); do
		err=$(timeout 10 "$PREAD" "$1" "$off" 4096 2>&1 >/dev/null) && { echo "# read at $off succeeded"; return 1; }
		[[ $err == *"Input/output error"* ]] || { echo "# read at $off: ${err:-timed out}"; return 1; }
	done
	sleep 0.1
	tail -n +$((lines + 1)) "$TL_TIERD_LOG" | grep -Ei 'stub|EIO|error|fail' | head -n 1 | sed 's/^/#   logged: /' | grep . ||
		{ echo "# nothing logged"; return 1; }
}
for c in $CORRUPT; do
	check "a stub written corrupt ($c): reads get EIO, the reason logged" eio "$VA/c-$c"
done
no_blocks() { local c; for c in $CORRUPT; do [ "$(stat -c %b "$SA/c-$c")" = 0 ] || { echo "# c-$c: $(stat -c %b "$SA/c-$c") blocks"; return 1; }; done; }
check "... nothing was written into any of them (no blocks)" no_blocks
check "... every file kept its size" \
	bash -c "for c in $CORRUPT; do [ \$(stat -c %s '$SA/c-'\$c) = $((2 << 20)) ] || { echo \"# c-\$c: \$(stat -c %s '$SA/c-'\$c)\"; exit 1; }; done"
verbs_fail() { # tierctl restore and release fail for each; status too where the record does not parse
	local c v rc
	for c in $CORRUPT; do
		[ $c = rangesfar ] && continue # below
		for v in restore release status; do
			# Records that parse (a size the file does not have): status
			# may show them, and releasing a released file does nothing.
			[ $v != restore ] && [ $c = bigsize ] && continue
			timeout 20 "$TIERCTL" $v "$VA/c-$c" >/dev/null 2>&1
			rc=$?
			[ $rc = 1 ] || { echo "# tierctl $v c-$c: exit $rc"; return 1; }
		done
	done
	kill -0 "$TL_TIERD_PID"
}
check "... tierctl restore, release (and status) of them fail (exit 1), tierd up" verbs_fail
check "... tierd is the same process ($PID0)" bash -c "kill -0 $PID0 && [ $TL_TIERD_PID = $PID0 ]"
check "... its workers are the same ($W0)" test "$(worker_pids)" = "$W0"
check "... no worker died" bash -c "! tail -n +$((LOG0 + 1)) '$TL_TIERD_LOG' | grep -Eq 'killed by signal|exited with|replacement worker'"
check "... a released file with a good stub reads right" cmp "$VA/c-ctl" "$ORIG/c-ctl"
setfattr -n security.tierd -v "$GOOD_STUB" "$SA/c-badver"
check "... and a corrupt one whose stub root puts back reads right" cmp "$VA/c-badver" "$ORIG/c-badver"
# A whole restore of a partial stub whose size says 1 TiB (the file has 2 MiB).
cp "$SB/t-toc2" "$ORIG/t-toc2"
"$TIERCTL" archive "$VB/t-toc2" >/dev/null
"$TIERCTL" release "$VA/c-ctl" "$VA/c-badver" "$VB/t-toc2" >/dev/null
timeout 20 "$TIERCTL" restore "$VA/c-rangesfar" >/dev/null 2>&1
RC=$?
sleep 1
check "tierctl restore of a partial stub claiming 1 TiB fails within 20 s (exit $RC)" test "$RC" = 1
check "... tierd still answers on the bus" bash -c "timeout 5 '$TIERCTL' status '$VA/c-ctl' >/dev/null"
check "... and still serves readers of other files" timeout 10 cmp "$VA/c-ctl" "$ORIG/c-ctl"
check "... and of the other tenant" timeout 10 cmp "$VB/t-toc2" "$ORIG/t-toc2"
check "... no worker was replaced ($W0)" test "$(worker_pids)" = "$W0"
if ! timeout 5 "$TIERCTL" status >/dev/null 2>&1; then
	echo "# tierd hangs: $(cat /proc/$TL_TIERD_PID/wchan 2>/dev/null); the worker's last words:"
	grep -v '^tierd\[' "$TL_TIERD_LOG" | tail -n 2 | sed 's/^/#   /'
	echo "#   $(grep -c 'error: request [0-9]* (' "$TL_TIERD_LOG") failed requests logged by workers; SIGKILL and a new tierd for the rest"
	kill -KILL "$TL_TIERD_PID"; wait "$TL_TIERD_PID" 2>/dev/null
	tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }
fi

# --- 3. Archive safety ------------------------------------------------------

echo "# a file written during its upload"
head -c 300M /dev/urandom >"$VA/big"
upload_started() { # the worker's temporary object in alpha's store has grown past 4 MiB
	for _ in $(seq 200); do
		find "$TL_DIR/store/alpha" -name '*.tmp.*' -size +4M 2>/dev/null | grep -q . && return 0
		sleep 0.02
	done
	return 1
}
OLD_SHA=$(sha256sum <"$VA/big" | cut -c1-64)
"$TIERCTL" archive "$VA/big" >"$TL_DIR/arch.out" 2>&1 &
ARCH=$!
UP=0; upload_started && UP=1
head -c 4096 /dev/urandom | dd of="$VA/big" bs=4096 seek=$((100 << 8)) conv=notrunc status=none # at 100 MiB
wait "$ARCH"; RC=$?
cp "$VA/big" "$ORIG/big"
check "tierctl archive of a 300 MiB file written during its upload (upload seen: $UP) fails (exit 1)" \
	bash -c "[ $UP = 1 ] && [ $RC = 1 ]"
echo "# tierctl said: $(tr '\n' ' ' <"$TL_DIR/arch.out")"
check "... it is not archived (state $(state_of "$VA/big"))" test "$(state_of "$VA/big")" != archived
archived_as() { # FILE SHA: the stub says archived (clean) with that content
	stub_of "$1" | grep -qx state=archived && stub_of "$1" | grep -qx "sha256=$2"
}
check_fails "... no stub records the old content as archived" archived_as "$VA/big" "$OLD_SHA"
check_fails "... a release is refused" "$TIERCTL" release "$VA/big"
check "... and it holds the written bytes" cmp "$VA/big" "$ORIG/big"
check "archived again when nobody writes it, then released, it reads back" \
	bash -c "'$TIERCTL' archive '$VA/big' && '$TIERCTL' release '$VA/big' && cmp '$VA/big' '$ORIG/big'"

# The same through a shared mapping: its stores change neither mtime nor
# ctime and raise no event until it is closed.
rm -f "$TL_DIR/go1" "$TL_DIR/go2" "$TL_DIR/ready"
head -c 200M /dev/urandom >"$VA/mapped"
$PY - "$VA/mapped" "$TL_DIR" <<'PY' &
import mmap, os, sys, time
path, d = sys.argv[1:]
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED)
m[0:4096] = os.urandom(4096)          # the page is dirty and writable now
open(d + "/ready", "w").close()
while not os.path.exists(d + "/go1"): time.sleep(0.005)
m[0:4096] = os.urandom(4096)          # after the upload read it: no fault, no mtime
open(d + "/wrote", "w").close()
while not os.path.exists(d + "/go2"): time.sleep(0.005)
m.close(); os.close(fd)
PY
MAPPER=$!
for _ in $(seq 100); do [ -e "$TL_DIR/ready" ] && break; sleep 0.05; done
OLD_SHA=$(sha256sum <"$VA/mapped" | cut -c1-64)
"$TIERCTL" archive "$VA/mapped" >/dev/null 2>&1 &
ARCH=$!
UP=0; upload_started && UP=1
touch "$TL_DIR/go1"
for _ in $(seq 100); do [ -e "$TL_DIR/wrote" ] && break; sleep 0.05; done
wait "$ARCH"
MID=$(state_of "$VA/mapped")
check_fails "while the mapping is open (state $MID), a release is refused" "$TIERCTL" release "$VA/mapped"
touch "$TL_DIR/go2"
wait "$MAPPER"
sleep 0.3
cp "$VA/mapped" "$ORIG/mapped"
check "a file changed through a shared mapping during its upload ($UP): once closed, not archived (state $(state_of "$VA/mapped"))" \
	bash -c "[ \"\$('$TIERCTL' status --json '$VA/mapped' | sed -n 's/.*\"state\":\"\([a-z]*\)\".*/\1/p')\" != archived ]"
check_fails "... no stub records the old content as archived" archived_as "$VA/mapped" "$OLD_SHA"
check_fails "... a release is refused" "$TIERCTL" release "$VA/mapped"
check "... and it holds the written bytes" cmp "$VA/mapped" "$ORIG/mapped"
rm -f "$VA/mapped" "$VA/big"

# A restore puts back the mode and capabilities the inode had, never the
# archive's: a setuid bit or a capability taken away after the archive
# (before the release, or while released) stays away.
echo "# restores keep a later chmod u-s and setcap -r"
head -c 300000 /dev/urandom >"$ORIG/suid"
cp "$ORIG/suid" "$VA/suid"
chown 65534 "$VA/suid"
chmod 4755 "$VA/suid"
setcap cap_net_raw+ep "$VA/suid"
timeout 120 "$TIERCTL" archive "$VA/suid" >/dev/null
chmod u-s "$VA/suid"
check "u-s after the archive: released (mode $(stat -c %a "$VA/suid"))" timeout 60 "$TIERCTL" release "$VA/suid"
check "... the mode is still 755 after the punch" test "$(stat -c %a "$VA/suid")" = 755
check "... read back: right bytes, and still 755 (not the archive's 4755)" bash -c "
	timeout 60 cmp $VA/suid $ORIG/suid && [ \$(stat -c %a $VA/suid) = 755 ]"
timeout 60 "$TIERCTL" release "$VA/suid" >/dev/null
setcap -r "$VA/suid"
check "setcap -r while released (no capability now)" bash -c "[ -z \"\$(getcap $VA/suid)\" ]"
check "... read back: right bytes, and no capability came back" bash -c "
	timeout 60 cmp $VA/suid $ORIG/suid && [ -z \"\$(getcap $VA/suid)\" ]"
rm -f "$VA/suid"

# tierd SIGKILLed at a random moment of archive or of release.
echo "# tierd killed during archive and release"
KF="k1 k2 k3 k4"
head -c 24M /dev/urandom >"$ORIG/k1"; head -c 24M /dev/urandom >"$ORIG/k2"
head -c 8M /dev/urandom >"$ORIG/k3"; head -c 300000 /dev/urandom >"$ORIG/k4"
for f in $KF; do cp "$ORIG/$f" "$VA/$f"; done
scribble() { # new bytes into every file (a released one is restored first), and into the originals
	local f off
	head -c 4096 /dev/urandom >"$TL_DIR/bytes"
	for f in $KF; do
		off=$((RANDOM % ($(stat -c %s "$ORIG/$f") / 4096)))
		dd if="$TL_DIR/bytes" of="$VA/$f" bs=4096 seek=$off conv=notrunc status=none || return 1
		dd if="$TL_DIR/bytes" of="$ORIG/$f" bs=4096 seek=$off conv=notrunc status=none
	done
}
# consistent: each file has no stub or a valid one (tierctl status reads a
# state); archived: the stub's SHA-256 is the bytes'; all read back.
consistent() { # LABEL: the states found are counted under LABEL
	local f st s
	for f in $KF; do
		st=$(state_of "$VA/$f")
		echo "${st:-none}" >>"$TL_DIR/landed.$1"
		case $st in resident | archived | partial | released | dirty) ;; *)
			echo "# $f: no valid state ($("$TIERCTL" status "$VA/$f" 2>&1 | tr '\n' ' '))"; return 1 ;; esac
		if [ "$st" = archived ]; then
			s=$(stub_of "$SA/$f" | sed -n 's/^sha256=//p')
			[ "$s" = "$(sha256sum <"$SA/$f" | cut -c1-64)" ] || { echo "# $f: archived, but its bytes are not the stub's"; return 1; }
		fi
		cmp -s "$VA/$f" "$ORIG/$f" || { echo "# $f ($st) does not read back: $(cmp "$VA/$f" "$ORIG/$f" 2>&1)"; return 1; }
	done
}
kill_at_random() { # VERB MAXMS: tierctl VERB of every file, tierd SIGKILLed within MAXMS, restarted
	"$TIERCTL" "$1" $(for f in $KF; do echo "$VA/$f"; done) >/dev/null 2>&1 &
	local ctl=$!
	sleep "$(printf '0.%03d' $((RANDOM % $2)))"
	kill -KILL "$TL_TIERD_PID"
	wait "$TL_TIERD_PID" 2>/dev/null
	tl_tierd_start "$TL_DIR/policy.json" >/dev/null 2>&1 || return 1
	# It ends when it hears tierd is gone (with a holder: once the new
	# tierd has taken over from the dead one's keeper).
	timeout 10 tail --pid=$ctl -f /dev/null || { echo "# tierctl $1 still waits 10 s after a new tierd serves" >>"$TL_DIR/ctl-hangs"; kill "$ctl"; }
	wait "$ctl" 2>/dev/null
	return 0
}
kill_rounds() { # NAME ROUNDS
	local n bad=0 why
	for n in $(seq "$2"); do
		why=
		scribble || why="scribble failed"
		[ -z "$why" ] && { kill_at_random archive 400 || why="tierd did not restart after a kill during archive"; }
		[ -z "$why" ] && { why=$(consistent archive) || why="after a kill during archive: $why"; }
		[ -z "$why" ] && { "$TIERCTL" archive $(for f in $KF; do echo "$VA/$f"; done) >/dev/null || why="archive after the kill failed"; }
		[ -z "$why" ] && { kill_at_random release 60 || why="tierd did not restart after a kill during release"; }
		[ -z "$why" ] && { why=$(consistent release) || why="after a kill during release: $why"; }
		[ -z "$why" ] && { "$TIERCTL" release $(for f in $KF; do echo "$VA/$f"; done) >/dev/null || why="release after the kill failed"; }
		[ -z "$why" ] && { why=$(consistent again) || why="released again: $why"; }
		sync -f "$SA"
		if [ -n "$why" ]; then
			bad=$((bad + 1))
			echo "# $1, round $n: $why"
			grep -Ei "error|warning" "$TL_TIERD_LOG" | grep -v "no holder" | tail -n 5 | sed 's/^/#   /'
		fi
	done
	for l in archive release; do
		echo "# $1: states found after the kills during $l: $(sort "$TL_DIR/landed.$l" 2>/dev/null | uniq -c | tr -s ' \n' ' ')"
	done
	rm -f "$TL_DIR"/landed.*
	check "$1: $2 rounds of SIGKILL during archive and during release, every file consistent and read back" test "$bad" = 0
	check "... a tierctl waiting on its job ended each time" bash -c "! cat '$TL_DIR/ctl-hangs' 2>/dev/null | grep ."
	rm -f "$TL_DIR/ctl-hangs"
}
CORRUPT_LINES=$(grep -c 'corrupt stub' "$TL_TIERD_LOG")
kill_rounds "with tierd-holder" 5
kill -INT "$TL_TIERD_PID" && wait "$TL_TIERD_PID"
TL_TIERD_PID=
kill -KILL "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null # guarding: SIGTERM would not end it
export TL_TIERD_ARGS=--no-holder
check "tierd starts without a holder" tl_tierd_start "$TL_DIR/policy.json"
kill_rounds "without a holder" 5
check "... no stub was ever found corrupt after a kill" test "$(grep -c 'corrupt stub' "$TL_TIERD_LOG")" = "$CORRUPT_LINES"
tl_summary
