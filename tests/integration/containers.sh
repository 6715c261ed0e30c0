#!/bin/bash
# Containers, for real: runc with a busybox rootfs and tierd's OCI hook
# (tierctl oci-hook) in config.json. Two containers of tenant alpha, one of
# beta, one without the annotation, one whose pod namespace may not use the
# tenant; reads of released files inside them, by a process in a mount
# namespace of its own too; a container's worker killed while the others
# read; detach by poststop, by DetachContainer on a running container and by
# the death of the container's init; nothing left behind.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
TIERCTL=$BUILD/tierctl
BUSCTL="busctl --system"
AWK="$TL_ROOT/tests/lib/introspect.awk"
P=tt$$ # container ids: unique to this run
IDS=()

containers_cleanup() {
	for id in "${IDS[@]}"; do runc delete --force "$id" >/dev/null 2>&1; done
	tl_cleanup
}
trap containers_cleanup EXIT

if ! command -v runc >/dev/null || ! [ -x /bin/busybox ]; then
	skip "runc or busybox-static missing (make deps installs them)"
	tl_summary
	exit 0
fi

tl_loopfs btrfs 1G "$TL_DIR/fs" || { not_ok "mkfs"; tl_summary; exit 1; }
for t in alpha beta; do tl_subvol btrfs "$TL_DIR/fs/$t"; done
mkdir -p "$TL_DIR/store" "$TL_DIR/etc"
cat >"$TL_DIR/etc/policy.json" <<EOF
{"kubernetes": true, "tenants": [
  {"name": "alpha", "subvolume": "$TL_DIR/fs/alpha", "mount": "$TL_DIR/views/alpha",
   "backend": "file://$TL_DIR/store/alpha", "chunk": "64K", "namespaces": ["team-a"], "containers": ["$P-plain-*"],
   "trace_window": "20s"},
  {"name": "beta", "subvolume": "$TL_DIR/fs/beta", "mount": "$TL_DIR/views/beta",
   "backend": "file://$TL_DIR/store/beta", "namespaces": ["team-b"]}]}
EOF
tl_dbus_start
# With tierd-holder: SIGTERM hands over to the next tierd (SIGINT stops for good).
"$BUILD/tierd-holder" --socket "$TL_DIR/holder.sock" >>"$TL_DIR/holder.log" 2>&1 &
TL_PIDS+=($!)
export TL_TIERD_ARGS="--holder $TL_DIR/holder.sock"
check "tierd starts" tl_tierd_start "$TL_DIR/etc/policy.json" || { tl_summary; exit 1; }

# Files: a released one per reader, so that every read below needs a fill.
VA=$TL_DIR/views/alpha VB=$TL_DIR/views/beta
for i in $(seq 1 12); do head -c $((3 * 1024 * 1024 + i * 4099)) /dev/urandom >"$VA/f$i"; done
head -c 64M /dev/urandom >"$VA/big"
echo "beta's own" >"$VB/only-beta"
head -c 1M /dev/urandom >"$VB/b1"
sum() { sha256sum "$1" | cut -d' ' -f1; }
declare -A SUM
for f in "$VA"/* "$VB"/*; do SUM[$f]=$(sum "$f"); done
check "archive and release both tenants' files" bash -c "
	$TIERCTL archive $VA/* $VB/* >/dev/null && $TIERCTL release $VA/* $VB/* >/dev/null"
check "... released: no blocks left" test "$(tl_allocated "$VA/f1")" = 0

# A busybox rootfs and a bundle per container.
BASE=$TL_DIR/rootfs
mkdir -p "$BASE/bin" "$BASE/proc" "$BASE/sys" "$BASE/dev" "$BASE/tmp"
cp /bin/busybox "$BASE/bin/"
for c in sh cat ls sleep sha256sum stat unshare mount head dd wc; do ln -s busybox "$BASE/bin/$c"; done
BUS_ENV="DBUS_SYSTEM_BUS_ADDRESS=$DBUS_SYSTEM_BUS_ADDRESS"

# bundle ID TENANT NAMESPACE [userns]: a bundle whose config.json carries the
# hooks and (if TENANT is not "-") tierd's annotations.
bundle() {
	local id=$1 tenant=$2 ns=$3 userns=${4:-} b=$TL_DIR/bundles/$1
	mkdir -p "$b"
	cp -a "$BASE" "$b/rootfs"
	(cd "$b" && runc spec)
	python3 - "$b/config.json" "$tenant" "$ns" "$BUILD/tierctl" "$BUS_ENV" "$userns" <<'PY'
import json, sys
path, tenant, ns, tierctl, env, userns = sys.argv[1:]
c = json.load(open(path))
c["process"]["terminal"] = False
c["process"]["args"] = ["sleep", "100000"]
c["root"]["readonly"] = False
ann = {}
if tenant != "-":
    ann = {"tierd.io/tenant": tenant, "tierd.io/mount-path": "/data"}
    if ns:
        ann["io.kubernetes.pod.namespace"] = ns
c["annotations"] = ann
hook = lambda stage: [{"path": tierctl, "args": ["tierctl", "oci-hook", stage], "env": [env], "timeout": 10}]
c["hooks"] = {"createRuntime": hook("createRuntime"), "poststop": hook("poststop")}
if userns:
    c["linux"]["namespaces"].append({"type": "user"})
    c["linux"]["uidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
    c["linux"]["gidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
json.dump(c, open(path, "w"), indent=1)
PY
	[ -z "$userns" ] || chown -R 100000:100000 "$b/rootfs"
}

# start ID: runc run -d; prints how long it took (the hook included).
start() {
	local t0 t1
	IDS+=("$1")
	t0=$(date +%s%N)
	# 2: it hung (the hook waiting on tierd, 60 s), which is no refusal.
	local rc=0
	timeout 60 runc run -d --bundle "$TL_DIR/bundles/$1" "$1" </dev/null >"$TL_DIR/runc-$1.log" 2>&1 || rc=$?
	[ "$rc" -ne 124 ] || { echo "# runc run -d $1 hung (60 s)"; return 2; }
	[ "$rc" -eq 0 ] || return 1
	t1=$(date +%s%N)
	echo "# runc run -d $1, the hook included: $(((t1 - t0) / 1000000)) ms"
}
refused() { start "$1"; [ $? -eq 1 ]; } # ID: runc refused to start it, at once (not a hang)
in_c() { local id=$1; shift; runc exec "$id" "$@" </dev/null; }
workers() { pgrep -c -P "$TL_TIERD_PID" tierd-worker; }
cobj() { echo "/org/tierd1/container/$(echo "$1" | sed 's/-/_2d/g; s/\./_2e/g')"; }
cprop() { $BUSCTL get-property org.tierd1 "$(cobj "$1")" org.tierd1.Container "$2" | cut -d' ' -f2- | tr -d '"'; }
reads_right() { # ID FILE: the container reads the released file's exact bytes, within 60 s (a hang fails)
	[ "$(timeout 60 runc exec "$1" sha256sum "/data/$2" </dev/null | cut -d' ' -f1)" = "${SUM[$VA/$2]}" ]
}

W0=$(workers)
for id in a1 a2; do bundle $P-$id alpha team-a; done
bundle $P-b1 beta team-b
bundle $P-plain - ""
bundle $P-bad alpha team-b
bundle $P-plain-1 - ""
bundle $P-dev alpha team-a
python3 - "$TL_DIR/bundles/$P-dev/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["annotations"]["tierd.io/mount-path"] = "/dev/shm"; json.dump(c, open(sys.argv[1], "w"))
PY
bundle $P-link alpha team-a
ln -s /proc/sys "$TL_DIR/bundles/$P-link/rootfs/data" # the image's /data leads to another mount

check "a container of tenant alpha starts (createRuntime hook)" start $P-a1
check "... and a second one" start $P-a2
check "one of tenant beta starts" start $P-b1
check "a container without the annotation starts" start $P-plain
check "ListContainers: the three attached ones" test "$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager ListContainers | cut -d' ' -f2)" = 3
ATTACH_US=$(cprop $P-a1 AttachMicroseconds)
echo "# attach inside tierd (AttachMicroseconds of $P-a1): $((ATTACH_US / 1000)).$((ATTACH_US % 1000 / 100)) ms"
check "the running daemon's org.tierd1.Container is dbus/org.tierd1.Container.xml" bash -c "
	diff <($BUSCTL introspect --xml-interface org.tierd1 $(cobj $P-a1) | awk -v IFACE=org.tierd1.Container -f $AWK | sort) \
		<(awk -v IFACE=org.tierd1.Container -f $AWK $TL_ROOT/dbus/org.tierd1.Container.xml | sort)"
check "one worker per attached container, none for the plain one" test "$(workers)" = $((W0 + 3))
check "... each container's worker is its own" bash -c "
	a=\$($BUSCTL get-property org.tierd1 $(cobj $P-a1) org.tierd1.Container WorkerPid); b=\$($BUSCTL get-property org.tierd1 $(cobj $P-a2) org.tierd1.Container WorkerPid)
	[ \"\$a\" != \"\$b\" ] && [ \"\$a\" != 'u 0' ]"
check "container a1 reads a released file through /data: the right bytes" reads_right $P-a1 f1
check "container a2 too" reads_right $P-a2 f2
check "... the fills ran on each container's own worker" bash -c "
	[ \$($BUSCTL get-property org.tierd1 $(cobj $P-a1) org.tierd1.Container Fills | cut -d' ' -f2) -gt 0 ] &&
	[ \$($BUSCTL get-property org.tierd1 $(cobj $P-a2) org.tierd1.Container Fills | cut -d' ' -f2) -gt 0 ]"
container_metrics_ok() { # CONTAINER: its fills and reader waits in tierctl metrics
	local m
	m=$("$TIERCTL" metrics) || return 1
	grep -Eq "^tierd_container_fills_total\{tenant=\"alpha\",container=\"$1\"\} [1-9]" <<<"$m" &&
		grep -Eq "^tierd_container_reader_wait_seconds_count\{tenant=\"alpha\",container=\"$1\"\} [1-9]" <<<"$m" &&
		grep -q "^tierd_container_reader_wait_seconds_bucket{tenant=\"alpha\",container=\"$1\",le=\"+Inf\"} " <<<"$m"
}
check "tierctl metrics: the container's fills and its readers' waits, labelled tenant and container" \
	container_metrics_ok $P-a1
check "the view in the container is nosuid,nodev" bash -c "runc exec $P-a1 cat /proc/self/mountinfo | grep ' /data ' | grep -q 'nosuid,nodev'"
check "container b1 sees beta's files" test "$(in_c $P-b1 cat /data/only-beta)" = "beta's own"
check "... and none of alpha's" test "$(in_c $P-b1 ls /data | sort | tr '\n' ' ')" = "b1 only-beta "
check_fails "... nor alpha's subvolume by any path" bash -c "runc exec $P-b1 ls /data/../alpha /alpha 2>/dev/null | grep -q f1"
check_fails "the container without the annotation has no view" in_c $P-plain ls /data
check "an annotation naming a tenant its pod namespace may not use: the container does not start" refused $P-bad
check "... refused with a clear reason" grep -q "namespace is not in the tenant's" "$TL_DIR/runc-$P-bad.log"
check "... and tierd logged it" grep -q "container $P-bad (pod namespace 'team-b'): refused the view of tenant alpha" "$TL_TIERD_LOG"
runc delete --force $P-bad >/dev/null 2>&1
# Outside Kubernetes a pod namespace annotation is anyone's to write: with
# the policy not saying "kubernetes", one naming team-a gets no view unless
# the container's id matches alpha's "containers".
sed -i 's/"kubernetes": true, //' "$TL_DIR/etc/policy.json"
"$TIERCTL" reload >/dev/null
bundle $P-forged alpha team-a
check "without \"kubernetes\" in the policy, an annotation naming team-a: the container does not start" refused $P-forged
check "... refused: the annotation counts only under Kubernetes (tierd's log says so)" \
	grep -q "container $P-forged (pod namespace 'team-a'): refused the view of tenant alpha: .*counts only where the policy says" "$TL_TIERD_LOG"
runc delete --force $P-forged >/dev/null 2>&1
sed -i 's/^{"tenants"/{"kubernetes": true, "tenants"/' "$TL_DIR/etc/policy.json"
"$TIERCTL" reload >/dev/null
check "a mount path under /dev: the container does not start" refused $P-dev
check "... refused, saying why" grep -q "must not be under /proc, /sys or /dev" "$TL_DIR/runc-$P-dev.log"
check "an image whose /data is a symlink onto another mount (/proc/sys): the container does not start" refused $P-link
check "... the mount path resolved inside the rootfs's own mount only" grep -q "resolving the mount path inside the container's root" "$TL_DIR/runc-$P-link.log"
runc delete --force $P-dev >/dev/null 2>&1
runc delete --force $P-link >/dev/null 2>&1

BEFORE=$(cprop $P-a1 Fills)
check "a process that unshares its mount namespace reads through its copy of /data: the right bytes" bash -c "
	[ \"\$(runc exec --cap CAP_SYS_ADMIN $P-a1 unshare -m sh -c 'sha256sum /data/f3' </dev/null | cut -d' ' -f1)\" = '${SUM[$VA/f3]}' ]"
check "... served by its container's worker (the cgroup tells)" test "$(cprop $P-a1 Fills)" -gt "$BEFORE"

check "attach is idempotent: the same object, no new worker" bash -c "
	[ \"\$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager AttachContainer ssusssa{sv} $P-a2 alpha \
		$(cprop $P-a2 Pid) $(cprop $P-a2 Rootfs) /data team-a 0)\" = 'o \"$(cobj $P-a2)\"' ] && [ \$(pgrep -c -P $TL_TIERD_PID tierd-worker) = $((W0 + 3)) ]"
check "AttachContainer from an unprivileged caller: AccessDenied" bash -c "
	setpriv --reuid=65534 --regid=65534 --clear-groups $BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager AttachContainer \
	ssusssa{sv} $P-x alpha $(cprop $P-a1 Pid) / /data team-a 0 2>&1 | grep -q 'only root may call AttachContainer'"

# Mounts made inside a container's view stay there: the view is a private
# clone, not a peer of the host's mount.
mkdir -p "$VA/sub"
check "a mount a container makes under /data ..." runc exec --cap CAP_SYS_ADMIN $P-a1 mount -t tmpfs none /data/sub
check "... does not appear on the host's view" bash -c "! findmnt '$VA/sub' >/dev/null"
check "... nor in another container of the tenant" bash -c "! runc exec $P-a2 cat /proc/self/mountinfo | grep -q ' /data/sub '"
runc exec --cap CAP_SYS_ADMIN $P-a1 umount /data/sub
rmdir "$VA/sub"
check "the host's view is nosuid,nodev (a container's root writes as uid 0 through an idmapped view)" \
	bash -c "findmnt -n -o OPTIONS '$VA' | grep -q 'nosuid,nodev'"

# A tierd restart (a handover): the containers keep their views and get
# their own workers back from the records in the state directory.
OLD=$TL_TIERD_PID
kill -TERM "$OLD"
check "tierd restarts (SIGTERM, a new tierd at once)" tl_tierd_start "$TL_DIR/etc/policy.json"
wait "$OLD" 2>/dev/null
check "... the three containers are attached again" \
	test "$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager ListContainers | cut -d' ' -f2)" = 3
check "... each with a worker of its own again" test "$(workers)" = $((W0 + 3))
check "... a1 reads a released file through its view, the right bytes" reads_right $P-a1 f10
check "... served by its own worker" test "$(cprop $P-a1 Fills)" -gt 0

# SIGKILL a1's worker while a2 reads: a2 keeps going, a1's worker comes back.
KW=$(cprop $P-a1 WorkerPid)
kill -KILL "$KW"
t0=$(date +%s%N)
check "a1's worker killed: a2 reads 64 MiB at once, the right bytes" reads_right $P-a2 big
echo "# a2's 64 MiB read right after a1's worker died: $((($(date +%s%N) - t0) / 1000000)) ms"
check "... a1's worker is replaced and a1 reads again" bash -c "
	for _ in \$(seq 50); do p=\$($BUSCTL get-property org.tierd1 $(cobj $P-a1) org.tierd1.Container WorkerPid | cut -d' ' -f2)
		[ \"\$p\" != 0 ] && [ \"\$p\" != $KW ] && break; sleep 0.1; done
	[ \"\$(runc exec $P-a1 sha256sum /data/f4 </dev/null | cut -d' ' -f1)\" = '${SUM[$VA/f4]}' ]"
check "... the host sees nothing of it: a host read of alpha is right" test "$(sum "$VA/f5")" = "${SUM[$VA/f5]}"

# A user-namespace container: the view is an idmapped clone.
bundle $P-u1 alpha team-a userns
if start $P-u1; then
	ok "a user-namespace container starts"
	check "... its view is idmapped" test "$(cprop $P-u1 Idmapped)" = true
	check "... owners show as on disk (root is its root)" test "$(in_c $P-u1 stat -c %u /data/f6)" = 0
	check "... and it reads the right bytes" reads_right $P-u1 f6
	runc delete --force $P-u1 >/dev/null 2>&1
else
	not_ok "a user-namespace container starts: $(cat "$TL_DIR/runc-$P-u1.log")"
fi

# DetachContainer on a running container (attached by id, outside
# Kubernetes): its view goes from inside it.
check "a plain container is attached by id (tierctl container attach)" start $P-plain-1
check "... tierctl container attach, its running root" "$TIERCTL" container attach $P-plain-1 --tenant alpha \
	--pid "$(runc state $P-plain-1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')" --path /data
check "... it reads through the view" reads_right $P-plain-1 f7
check "... tierctl container list shows it" bash -c "$TIERCTL container list | grep -q '^$P-plain-1 .* alpha '"
check "... and its --json, with its tenant and view" bash -c "timeout 20 $TIERCTL container list --json | python3 -c '
import json, sys
c = [x for x in json.load(sys.stdin) if x[\"container\"] == \"$P-plain-1\"]
assert len(c) == 1 and c[0][\"tenant\"] == \"alpha\" and c[0][\"view\"].startswith(\"/\"), c'"
check_fails "... an id matching no \"containers\" glob outside Kubernetes: refused" "$TIERCTL" container attach $P-other \
	--tenant alpha --pid "$(cprop $P-a1 Pid)"
out=$(timeout 20 "$TIERCTL" container attach $P-other --tenant alpha --pid "$(cprop $P-a1 Pid)" --namespace "Team A" 2>&1)
rc=$?
check "... a pod namespace that is no Kubernetes name: refused with status 1 (got $rc), saying so" \
	bash -c "[ $rc -eq 1 ] && grep -q 'not a Kubernetes namespace name' <<<'$out'"
check "tierctl container detach" "$TIERCTL" container detach $P-plain-1
check "... the view is gone from inside the running container (an empty /data is left)" \
	test "$(in_c $P-plain-1 ls -A /data)" = ""

# A detach while a fill is in flight: the event is answered anyway.
SW=$(cprop $P-a2 WorkerPid)
kill -STOP "$SW"
runc exec $P-a2 cat /data/f8 </dev/null >/dev/null 2>&1 &
READER=$!
sleep 0.5
check "a2's reader waits on its stopped worker" kill -0 $READER
runc kill $P-a2 KILL >/dev/null 2>&1
for _ in $(seq 50); do [ "$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager ListContainers | grep -c "\"$P-a2\"")" = 0 ] && break; sleep 0.1; done
check "the death of a2's init detaches it (no poststop yet)" test "$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager ListContainers | grep -c "\"$P-a2\"")" = 0
check "... its stopped worker is gone" bash -c "! kill -0 $SW 2>/dev/null"
check "... its in-flight fill was finished by the host worker: nothing left in flight" bash -c "
	for _ in \$(seq 50); do [ \"\$($BUSCTL get-property org.tierd1 /org/tierd1/tenant/alpha org.tierd1.Tenant InFlightRequests)\" = 'u 0' ] && exit 0; sleep 0.1; done; exit 1"
wait $READER 2>/dev/null
check "... and f8 is right on the host" test "$(sum "$VA/f8")" = "${SUM[$VA/f8]}"

# Stop everything: poststop detaches, nothing stays.
for id in a1 a2 b1 plain plain-1; do runc kill $P-$id KILL >/dev/null 2>&1; done
sleep 0.3
check "the containers are deleted (poststop hook runs)" bash -c "for id in a1 a2 b1 plain plain-1; do runc delete $P-\$id || exit 1; done"
check "no container is attached" test "$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager ListContainers)" = "a(ssuso) 0"
check "no container worker is left" test "$(workers)" = "$W0"
FDS1=$(ls /proc/"$TL_TIERD_PID"/fd | wc -l)
bundle $P-a3 alpha team-a
start $P-a3 && reads_right $P-a3 f11 && runc kill $P-a3 KILL && sleep 0.2 && runc delete $P-a3
check "an attach, a read and a detach leak no fd in tierd" test "$(ls /proc/"$TL_TIERD_PID"/fd | wc -l)" -le "$FDS1"
check "... nor a worker" test "$(workers)" = "$W0"
check "no record of a container is left in the state directory" test -z "$(ls -A "$TL_DIR/state/containers")"
check "tierd is still serving: a host read of alpha is right" test "$(sum "$VA/f9")" = "${SUM[$VA/f9]}"
# Access traces: a container's first touches are recorded until it goes
# (or its window closes), and the next container with the same trace name
# gets them before it reads; one killed while its trace is fetched ahead
# leaves tierd serving.
traced() { # ID TRACE: an alpha bundle with tierd.io/trace
	bundle "$1" alpha team-a
	python3 - "$TL_DIR/bundles/$1/config.json" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["annotations"]["tierd.io/trace"] = sys.argv[2]; json.dump(c, open(sys.argv[1], "w"))
PY
}
gone() { timeout 30 runc kill "$1" KILL >/dev/null 2>&1; timeout 30 runc delete --force "$1" >/dev/null 2>&1; }
reads_f2_f1() { reads_right "$1" f2 && reads_right "$1" f1; }
reads_big() { start "$1" >/dev/null && in_c "$1" cat /data/big >/dev/null; }
check "alpha's f1, f2, f3 and big released again" \
	bash -c "$TIERCTL release $VA/f1 $VA/f2 $VA/f3 $VA/big >/dev/null && [ \$(\"$BUILD/tests/data-bytes\" $VA/f1) = 0 ]"
traced $P-t1 web
tl_log_mark
check "a container with tierd.io/trace=web starts" start $P-t1
check "... its run is recorded" tl_logged 10 "trace web: recording $P-t1's first touches for 20 s"
check "... there is no trace to fetch yet, and it says so" tl_logged 10 "trace web: none stored yet"
check "... it reads f2, then f1, right" reads_f2_f1 $P-t1
gone $P-t1
check "... killed before its window closes: its run is stored, 2 files" tl_logged 20 "trace web stored: run 1, 2 files"
check "f1 and f2 released again" bash -c "$TIERCTL release $VA/f1 $VA/f2 >/dev/null"
traced $P-t2 web
tl_log_mark
check "the next container with tierd.io/trace=web starts" start $P-t2
check "... its trace is fetched ahead of it: 2 files, none skipped or failed" \
	bash -c "for i in \$(seq 100); do tail -n +$((TL_LOG_MARK + 1)) '$TL_TIERD_LOG' | grep 'trace web fetched ahead of $P-t2' | grep -q ': 2 files (.*), 0 already here, 0 skipped, 0 failed' && exit 0; sleep 0.1; done; exit 1"
check "... f1 and f2 are whole before it read them; f3, never read, is not" \
	bash -c "[ \$(stat -c %s $VA/f1) = \$(\"$BUILD/tests/data-bytes\" $VA/f1) ] && [ \$(stat -c %s $VA/f2) = \$(\"$BUILD/tests/data-bytes\" $VA/f2) ] && [ \$(\"$BUILD/tests/data-bytes\" $VA/f3) = 0 ]"
check "... it reads them right" reads_f2_f1 $P-t2
AHEAD=$(tail -n +$((TL_LOG_MARK + 1)) "$TL_TIERD_LOG" | grep -o "trace web fetched ahead of $P-t2 in [0-9]* ms: 2 files ([0-9]* bytes" | grep -o '([0-9]*' | tr -d '(')
check "... its PrefetchedBytes are what its trace fetched ahead (${AHEAD:-?} bytes)" \
	test "$(cprop $P-t2 PrefetchedBytes)" = "${AHEAD:-none}"
check "... and tierctl metrics has them as tierd_container_prefetched_bytes_total" bash -c \
	"timeout 20 $TIERCTL metrics | grep -q '^tierd_container_prefetched_bytes_total{tenant=\"alpha\",container=\"$P-t2\"} ${AHEAD:-none}\$'"
gone $P-t2
check "... its run is merged: run 2, 2 files" tl_logged 20 "trace web stored: run 2, 2 files"
# A trace of the 64 MiB file, then a container killed as soon as it starts,
# while that trace is fetched ahead.
traced $P-t3 bigread
tl_log_mark
check "a container reads big with tierd.io/trace=bigread" reads_big $P-t3
gone $P-t3
check "... its run is stored" tl_logged 20 "trace bigread stored: run 1, 1 files"
check "big released again" bash -c "$TIERCTL release $VA/big >/dev/null"
traced $P-t4 bigread
tl_log_mark
check "a container with tierd.io/trace=bigread starts and is killed at once" start $P-t4
gone $P-t4
check "... it is detached" tl_logged 20 "container $P-t4: detached from tenant alpha"
check "... tierd still serves: big reads right from the host" test "$(sum "$VA/big")" = "${SUM[$VA/big]}"
check "... and answers on the bus" timeout 20 "$TIERCTL" ping

# DetachContainer unmounts its own view and nothing else: a root container
# swaps a component of the view's path for a symlink to /proc while tierd
# is between finding the view and unmounting it (a test build pauses there
# 2 s); /proc/sys, a mount of the container's, must stay.
OLD=$TL_TIERD_PID
kill -TERM "$OLD"
TIERD_TEST_DETACH_PAUSE_MS=2000 TIERD_TEST_TRACE_SAVE_PAUSE_MS=5000 BUILD=$BUILD/testhooks \
	tl_tierd_start "$TL_DIR/etc/policy.json"
wait "$OLD" 2>/dev/null
bundle $P-swap alpha team-a
python3 - "$TL_DIR/bundles/$P-swap/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["annotations"]["tierd.io/mount-path"] = "/x/sys"; json.dump(c, open(sys.argv[1], "w"))
PY
check "a container with its view at /x/sys starts (a test build of tierd)" start $P-swap
check "... /proc/sys is a mount of its own" bash -c "runc exec $P-swap cat /proc/self/mountinfo </dev/null | grep -q ' /proc/sys '"
timeout 60 "$TIERCTL" container detach $P-swap >"$TL_DIR/swap.out" 2>&1 &
DET=$!
sleep 1
in_c $P-swap sh -c 'mv /x /x.real && ln -s /proc /x'
wait "$DET"
rc=$?
check "... swapped /x for a symlink to /proc during the detach, which ends (exit $rc)" test "$rc" = 0
check "... /proc/sys is still mounted in the container" bash -c "runc exec $P-swap cat /proc/self/mountinfo </dev/null | grep -q ' /proc/sys '"
check "... and the view is gone (from where it moved to)" bash -c "! runc exec $P-swap cat /proc/self/mountinfo </dev/null | grep -q ' /x.real/sys '"
runc delete --force $P-swap >/dev/null 2>&1

# A Kubernetes container without tierd.io/trace is traced by its pod's
# owner and its own name: two replicas of Deployment web share one trace.
# They go at once (each detach pauses the loop 2 s in this test build, and
# each save's merge takes 5 s): the second run is saved after the first,
# merged with it, never over it.
owned() { # ID POD: an alpha bundle of pod POD's container "app", CRI-O's keys
	bundle "$1" alpha team-a
	python3 - "$TL_DIR/bundles/$1/config.json" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["annotations"].update({"io.kubernetes.pod.name": sys.argv[2], "io.kubernetes.container.name": "app"})
json.dump(c, open(sys.argv[1], "w"))
PY
}
check "f1 and f2 released again" bash -c "$TIERCTL release $VA/f1 $VA/f2 >/dev/null"
owned $P-o1 web-7d4b9c8f6b-x2x7q
owned $P-o2 web-7d4b9c8f6b-k9zrt
tl_log_mark
check "a replica of Deployment web starts, with no tierd.io/trace" start $P-o1
check "... and another" start $P-o2
for id in $P-o1 $P-o2; do
	check "... $id records trace k8s/team-a/web/app (its namespace, owner and container)" \
		tl_logged 10 "trace k8s/team-a/web/app: recording $id's first touches"
done
check "... one reads f1 right" reads_right $P-o1 f1
check "... the other f2" reads_right $P-o2 f2
gone $P-o1 & G1=$!
gone $P-o2 & G2=$!
wait $G1 $G2
check "... both gone at once: one run is stored first" tl_logged 30 "trace k8s/team-a/web/app stored: run 1, 1 files"
check "... and the other merged with it: run 2, 2 files (not a second run 1 written over the first)" \
	tl_logged 30 "trace k8s/team-a/web/app stored: run 2, 2 files"
# Those names are their namespace's: a pod of team-a naming team-b's trace
# is refused, saying why, rather than write runs into it.
traced $P-o3 k8s/team-b/web/app
check "a team-a pod with tierd.io/trace=k8s/team-b/web/app does not start" refused $P-o3
check "... the hook said why" grep -q "are those of NAMESPACE's pods" "$TL_DIR/runc-$P-o3.log"
kill -INT "$TL_TIERD_PID"
check "tierd stops for good cleanly (SIGINT)" wait "$TL_TIERD_PID"
TL_TIERD_PID=
# No tierd on the node: an annotated container must not start without its data.
bundle $P-unserved alpha team-a
check "with tierd stopped, a container of tenant alpha does not start" refused $P-unserved
check "... the hook said why: tierd is not serving on this node" \
	grep -q "container $P-unserved: tierd is not serving on this node (system bus .*): refused, it would start without tenant alpha's data" \
	"$TL_DIR/runc-$P-unserved.log"
check "... and runc left no container behind" bash -c "! runc state $P-unserved >/dev/null 2>&1"
check "a container without the annotation still starts" start $P-plain-1
runc delete --force $P-plain-1 >/dev/null 2>&1
tl_summary
