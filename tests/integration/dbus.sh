#!/bin/bash
# The D-Bus API through clients we did not write (busctl, dbus-send,
# dbus-monitor) on a private dbus-daemon with the shipped bus policy: what
# the running daemon introspects matches dbus/*.xml; the manager and tenant
# objects; access control (root, admin_group, anyone else); named errors on
# bad input with tierd staying up; signals and PropertiesChanged when a
# worker is killed; a slow user database (a test build's) holds no one but
# the caller it is asked about.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
TIERCTL=$BUILD/tierctl
AWK="$TL_ROOT/tests/lib/introspect.awk"

tl_loopfs btrfs 1G "$TL_DIR/fs" || { not_ok "mkfs"; tl_summary; exit 1; }
for t in alpha b-2.x; do tl_subvol btrfs "$TL_DIR/fs/$t"; done
mkdir -p "$TL_DIR/store" "$TL_DIR/etc"
POLICY=$TL_DIR/etc/policy.json # its own directory: mounted read-only below, as a ConfigMap is
# Debian's nobody is in group nogroup: the admin group here.
cat >"$POLICY" <<EOF2
{"admin_group": "nogroup",
 "tenants": [
  {"name": "alpha", "subvolume": "$TL_DIR/fs/alpha", "mount": "$TL_DIR/views/alpha", "backend": "file://$TL_DIR/store/alpha"},
  {"name": "b-2.x", "subvolume": "$TL_DIR/fs/b-2.x", "mount": "$TL_DIR/views/b-2.x", "backend": "file://$TL_DIR/store/b"}]}
EOF2
tl_dbus_start
check "tierd starts" tl_tierd_start "$POLICY" || { tl_summary; exit 1; }
BUSCTL="busctl --system"
ALPHA=/org/tierd1/tenant/alpha B2X=/org/tierd1/tenant/b_2d2_2ex

same_interface() { # IFACE PATH XML
	diff <($BUSCTL introspect --xml-interface org.tierd1 "$2" | awk -v IFACE="$1" -f "$AWK" | sort) \
		<(awk -v IFACE="$1" -f "$AWK" "$3" | sort)
}
check "the running daemon's org.tierd1.Manager is dbus/org.tierd1.Manager.xml" \
	same_interface org.tierd1.Manager /org/tierd1 "$TL_ROOT/dbus/org.tierd1.Manager.xml"
check "the running daemon's org.tierd1.Tenant is dbus/org.tierd1.Tenant.xml" \
	same_interface org.tierd1.Tenant "$ALPHA" "$TL_ROOT/dbus/org.tierd1.Tenant.xml"

check "TenantStatus: an a{sv} per tenant, with its name, worker state and counts" \
	bash -c "$BUSCTL --json=short call org.tierd1 /org/tierd1 org.tierd1.Manager TenantStatus | python3 -c '
import json, sys
ts = json.load(sys.stdin)[\"data\"][0]
keys = {\"Name\", \"Subvolume\", \"Mount\", \"Backend\", \"WorkerState\", \"WorkerPid\", \"ResidentBytes\",
        \"ReleasedBytes\", \"Fills\", \"FillBytes\", \"FillErrors\", \"Quota\", \"UsedBytes\"}
assert len(ts) >= 1 and all(keys <= set(t) for t in ts), ts
assert ts[0][\"WorkerState\"][\"data\"] == \"running\", ts[0]'"
check "ListTenants: names and escaped object paths" \
	test "$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager ListTenants)" = \
	"a(so) 2 \"alpha\" \"$ALPHA\" \"b-2.x\" \"$B2X\""
check "GetTenant" test "$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager GetTenant s b-2.x)" = "o \"$B2X\""
check "a tenant's Name property" test "$($BUSCTL get-property org.tierd1 "$B2X" org.tierd1.Tenant Name)" = 's "b-2.x"'
check "... Backend (no credentials in it)" \
	test "$($BUSCTL get-property org.tierd1 "$ALPHA" org.tierd1.Tenant Backend)" = "s \"file://$TL_DIR/store/alpha\""
W=$(pgrep -P "$TL_TIERD_PID" tierd-worker | head -n 1)
check "WorkerState and WorkerPid" bash -c "
	$BUSCTL get-property org.tierd1 $ALPHA org.tierd1.Tenant WorkerState | grep -qx 's \"running\"' &&
	$BUSCTL get-property org.tierd1 $ALPHA org.tierd1.Tenant WorkerPid | grep -Eq '^u [1-9][0-9]*$'"
check "GetManagedObjects lists both tenants with their properties" \
	test "$($BUSCTL call org.tierd1 /org/tierd1 org.freedesktop.DBus.ObjectManager GetManagedObjects | grep -o '"org.tierd1.Tenant"' | wc -l)" = 2
check "every Tenant property reads (GetAll)" bash -c "$BUSCTL call org.tierd1 $ALPHA org.freedesktop.DBus.Properties GetAll s org.tierd1.Tenant | grep -q FilesByState"

dbus_err() { # prints the D-Bus error name of a call made with dbus-send
	"$@" 2>&1 >/dev/null | sed -n 's/^Error \([^:]*\):.*/\1/p'
}
SEND="dbus-send --system --print-reply --dest=org.tierd1"
check "GetTenant of an unknown name: org.tierd1.Error.NoSuchTenant" \
	test "$(dbus_err $SEND /org/tierd1 org.tierd1.Manager.GetTenant string:nosuch)" = org.tierd1.Error.NoSuchTenant
check "... a 1 MiB name: the same" test "$("$BUILD/tests/bus-big-arg" 1048576)" = org.tierd1.Error.NoSuchTenant
check "... and tierd stays up" kill -0 "$TL_TIERD_PID"
check "FileStatus and ArchivePaths of an empty array (once a crash): an empty answer, InvalidArguments" bash -c "
	$BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager FileStatus as 0 | grep -qx 'a(ssssttb) 0' &&
	! $BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager ArchivePaths as 0 2>/dev/null && kill -0 $TL_TIERD_PID"
# The most paths a call may name, 100,000, are read and answered (their
# array read in time linear in its length: sd-bus's own reader held the
# loop 1.6 s for these); one more is refused, and nothing is walked.
check "FileStatus of 100,000 paths: 100,000 answers" \
	test "$("$BUILD/tests/bus-many-paths" 100000 "$TL_DIR/views/alpha/nope")" = 100000
check "... of 100,001: org.tierd1.Error.InvalidArguments" \
	test "$("$BUILD/tests/bus-many-paths" 100001 "$TL_DIR/views/alpha/nope")" = org.tierd1.Error.InvalidArguments
check "... of one relative path: the same" test "$("$BUILD/tests/bus-many-paths" 1 relative)" = org.tierd1.Error.InvalidArguments
check "a wrong argument type: org.freedesktop.DBus.Error.InvalidArgs" \
	test "$(dbus_err $SEND /org/tierd1 org.tierd1.Manager.GetTenant int32:7)" = org.freedesktop.DBus.Error.InvalidArgs
check "a relative path: org.tierd1.Error.InvalidArguments" \
	test "$(dbus_err $SEND /org/tierd1 org.tierd1.Manager.ArchivePaths array:string:relative)" = org.tierd1.Error.InvalidArguments

# Access: status for anyone; changes for root and admin_group members.
head -c 100000 /dev/urandom >"$TL_DIR/f.orig"
cat "$TL_DIR/f.orig" >"$TL_DIR/views/alpha/f"
chmod 755 "$TL_DIR" "$TL_DIR/views" "$TL_DIR/views/alpha"
chmod 644 "$TL_DIR/views/alpha/f"
as_user() { local u=$1; shift; setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups "$@"; }
check "anyone may read status (daemon)" as_user daemon "$TIERCTL" status "$TL_DIR/views/alpha/f"
# A file behind a directory the caller cannot enter: tierd must not tell
# that it exists, nor its size (it resolves paths as root).
mkdir -m 700 "$TL_DIR/views/alpha/private"
head -c 12345 /dev/urandom >"$TL_DIR/views/alpha/private/secret"
check "FileStatus by path from a caller outside admin_group: AccessDenied" \
	test "$(as_user daemon bash -c "$(declare -f dbus_err); dbus_err $SEND /org/tierd1 org.tierd1.Manager.FileStatus array:string:$TL_DIR/views/alpha/private/secret")" = org.tierd1.Error.AccessDenied
as_user daemon timeout 30 "$TIERCTL" status --json "$TL_DIR/views/alpha/private/secret" >"$TL_DIR/secret.out" 2>"$TL_DIR/secret.err"
rc=$?
check "... tierctl status by that caller: exit 1, Permission denied, no size (exit $rc)" bash -c "
	[ $rc = 1 ] && grep -q 'Permission denied' '$TL_DIR/secret.err' && ! grep -q 12345 '$TL_DIR/secret.out'"
check "... root sees it (its size)" bash -c "$TIERCTL status --json $TL_DIR/views/alpha/private/secret | grep -q '\"size\":12345'"
mkfifo "$TL_DIR/views/alpha/fifo"
timeout 10 "$TIERCTL" status "$TL_DIR/views/alpha/fifo" 2>"$TL_DIR/fifo.err" >/dev/null
rc=$?
check "... a FIFO: exit 1, not a regular file (nothing waited on it: exit $rc)" bash -c "
	[ $rc = 1 ] && grep -q 'not a regular file' '$TL_DIR/fifo.err'"
rm -rf "$TL_DIR/views/alpha/fifo" "$TL_DIR/views/alpha/private"
check "a caller outside admin_group gets org.tierd1.Error.AccessDenied" \
	test "$(as_user daemon bash -c "$(declare -f dbus_err); dbus_err $SEND /org/tierd1 org.tierd1.Manager.ArchivePaths array:string:$TL_DIR/views/alpha/f")" = org.tierd1.Error.AccessDenied
check "... and nothing changed" test "$("$TIERCTL" status --json "$TL_DIR/views/alpha/f" | grep -o '"state":"[a-z]*"')" = '"state":"resident"'
check "a member of admin_group (nobody, in nogroup) may archive" as_user nobody "$TIERCTL" archive "$TL_DIR/views/alpha/f"
check "... and it is archived" test "$("$TIERCTL" status --json "$TL_DIR/views/alpha/f" | grep -o '"state":"[a-z]*"')" = '"state":"archived"'

# Metrics: a reader waits for a released file, then every counter.
"$TIERCTL" release "$TL_DIR/views/alpha/f" >/dev/null
check "a released file reads back (a reader waits for it)" cmp "$TL_DIR/views/alpha/f" "$TL_DIR/f.orig"
"$TIERCTL" metrics >"$TL_DIR/metrics"
check "tierctl metrics: counters per tenant" grep -qx 'tierd_archives_total{tenant="alpha"} 1' "$TL_DIR/metrics"
check "... files by state" grep -qx 'tierd_files{tenant="b-2.x",state="resident"} 0' "$TL_DIR/metrics"
histogram_ok() {
	local inf
	grep -qx '# TYPE tierd_reader_wait_seconds histogram' "$TL_DIR/metrics" || return 1
	inf=$(sed -n 's/^tierd_reader_wait_seconds_bucket{tenant="alpha",le="+Inf"} //p' "$TL_DIR/metrics")
	[ "${inf:-0}" -ge 1 ] && grep -qx "tierd_reader_wait_seconds_count{tenant=\"alpha\"} $inf" "$TL_DIR/metrics"
}
check "... reader waits as a histogram, +Inf bucket = count" histogram_ok
check "... no timestamps: every sample is a name and a value" \
	bash -c "grep -v '^#' '$TL_DIR/metrics' | awk 'NF != 2 { exit 1 }'"
check "ReaderWaitPercentiles reads" bash -c "$BUSCTL get-property org.tierd1 $ALPHA org.tierd1.Tenant ReaderWaitPercentiles | grep -q p99"

# The same over HTTP: tierctl metrics --listen, started as root, serves as
# nobody; promtool (Debian's, make deps) checks the format and its lints.
"$TIERCTL" metrics --listen 127.0.0.1:0 2>"$TL_DIR/exporter.err" &
EXPORTER=$!
TL_PIDS+=("$EXPORTER")
for _ in $(seq 50); do grep -q 'serving http' "$TL_DIR/exporter.err" && break; sleep 0.1; done
MPORT=$(sed -n 's|^tierctl metrics: serving http://127.0.0.1:\([0-9]*\)/metrics$|\1|p' "$TL_DIR/exporter.err")
MURL="http://127.0.0.1:$MPORT/metrics"
check "tierctl metrics --listen 127.0.0.1:0 says where it serves" test -n "$MPORT"
runs_unprivileged() {
	grep -Eq '^Uid:\s+65534\s+65534\s+65534' "/proc/$EXPORTER/status" &&
		grep -Eq '^CapPrm:\s+0+$' "/proc/$EXPORTER/status" && grep -Eq '^CapEff:\s+0+$' "/proc/$EXPORTER/status" &&
		grep -Eq '^CapAmb:\s+0+$' "/proc/$EXPORTER/status" && grep -Eq '^NoNewPrivs:\s+1$' "/proc/$EXPORTER/status"
}
check "... and, started as root, runs as nobody with no capability and no_new_privs" runs_unprivileged
# PATH [curl options]: the HTTP status; the body in scrape, headers in scrape.h
http_get() { local p=$1; shift; curl -s --max-time 10 -o "$TL_DIR/scrape" -D "$TL_DIR/scrape.h" -w '%{http_code}' "$@" "http://127.0.0.1:$MPORT$p"; }
scrape_ok() { # a 200 for /metrics, with these exact lines
	local line
	[ "$(http_get /metrics)" = 200 ] || return 1
	for line in "$@"; do grep -qxF -- "$line" "$TL_DIR/scrape" || return 1; done
}
check "GET /metrics: 200, the same counters as tierctl metrics, tierd_up 1 and tierd_build_info" \
	scrape_ok 'tierd_archives_total{tenant="alpha"} 1' 'tierd_up 1' \
	"tierd_build_info{version=\"$("$BUILD/tierd" --version | cut -d' ' -f2)\"} 1"
check "... in the text format 0.0.4" grep -qi '^Content-Type: text/plain; version=0.0.4' "$TL_DIR/scrape.h"
has_tenant_samples() { local m; for m; do grep -Eq "^$m\{tenant=\"alpha\"\} [0-9]" "$TL_DIR/scrape" || return 1; done; }
check "... quota and usage gauges, denials and worker restarts as counters" has_tenant_samples tierd_quota_bytes \
	tierd_used_bytes tierd_reads_denied_total tierd_quota_denials_total tierd_auto_archives_total tierd_worker_restarts_total
PROMTOOL=$(command -v promtool || echo "$BUILD/tools/promtool")
if [ -x "$PROMTOOL" ]; then
	"$PROMTOOL" check metrics <"$TL_DIR/scrape" >"$TL_DIR/promtool.out" 2>&1
	rc=$?
	check "promtool check metrics: exit 0 and no lint (exit $rc)" test "$rc" = 0 -a ! -s "$TL_DIR/promtool.out"
else
	skip "promtool check metrics: no promtool (make deps takes it from Debian's prometheus package)"
fi
check "POST: 405" test "$(http_get /metrics -X POST)" = 405
check "another path: 404" test "$(http_get /nope)" = 404
check "a request line over 8 KiB: 431" test "$(http_get "/$(head -c 9000 /dev/zero | tr '\0' a)")" = 431
# Clients that connect and say nothing (more of them than the exporter
# takes at once) hold no scrape up: the oldest silent one makes room
# (curl --max-time: a hang fails).
cat >"$TL_DIR/raw.py" <<'PY'
import socket, sys, time
port, mode = int(sys.argv[1]), sys.argv[2]
if mode == "idle":  # N idle connections for S seconds
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(int(sys.argv[3]))]
    print("open", flush=True)
    time.sleep(float(sys.argv[4]))
    sys.exit(0)
s = socket.create_connection(("127.0.0.1", port), timeout=10)
if mode == "pipelined":  # a request, then more bytes while the answer comes
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.3)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 100)
else:
    s.sendall({"nul": b"GET /\0metrics HTTP/1.1\r\n\r\n", "no-version": b"GET /metrics\r\n\r\n"}[mode])
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
head, _, body = data.partition(b"\r\n\r\n")
length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
print(head.split(b"\r\n")[0].decode(), "whole" if length and len(body) == length[0] else "cut (%d of %s)" % (len(body), length))
PY
python3 "$TL_DIR/raw.py" "$MPORT" idle 80 20 >"$TL_DIR/idle.out" &
IDLERS=$!
TL_PIDS+=("$IDLERS")
for _ in $(seq 50); do grep -q open "$TL_DIR/idle.out" && break; sleep 0.1; done
check "80 silent clients (more than the 64 it holds) do not hold up a scrape" test "$(http_get /metrics)" = 200
kill "$IDLERS" 2>/dev/null
check "a client that sends more while its answer comes gets the whole answer (no reset)" \
	test "$(timeout 20 python3 "$TL_DIR/raw.py" "$MPORT" pipelined)" = "HTTP/1.1 200 OK whole"
check "a NUL in the request: 400 at once" test "$(timeout 20 python3 "$TL_DIR/raw.py" "$MPORT" nul)" = "HTTP/1.1 400 Bad Request whole"
check "a request line without HTTP/1.x: 400" \
	test "$(timeout 20 python3 "$TL_DIR/raw.py" "$MPORT" no-version)" = "HTTP/1.1 400 Bad Request whole"
rc=0
timeout 10 "$TIERCTL" metrics --listen 127.0.0.1:70000 2>"$TL_DIR/port.err" || rc=$?
check "--listen with a port over 65535: usage error, exit 2 (exit $rc)" \
	bash -c "[ $rc = 2 ] && grep -q 'PORT 0 to 65535' '$TL_DIR/port.err'"

# A worker killed: signals and PropertiesChanged, seen by dbus-monitor and
# tierctl monitor.
dbus-monitor --system "type='signal',sender='org.tierd1'" >"$TL_DIR/monitor" 2>&1 &
TL_PIDS+=("$!")
"$TIERCTL" monitor >"$TL_DIR/tierctl-monitor" 2>&1 &
TL_PIDS+=("$!")
for _ in $(seq 50); do grep -q "^monitoring" "$TL_DIR/tierctl-monitor" && break; sleep 0.1; done
sleep 0.5
kill -KILL "$W"
for _ in $(seq 50); do grep -q WorkerStarted "$TL_DIR/monitor" && break; sleep 0.1; done
sleep 0.2
check "WorkerExited names the tenant and the signal" bash -c "grep -A6 'member=WorkerExited' '$TL_DIR/monitor' | grep -q 'string \"signal\"'"
check "WorkerStarted follows with the replacement" grep -q "member=WorkerStarted" "$TL_DIR/monitor"
check "PropertiesChanged on the tenant carries WorkerPid" \
	bash -c "grep -A30 'path=$ALPHA; interface=org.freedesktop.DBus.Properties; member=PropertiesChanged' '$TL_DIR/monitor' | grep -q WorkerPid"
check "tierctl monitor shows both" bash -c "grep -q 'org.tierd1.Manager.WorkerExited' '$TL_DIR/tierctl-monitor' &&
	grep -q 'org.tierd1.Manager.WorkerStarted' '$TL_DIR/tierctl-monitor'"
check "tierd is still up" kill -0 "$TL_TIERD_PID"
check "the worker's death counts in tierd_worker_restarts_total" scrape_ok 'tierd_worker_restarts_total{tenant="alpha"} 1'

# ReloadPolicy: fill settings at once, worker settings by a new worker.
pid_of() { $BUSCTL get-property org.tierd1 "$1" org.tierd1.Tenant WorkerPid | cut -d' ' -f2; }
A1=$(pid_of "$ALPHA") B1=$(pid_of "$B2X")
R1=$($BUSCTL get-property org.tierd1 "$ALPHA" org.tierd1.Tenant WorkerRestarts)
cp "$POLICY" "$TL_DIR/policy.orig"
sed -i 's|"backend": "file://'"$TL_DIR"'/store/alpha"}|"backend": "file://'"$TL_DIR"'/store/alpha", "stall_timeout": "20s", "readahead": "8M"}|' \
	"$POLICY"
check "tierctl reload: ReloadPolicy applies new settings" "$TIERCTL" reload
for _ in $(seq 50); do [ "$(pid_of "$ALPHA")" != "$A1" ] && [ "$(pid_of "$ALPHA")" != 0 ] && break; sleep 0.1; done
check "... alpha's worker is replaced for its new stall timeout" test "$(pid_of "$ALPHA")" != "$A1"
check "... a planned restart: WorkerRestarts unchanged ($R1)" \
	test "$($BUSCTL get-property org.tierd1 "$ALPHA" org.tierd1.Tenant WorkerRestarts)" = "$R1"
check "... b-2.x's worker is untouched" test "$(pid_of "$B2X")" = "$B1"
check "... PolicyReloaded was signalled" grep -q "member=PolicyReloaded" "$TL_DIR/monitor"
check "... and files still read back" cmp "$TL_DIR/views/alpha/f" "$TL_DIR/f.orig"
printf '{"tenants": [' >"$POLICY"
check "a policy file that is not valid: org.tierd1.Error.InvalidPolicy" \
	test "$(dbus_err $SEND /org/tierd1 org.tierd1.Manager.ReloadPolicy)" = org.tierd1.Error.InvalidPolicy
sed 's|"mount": "'"$TL_DIR"'/views/b-2.x"|"mount": "'"$TL_DIR"'/views/elsewhere"|' "$TL_DIR/policy.orig" >"$POLICY"
check "a moved view: org.tierd1.Error.NeedsRestart" \
	test "$(dbus_err $SEND /org/tierd1 org.tierd1.Manager.ReloadPolicy)" = org.tierd1.Error.NeedsRestart
check "... and the view stays where it was" mountpoint -q "$TL_DIR/views/b-2.x"
check "ReloadPolicy from outside admin_group: AccessDenied" \
	test "$(as_user daemon bash -c "$(declare -f dbus_err); dbus_err $SEND /org/tierd1 org.tierd1.Manager.ReloadPolicy")" = org.tierd1.Error.AccessDenied
cp "$TL_DIR/policy.orig" "$POLICY"

# Jobs: every file method returns an org.tierd1.Job; JobRemoved says how it
# ended (dbus-monitor above keeps recording).
job_block() { # JOBPATH: the JobRemoved signal of that job, as dbus-monitor printed it
	awk -v P="$1" '/^signal /{ if (hit) exit; rm = /member=JobRemoved/; buf = "" }
		rm { buf = buf $0 "\n"; if (index($0, "object path \"" P "\"")) hit = 1 }
		END { if (hit) printf "%s", buf }' "$TL_DIR/monitor"
}
wait_job() { # JOBPATH RESULT
	for _ in $(seq 100); do job_block "$1" | grep -q "string \"$2\"" && return 0; sleep 0.1; done
	job_block "$1"; return 1
}
job_of() { sed -n 's/^o "\(.*\)"$/\1/p'; }
V=$TL_DIR/views/alpha
head -c 300000 /dev/urandom >"$TL_DIR/g.orig"
cp "$TL_DIR/g.orig" "$V/g"
J=$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager ArchivePaths as 1 "$V/g" | job_of)
check "ArchivePaths returns a job object at once ($J)" bash -c "[[ '$J' == /org/tierd1/job/* ]]"
check "... JobRemoved says done" wait_job "$J" done
check "... JobNew and the ObjectManager's InterfacesAdded came first" bash -c "
	grep -A3 'member=JobNew' '$TL_DIR/monitor' | grep -q 'object path \"$J\"' &&
	grep -A1 'member=InterfacesAdded' '$TL_DIR/monitor' | grep -q 'object path \"$J\"'"
check "... the file is archived" bash -c "getfattr -n security.tierd --only-values '$V/g' | grep -qx 'state=archived'"
check "... and the job object is gone" bash -c "! $BUSCTL introspect org.tierd1 '$J' >/dev/null 2>&1"
# busctl (systemd 252) cannot send fds: the fd variants are tierctl's.
check "Release by file descriptor (tierctl)" "$TIERCTL" release "$V/g"
check "... the file is released" bash -c "getfattr -n security.tierd --only-values '$V/g' | grep -qx 'state=released'"
prop() { $BUSCTL get-property org.tierd1 "$ALPHA" org.tierd1.Tenant "$1" | cut -d' ' -f2; }
F0=$(prop Fills) B0=$(prop BytesFetched) A0=$(prop ArchivedBytes)
check "... and reads back" cmp "$V/g" "$TL_DIR/g.orig"
check "... Fills and BytesFetched grew with the restore ($F0, $B0 before)" \
	bash -c "[ \$($BUSCTL get-property org.tierd1 $ALPHA org.tierd1.Tenant Fills | cut -d' ' -f2) -gt $F0 ] &&
	[ \$($BUSCTL get-property org.tierd1 $ALPHA org.tierd1.Tenant BytesFetched | cut -d' ' -f2) -ge \$(($B0 + 300000)) ]"
check "... ArchivedBytes counts it ($A0 >= 300000)" test "$A0" -ge 300000
echo never >"$V/plain"
J=$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager ReleasePaths as 1 "$V/plain" | job_of)
check "releasing a file never archived: the job fails with org.tierd1.Error.NotArchived" \
	bash -c "$(declare -f job_block wait_job); TL_DIR='$TL_DIR'; wait_job '$J' failed && job_block '$J' | grep -q org.tierd1.Error.NotArchived"
mkdir -p "$V/dir"
check "a path outside every tenant: org.tierd1.Error.NotInTenant" \
	test "$(dbus_err $SEND /org/tierd1 org.tierd1.Manager.ArchivePaths array:string:/etc/hostname)" = org.tierd1.Error.NotInTenant
check "a missing file: org.tierd1.Error.NoSuchFile" \
	test "$(dbus_err $SEND /org/tierd1 org.tierd1.Manager.RestorePaths array:string:$V/missing)" = org.tierd1.Error.NoSuchFile
check "a directory: org.tierd1.Error.NotRegularFile" \
	test "$(dbus_err $SEND /org/tierd1 org.tierd1.Manager.PinPaths array:string:$V/dir)" = org.tierd1.Error.NotRegularFile
check "an fd of a file outside every tenant: NotInTenant, tierctl exits 1" \
	bash -c "'$TIERCTL' archive /etc/hostname 2>&1 | grep -q 'not in any tenant'; test \${PIPESTATUS[0]} = 1"
check "CancelJob of a job that is over: org.tierd1.Error.NoSuchJob" \
	test "$(dbus_err $SEND /org/tierd1 org.tierd1.Manager.CancelJob objpath:$J)" = org.tierd1.Error.NoSuchJob

# A name that is not UTF-8 (D-Bus strings cannot carry it): by fd it works.
BAD=$'\xff\xfe-latin1-\xe9'
cp "$TL_DIR/g.orig" "$V/$BAD"
check "tierctl archive of a file named in Latin-1 (sent as an fd)" "$TIERCTL" archive "$V/$BAD"
check "... tierctl release of it" "$TIERCTL" release "$V/$BAD"
check "... it is released and reads back" bash -c "getfattr -n security.tierd --only-values \"\$1\" | grep -qx state=released &&
	cmp \"\$1\" '$TL_DIR/g.orig'" _ "$V/$BAD"

# Pin: never released; a released file comes back whole.
"$TIERCTL" release "$V/g" >/dev/null
check "tierctl pin of a released file" "$TIERCTL" pin "$V/g"
check "... restores it whole and marks it" bash -c "getfattr -n security.tierd --only-values '$V/g' | grep -qx state=archived &&
	getfattr -n security.tierd.pin '$V/g' >/dev/null"
check "... tierctl release of a pinned file fails (exit 1) and says so" \
	bash -c "'$TIERCTL' release '$V/g' 2>&1 | grep -q pinned; test \${PIPESTATUS[0]} = 1"
check "... and it stays local" bash -c "getfattr -n security.tierd --only-values '$V/g' | grep -qx state=archived"
check "tierctl unpin; then release works" bash -c "'$TIERCTL' unpin '$V/g' && '$TIERCTL' release '$V/g' &&
	getfattr -n security.tierd --only-values '$V/g' | grep -qx state=released"
check "... pin by an unprivileged uid: AccessDenied (exit 3)" bash -c "$(declare -f as_user); as_user daemon '$TIERCTL' pin '$V/g' 2>/dev/null; test \$? = 3"
check "... and CancelJob too" test "$(as_user daemon bash -c "$(declare -f dbus_err); dbus_err $SEND /org/tierd1 org.tierd1.Manager.CancelJob objpath:/org/tierd1/job/1")" = org.tierd1.Error.AccessDenied

# Every mutating call from outside admin_group: AccessDenied, nothing done.
denied_all() {
	local m out
	for m in ArchivePaths ReleasePaths RestorePaths PinPaths UnpinPaths; do
		out=$(as_user daemon bash -c "$(declare -f dbus_err); dbus_err $SEND /org/tierd1 org.tierd1.Manager.$m array:string:$V/g")
		[ "$out" = org.tierd1.Error.AccessDenied ] || { echo "# $m: $out"; return 1; }
	done
	for v in archive release restore pin unpin; do
		as_user daemon "$TIERCTL" "$v" "$V/g" 2>/dev/null
		[ $? = 3 ] || { echo "# tierctl $v: not exit 3"; return 1; }
	done
	as_user daemon "$TIERCTL" tenant set alpha readahead=1M 2>/dev/null
	[ $? = 3 ] || { echo "# tierctl tenant set: not exit 3"; return 1; }
}
before=$(getfattr -n security.tierd --only-values "$V/g")
check "every mutating method and verb from outside admin_group: AccessDenied (exit 3)" denied_all
check "... and the file is as it was" test "$(getfattr -n security.tierd --only-values "$V/g")" = "$before"

# Cancel: a job queued behind a long one is canceled before it starts.
# The long one restores 16 released files with the tenant's worker stopped
# (SIGSTOP): it holds every job slot (16) until the worker goes on.
mkdir -p "$V/many" "$V/blk"
for i in $(seq 400); do head -c 4096 /dev/urandom >"$V/many/$i"; done
for i in $(seq 16); do head -c 100000 /dev/urandom >"$V/blk/$i"; done
"$TIERCTL" archive "$V"/blk/* && "$TIERCTL" release "$V"/blk/*
paths=$(for i in $(seq 400); do printf '%s ' "$V/many/$i"; done)
WPID=$(prop WorkerPid)
kill -STOP "$WPID"
J1=$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager RestorePaths as 16 "$V"/blk/* | job_of)
J2=$($BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager RestorePaths as 400 $paths | job_of)
check "a waiting job's org.tierd1.Job is dbus/org.tierd1.Job.xml" \
	same_interface org.tierd1.Job "$J2" "$TL_ROOT/dbus/org.tierd1.Job.xml"
check "... its State is waiting, FilesTotal 400" bash -c "
	$BUSCTL get-property org.tierd1 $J2 org.tierd1.Job State | grep -qx 's \"waiting\"' &&
	$BUSCTL get-property org.tierd1 $J2 org.tierd1.Job FilesTotal | grep -qx 'u 400'"
check "CancelJob" $BUSCTL call org.tierd1 /org/tierd1 org.tierd1.Manager CancelJob o "$J2"
check "... JobRemoved says canceled, no file done" bash -c "$(declare -f job_block wait_job); TL_DIR='$TL_DIR'
	wait_job '$J2' canceled && job_block '$J2' | grep -A1 'string \"canceled\"' | grep -qx '   uint32 0'"
kill -CONT "$WPID"
check "... the job before it ends done (its worker going on)" wait_job "$J1" done
script -qec "'$TIERCTL' restore $paths" /dev/null >"$TL_DIR/tty" 2>&1
check "tierctl on a terminal: a progress bar and a summary" bash -c "grep -q '\[#' '$TL_DIR/tty' && grep -q 'restore: 400 files done, 0 failed' '$TL_DIR/tty'"
check "... in a pipe: quiet" test -z "$("$TIERCTL" archive $paths 2>&1 | cat)"

# SetTenantPolicy: validated, written back to the file, applied.
cp "$POLICY" "$TL_DIR/policy.before"
check "tierctl tenant set alpha readahead=4M chunk=262144" "$TIERCTL" tenant set alpha readahead=4M chunk=262144
check "... written to the policy file" bash -c "grep -q '\"readahead\": \"4M\"' '$POLICY' && grep -q '\"chunk\": 262144' '$POLICY'"
check "... which is still a valid policy the next tierd reads" "$BUILD/tierd" --check-policy "$POLICY"
check "... and files still read back" cmp "$V/g" "$TL_DIR/g.orig"
check "tierctl tenant set alpha chunk=null removes the key" bash -c "'$TIERCTL' tenant set alpha chunk=null && ! grep -q chunk '$POLICY'"
cp "$POLICY" "$TL_DIR/policy.before"
set_err() { dbus_err $SEND /org/tierd1 org.tierd1.Manager.SetTenantPolicy "string:$1" "string:$2"; }
check "a bad value: org.tierd1.Error.InvalidPolicy" test "$(set_err alpha '{"chunk": "-5"}')" = org.tierd1.Error.InvalidPolicy
check "an unknown key: InvalidPolicy" test "$(set_err alpha '{"bogus": 1}')" = org.tierd1.Error.InvalidPolicy
check "JSON that is not strict (a trailing comma): InvalidPolicy" test "$(set_err alpha '{"chunk": 1,}')" = org.tierd1.Error.InvalidPolicy
check "a duplicate key: InvalidPolicy" test "$(set_err alpha '{"chunk": 1, "chunk": 2}')" = org.tierd1.Error.InvalidPolicy
check "a new backend: org.tierd1.Error.NeedsRestart" test "$(set_err alpha '{"backend": "file:///elsewhere"}')" = org.tierd1.Error.NeedsRestart
check "an unknown tenant: NoSuchTenant" test "$(set_err nosuch '{"chunk": 1}')" = org.tierd1.Error.NoSuchTenant
check "from outside admin_group: AccessDenied" \
	test "$(as_user daemon bash -c "$(declare -f dbus_err set_err); SEND='$SEND'; set_err alpha '{\"chunk\": 1}'")" = org.tierd1.Error.AccessDenied
check "... none of these changed the file" cmp "$POLICY" "$TL_DIR/policy.before"
# The admin group tunes a tenant; only root says where its data goes, which
# secret it uses or which containers see it.
for kv in 'endpoint=http://127.0.0.1:1' 'backend=file:///tmp/elsewhere' 'credentials=/etc/shadow' \
	'headers={"X-Leak":"@/etc/shadow"}' 'containers=["*"]'; do
	key=${kv%%=*}
	as_user nobody timeout 30 "$TIERCTL" tenant set alpha "$kv" >/dev/null 2>"$TL_DIR/rootonly.err"
	rc=$?
	check "an admin_group member (nobody) sets $key: refused, only root (exit $rc)" bash -c "
		[ $rc = 3 ] && grep -q 'only root may set \"$key\"' '$TL_DIR/rootonly.err'"
done
check "... none of these changed the file" cmp "$POLICY" "$TL_DIR/policy.before"
check "... while the same member may still tune it (readahead)" as_user nobody "$TIERCTL" tenant set alpha readahead=2M
check "root sets a header with a secret value" "$TIERCTL" tenant set alpha 'headers={"X-Token":"s3cr3t-d0-not-log"}'
check "... the log names the key, never the value" bash -c "
	grep -q 'policy set (headers)' '$TL_TIERD_LOG' && ! grep -q 's3cr3t-d0-not-log' '$TL_TIERD_LOG'"
"$TIERCTL" tenant set alpha headers=null readahead=4M >/dev/null
cp "$POLICY" "$TL_DIR/policy.before"
mount --bind -o ro "$TL_DIR/etc" "$TL_DIR/etc"
check "a read-only policy (as a ConfigMap): org.tierd1.Error.ReadOnlyPolicy" \
	test "$(set_err alpha '{"chunk": 524288}')" = org.tierd1.Error.ReadOnlyPolicy
check "... tierctl says why and exits 1" bash -c "'$TIERCTL' tenant set alpha chunk=524288 2>&1 | grep -q 'read-only'; test \${PIPESTATUS[0]} = 1"
umount "$TL_DIR/etc"
check "... and the file is unchanged" cmp "$POLICY" "$TL_DIR/policy.before"

# The file is watched: an edit is applied by itself, SIGHUP reloads, a bad
# edit changes nothing and says why.
reloads() { grep -c "member=PolicyReloaded" "$TL_DIR/monitor"; }
wait_reloads() { for _ in $(seq 50); do [ "$(reloads)" -ge "$1" ] && return 0; sleep 0.1; done; return 1; }
N=$(reloads)
sed -i 's|"readahead": "4M"|"readahead": "2M"|' "$POLICY"
check "an edit of the policy file is applied without a call (PolicyReloaded)" wait_reloads $((N + 1))
check "... and logged" grep -q 'policy .* reloaded' "$TL_DIR/tierd.log"
N=$(reloads)
kill -HUP "$TL_TIERD_PID"
check "SIGHUP reloads it" wait_reloads $((N + 1))
N=$(reloads)
cp "$POLICY" "$TL_DIR/policy.good"
sed -i 's|"readahead": "2M"|"readahead": "2Q"|' "$POLICY"
sleep 1
check "a bad edit is not applied (no PolicyReloaded)" test "$(reloads)" = "$N"
check "... tierd logs why, naming the key" grep -q "not applied: .*'readahead'" "$TL_DIR/tierd.log"
check "... and keeps serving" cmp "$V/g" "$TL_DIR/g.orig"
cp "$TL_DIR/policy.good" "$POLICY"
check "tierd is still up after all that" kill -0 "$TL_TIERD_PID"
# tierd stops under a tierctl waiting for its jobs: tierctl says so and
# exits 1, it does not wait forever.
"$TIERCTL" release $paths >/dev/null 2>&1
"$TIERCTL" restore $paths >"$TL_DIR/stopped.out" 2>&1 &
CTL=$!
sleep 0.3
check "SIGTERM: tierd exits 0" tl_tierd_stop
for _ in $(seq 50); do kill -0 "$CTL" 2>/dev/null || break; sleep 0.1; done
check "... a tierctl waiting on its jobs ends too" bash -c "! kill -0 $CTL 2>/dev/null"
wait "$CTL"; rc=$?
check "... with exit 1, saying what was not done" bash -c "[ $rc = 1 ] && grep -Eq 'canceled|aborted|stopped' '$TL_DIR/stopped.out'"
check "tierd stopped: the exporter still answers 200, with tierd_up 0" scrape_ok 'tierd_up 0'
check "... and says so once on stderr" test "$(grep -c 'tierd does not answer' "$TL_DIR/exporter.err")" = 1
kill -TERM "$EXPORTER"
for _ in $(seq 50); do kill -0 "$EXPORTER" 2>/dev/null || break; sleep 0.1; done
check "SIGTERM: the exporter ends" bash -c "! kill -0 $EXPORTER 2>/dev/null"
wait "$EXPORTER"; rc=$?
check "... with exit 0 (exit $rc)" test "$rc" = 0
# Who is asking is never waited for on the loop that answers readers. The
# bus is asked without waiting, and the user database (LDAP, sssd: a
# network service) on a thread, the call put aside meanwhile. A test build
# whose user database takes 3 s, and which ignores the groups this bus
# says (as a bus that does not say them: membership is then the user
# database's word): tierd serves a cold read, a status and root's call
# meanwhile, each at once, then refuses the waiting caller.
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
TIERD_TEST_USERDB_PAUSE_MS=3000 TIERD_TEST_BUS_NO_GROUPS=1 BUILD=$BUILD/testhooks tl_tierd_start "$POLICY" ||
	not_ok "tierd (a test build: a slow user database) starts"
head -c 300000 /dev/urandom >"$TL_DIR/u.orig"
cp "$TL_DIR/u.orig" "$V/u" && chmod 644 "$V/u"
"$TIERCTL" archive "$V/u" >/dev/null && "$TIERCTL" release "$V/u" >/dev/null
tl_log_mark
T0=$(date +%s%N)
as_user daemon bash -c "$(declare -f dbus_err); dbus_err $SEND /org/tierd1 org.tierd1.Manager.ReloadPolicy" \
	>"$TL_DIR/aside.err" &
ASIDE=$!
check "a call from outside admin_group: the user database is asked on a thread" \
	tl_logged 5 "the user database lookup pauses 3000 ms"
T=$(date +%s%N); timeout -k 2 10 cmp -s "$V/u" "$TL_DIR/u.orig"; rc=$?; ms=$(ms_since "$T")
check "... meanwhile a cold read gets its bytes at once (${ms} ms)" test "$rc" = 0 -a "$ms" -lt 1500
T=$(date +%s%N); as_user daemon timeout -k 2 10 "$TIERCTL" status "$V/u" >/dev/null; rc=$?; ms=$(ms_since "$T")
check "... so does another user's tierctl status (${ms} ms)" test "$rc" = 0 -a "$ms" -lt 1500
T=$(date +%s%N); timeout -k 2 10 $SEND /org/tierd1 org.tierd1.Manager.ReloadPolicy >/dev/null; rc=$?; ms=$(ms_since "$T")
check "... and root's ReloadPolicy (${ms} ms)" test "$rc" = 0 -a "$ms" -lt 1500
check "... while the caller's call still waits" kill -0 "$ASIDE"
wait "$ASIDE"; ms=$(ms_since "$T0")
check "... then the waiting call is refused: AccessDenied, once looked up (${ms} ms)" \
	test "$(cat "$TL_DIR/aside.err")" = org.tierd1.Error.AccessDenied -a "$ms" -ge 2500
T=$(date +%s%N); err=$(as_user daemon bash -c "$(declare -f dbus_err); dbus_err $SEND /org/tierd1 org.tierd1.Manager.ReloadPolicy"); ms=$(ms_since "$T")
check "... the same user again: refused without a lookup, the answer kept (${ms} ms)" \
	test "$err" = org.tierd1.Error.AccessDenied -a "$ms" -lt 1500
cp "$TL_DIR/u.orig" "$V/u2" && chmod 644 "$V/u2"
T=$(date +%s%N); as_user nobody timeout -k 2 30 "$TIERCTL" archive "$V/u2" >/dev/null; rc=$?; ms=$(ms_since "$T")
check "a member (nobody) is let in once looked up (${ms} ms)" test "$rc" = 0 -a "$ms" -ge 2500
# One user's flood waits in a share of its own: 8 of its calls wait for
# its lookup, the rest are told TryAgain at once, and root is served.
tl_log_mark
FLOOD=()
for i in $(seq 12); do
	as_user sys bash -c "$(declare -f dbus_err); dbus_err $SEND /org/tierd1 org.tierd1.Manager.ReloadPolicy" \
		>"$TL_DIR/flood.$i" &
	FLOOD+=($!)
done
tl_logged 5 "the user database lookup pauses 3000 ms"
T=$(date +%s%N); timeout -k 2 10 $SEND /org/tierd1 org.tierd1.Manager.ReloadPolicy >/dev/null; rc=$?; ms=$(ms_since "$T")
check "12 calls of one user waiting for its lookup: root's call is answered meanwhile (${ms} ms)" \
	test "$rc" = 0 -a "$ms" -lt 1500
wait "${FLOOD[@]}"
n_again=$(cat "$TL_DIR"/flood.* | grep -c org.tierd1.Error.TryAgain)
n_denied=$(cat "$TL_DIR"/flood.* | grep -c org.tierd1.Error.AccessDenied)
check "... 8 of them waited and were refused, 4 were told TryAgain at once ($n_denied, $n_again)" \
	test "$n_denied" = 8 -a "$n_again" = 4
tl_log_mark
as_user bin bash -c "$(declare -f dbus_err); dbus_err $SEND /org/tierd1 org.tierd1.Manager.ReloadPolicy" \
	>"$TL_DIR/stopped.err" &
ASIDE=$!
tl_logged 5 "the user database lookup pauses 3000 ms"
kill -TERM "$TL_TIERD_PID"
check "SIGTERM while a call waits for its lookup: tierd exits within 10 s" tl_tierd_exits 10
check "... with 0 (exit $TL_TIERD_STATUS)" test "$TL_TIERD_STATUS" = 0
wait "$ASIDE"
check "... and the waiting call is answered ShuttingDown ($(cat "$TL_DIR/stopped.err"))" \
	test "$(cat "$TL_DIR/stopped.err")" = org.tierd1.Error.ShuttingDown
# A user database that does not answer (LDAP down): after 10 s the lookup
# counts as failed, its callers are told TryAgain, and tierd stops anyway.
TIERD_TEST_USERDB_PAUSE_MS=30000 TIERD_TEST_BUS_NO_GROUPS=1 BUILD=$BUILD/testhooks tl_tierd_start "$POLICY" ||
	not_ok "tierd (a test build: a user database that does not answer) starts"
T=$(date +%s%N)
err=$(as_user daemon bash -c "$(declare -f dbus_err); dbus_err $SEND /org/tierd1 org.tierd1.Manager.ReloadPolicy")
ms=$(ms_since "$T")
check "a user database that does not answer: the caller is told TryAgain after 10 s ($err, ${ms} ms)" \
	test "$err" = org.tierd1.Error.TryAgain -a "$ms" -ge 9000 -a "$ms" -lt 16000
check "... and tierd says so" grep -q "the user database did not answer about group nogroup in 10 s" "$TL_TIERD_LOG"
T=$(date +%s%N); timeout -k 2 10 $SEND /org/tierd1 org.tierd1.Manager.ReloadPolicy >/dev/null; rc=$?; ms=$(ms_since "$T")
check "... root is served (${ms} ms)" test "$rc" = 0 -a "$ms" -lt 1500
kill -TERM "$TL_TIERD_PID"
check "... SIGTERM: tierd exits within 10 s, its lookup's thread still waiting" tl_tierd_exits 10
# FileStatusFds: 8 calls read at once (a test build makes each take 2 s);
# then a few wait, a caller with none being read first, and a user with
# too many waiting is told TryAgain. Another user is never refused.
TIERD_TEST_STATUS_PAUSE_MS=2000 BUILD=$BUILD/testhooks tl_tierd_start "$POLICY" ||
	not_ok "tierd (a test build: slow status reads) starts"
tl_log_mark
status_fds() { as_user "$1" timeout -k 2 30 "$BUILD/tests/bus-status-fd" "$V/u" >"$2" 2>&1; } # USER OUT: one call, no retry
ST=()
for i in $(seq 14); do status_fds daemon "$TL_DIR/st.$i" & ST+=($!); done
reading() { [ "$(tail -n +$((TL_LOG_MARK + 1)) "$TL_TIERD_LOG" | grep -c 'a status read pauses')" -ge 8 ]; }
for _ in $(seq 50); do reading && break; sleep 0.1; done
sleep 0.3
T=$(date +%s%N); status_fds nobody "$TL_DIR/st.nobody"; rc=$?; ms=$(ms_since "$T")
check "14 status calls of one user, 8 being read: another user's waits its turn, never TryAgain ($rc, ${ms} ms)" \
	bash -c "[ $rc = 0 ] && grep -qxE '[a-z]+' '$TL_DIR/st.nobody' && [ $ms -ge 1000 ]"
wait "${ST[@]}"
n_again=$(cat "$TL_DIR"/st.[0-9]* | grep -cx org.tierd1.Error.TryAgain)
n_ok=$(cat "$TL_DIR"/st.[0-9]* | grep -cxE '[a-z]+')
check "... of the 14, 12 were read (8, then 4 waiting) and 2 told TryAgain ($n_ok, $n_again)" \
	test "$n_ok" = 12 -a "$n_again" = 2
check "... SIGTERM: tierd exits 0" tl_tierd_stop
tl_summary
