# shellcheck shell=bash
# rgw.sh - start/stop a throw-away one-node Ceph RADOS Gateway (S3) on
# 127.0.0.1 for tests.  Source it:   . rgw.sh
#
#   rgw_install                 apt-get install what is missing of
#                               ceph-mon ceph-osd radosgw ceph-common
#   rgw_start DIR PORT          mon + osd (bluestore on a sparse file) +
#                               radosgw (beast on 127.0.0.1:PORT), all state
#                               under DIR; creates an S3 user and exports
#                               RGW_ENDPOINT RGW_ACCESS_KEY RGW_SECRET_KEY
#                               RGW_DIR RGW_CEPH_CONF
#   rgw_make_bucket NAME        PUT /NAME (SigV4) on $RGW_ENDPOINT
#   rgw_curl ARGS...            curl with SigV4 + credentials filled in
#   rgw_ceph ARGS... / rgw_admin ARGS...
#                               ceph / radosgw-admin against the test cluster
#   rgw_stop DIR                TERM (then KILL) exactly the recorded pids,
#                               wait for them, rm -rf DIR
#
# CEPH_CONF is never exported into the caller's environment: every ceph
# command of this library gets it as a per-command prefix
# (CEPH_CONF=$DIR/ceph.conf cmd ...).  Use rgw_ceph / rgw_admin, or
# CEPH_CONF=$RGW_CEPH_CONF yourself.
#
# Ports (all on 127.0.0.1), derived from PORT unless set in the environment:
#   RGW_MON_PORT     = PORT+10   mon msgr v2
#   RGW_MON_PORT_V1  = PORT+11   mon msgr v1
#   RGW_BIND_MIN     = PORT+20   \ range the osd picks its (about 8)
#   RGW_BIND_MAX     = PORT+99   / ports from (ms_bind_port_min/max)
# So two clusters running at once need PORTs at least 100 apart.
#
# Other knobs (environment): RGW_START_TIMEOUT (s, default 120),
# RGW_ACCESS_KEY / RGW_SECRET_KEY (default: random), RGW_REGION (us-east-1),
# RGW_KEEP_ON_FAIL=1 (keep DIR when rgw_start fails, for post-mortem),
# RGW_BLOCK_SIZE (bytes of the sparse bluestore file, default 10 GiB),
# RGW_VERBOSE=1 (print start-up phase timings), RGW_STOP_GRACE (s, default 5).
#
# Safe to source into scripts that use set -euo pipefail.

RGW_PACKAGES=(ceph-mon ceph-osd radosgw ceph-common)
RGW_EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

_rgw_log() { printf 'rgw: %s\n' "$*" >&2; }
_rgw_now() { date +%s.%N; }
_rgw_since() { awk -v a="$1" -v b="$(_rgw_now)" 'BEGIN{printf "%.1f", b-a}'; }

# ---------------------------------------------------------------- install
rgw_install() {
	local t0 p missing=() st
	t0=$(_rgw_now)
	for p in "${RGW_PACKAGES[@]}"; do
		st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
		[ "$st" = installed ] || missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		_rgw_log "install: all of ${RGW_PACKAGES[*]} already installed ($(_rgw_since "$t0") s)"
		return 0
	fi
	_rgw_log "install: installing ${missing[*]}"
	local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q
		--no-install-recommends -o Dpkg::Options::=--force-confdef
		-o Dpkg::Options::=--force-confold "${missing[@]}")
	if ! "${apt[@]}" >/tmp/rgw-apt.$$.log 2>&1; then
		_rgw_log "install: first attempt failed, running apt-get update and retrying"
		if ! { DEBIAN_FRONTEND=noninteractive apt-get update -q &&
			"${apt[@]}"; } >>/tmp/rgw-apt.$$.log 2>&1; then
			tail -n 30 /tmp/rgw-apt.$$.log >&2
			_rgw_log "install: FAILED after $(_rgw_since "$t0") s (log: /tmp/rgw-apt.$$.log)"
			return 1
		fi
	fi
	rm -f /tmp/rgw-apt.$$.log
	_rgw_log "install: done in $(_rgw_since "$t0") s"
}

# ---------------------------------------------------------------- helpers
# ceph CLI / radosgw-admin against the running test cluster
rgw_ceph() { CEPH_CONF="${RGW_CEPH_CONF:?rgw not started}" timeout 60 ceph --connect-timeout 15 "$@"; }
rgw_admin() { CEPH_CONF="${RGW_CEPH_CONF:?rgw not started}" timeout 60 radosgw-admin "$@"; }

# curl -sS signed with SigV4 for $RGW_ENDPOINT; the caller gives method, URL,
# body, etc.  Adds 'x-amz-content-sha256: <sha256 of empty body>' unless the
# caller passes its own x-amz-content-sha256 header (curl would send BOTH
# headers, sign both, and RGW answers 403 SignatureDoesNotMatch).
# curl 7.88 SigV4 caveats: write query parameters sorted by name, give
# empty ones as 'name=' (?uploads=, not ?uploads), and percent-encode
# query values yourself (prefix=a%2Fb).
rgw_curl() {
	local a hdr=(-H "x-amz-content-sha256: $RGW_EMPTY_SHA256")
	for a in "$@"; do
		case ${a,,} in x-amz-content-sha256:*) hdr=() ;; esac
	done
	# --max-time: a gateway that hangs fails the check, never stalls it.
	curl -sS --max-time 120 --aws-sigv4 "aws:amz:${RGW_REGION:-us-east-1}:s3" \
		--user "${RGW_ACCESS_KEY:?}:${RGW_SECRET_KEY:?}" "${hdr[@]}" "$@"
}

# listening TCP ports (decimal), from /proc so ss/netstat are not needed
_rgw_listening_ports() {
	# (mawk has no strtonum, so parse the hex in bash)
	local f local_addr st _
	for f in /proc/net/tcp /proc/net/tcp6; do
		[ -r "$f" ] || continue
		while read -r _ local_addr _ st _; do
			[ "$st" = 0A ] && echo $((16#${local_addr##*:}))
		done < <(tail -n +2 "$f")
	done | sort -un
}

_rgw_port_busy() {
	local all # no pipe into grep -q: under pipefail an early exit of grep
	all=$(_rgw_listening_ports) # would turn "found" into SIGPIPE/141
	grep -qx "$1" <<<"$all"
}

_rgw_random() { # $1 = length, $2 = tr charset
	local s=""
	while [ ${#s} -lt "$1" ]; do
		s+=$(head -c 256 /dev/urandom | LC_ALL=C tr -dc "$2")
	done
	printf '%s' "${s:0:$1}"
}

# is pid $1 alive and one of our ceph daemons?
_rgw_pid_ours() {
	local pid=$1 exe
	[ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
	exe=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
	case $exe in *ceph-mon*|*ceph-osd*|*radosgw*) return 0 ;; esac
	return 1
}

# fail helper for rgw_start: message, log tail, cleanup
_rgw_fail() {
	local dir=$1 what=$2 logf=$3
	_rgw_log "START FAILED: $what"
	if [ -n "$logf" ] && [ -f "$logf" ]; then
		# ceph logs end with a long crash-dump trailer: show the error
		# lines (level -1 or "error"/"fail") first, else the tail
		local errs
		errs=$(grep -aE '^[^ ]+ [0-9a-f]+ -1 |[Ee]rror|[Ff]ail' "$logf" | grep -v '^ ' | tail -n 15)
		if [ -n "$errs" ]; then
			_rgw_log "---- error lines of $logf ----"
			printf '%s\n' "$errs" >&2
		else
			_rgw_log "---- last lines of $logf ----"
			tail -n 25 "$logf" >&2
		fi
		_rgw_log "----"
	fi
	if [ "${RGW_KEEP_ON_FAIL:-0}" = 1 ]; then
		_rgw_kill "$dir"
		_rgw_log "daemons stopped; state kept in $dir (RGW_KEEP_ON_FAIL=1)"
	else
		rgw_stop "$dir"
	fi
	return 1
}

# wait until "$2" (a command string, eval'ed) succeeds; fail if the
# deadline passes or the daemon whose pid file is $3 dies.
_rgw_wait() {
	local deadline=$1 cond=$2 pidf=$3
	while :; do
		if eval "$cond"; then return 0; fi
		if [ -n "$pidf" ] && ! _rgw_pid_ours "$(cat "$pidf" 2>/dev/null)"; then
			_RGW_WHY="process $(basename "$pidf" .pid) exited"
			return 1
		fi
		if [ "$(date +%s)" -ge "$deadline" ]; then
			_RGW_WHY="timed out"
			return 1
		fi
		sleep 0.5
	done
}

# start "$name" in the foreground (-f) in the background, record its pid
_rgw_spawn() {
	local dir=$1 name=$2; shift 2
	# setsid: own session, so a ^C to the test's process group does not
	# reach it; stdin/out/err detached so callers' pipes are not held open.
	# The child writes its own pid and then exec's the daemon, so the pid
	# file is exact even if setsid has to fork.
	local pidf=$dir/run/$name.pid i
	rm -f "$pidf"
	# shellcheck disable=SC2016
	CEPH_CONF="$dir/ceph.conf" setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' \
		"$pidf" "$@" -f </dev/null >>"$dir/log/$name.out" 2>&1 &
	for ((i = 0; i < 100; i++)); do
		[ -s "$pidf" ] && return 0
		sleep 0.05
	done
	_rgw_log "spawn $name: no pid file after 5 s"
	return 1
}

# ---------------------------------------------------------------- start
rgw_start() {
	local dir=${1:?usage: rgw_start DIR PORT} port=${2:?usage: rgw_start DIR PORT}
	local t0 deadline timeout=${RGW_START_TIMEOUT:-120}
	t0=$(_rgw_now)
	deadline=$(($(date +%s) + timeout))

	case $port in '' | *[!0-9]*) _rgw_log "bad PORT '$port'"; return 1 ;; esac
	local mon2=${RGW_MON_PORT:-$((port + 10))}
	local mon1=${RGW_MON_PORT_V1:-$((port + 11))}
	local bmin=${RGW_BIND_MIN:-$((port + 20))}
	local bmax=${RGW_BIND_MAX:-$((port + 99))}
	local p
	for p in $port $mon2 $mon1; do
		if _rgw_port_busy "$p"; then
			_rgw_log "START FAILED: port $p is already in use (PORT=$port, mon $mon2/$mon1)"
			return 1
		fi
	done
	local t
	for t in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool uuidgen curl setsid; do
		command -v "$t" >/dev/null || { _rgw_log "START FAILED: $t not found (run rgw_install)"; return 1; }
	done

	if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
		_rgw_log "START FAILED: $dir exists and is not empty"
		return 1
	fi
	mkdir -p "$dir"/{mon,osd,run,log} || return 1
	dir=$(cd "$dir" && pwd -P) # absolute: ceph daemons chdir to /
	# unix socket paths are limited to 107 bytes
	if [ $((${#dir} + 22)) -gt 107 ]; then
		_rgw_log "START FAILED: DIR path too long for admin sockets: $dir"
		rm -rf "$dir"
		return 1
	fi

	local fsid conf=$dir/ceph.conf qconf
	qconf=$(printf '%q' "$conf")
	fsid=$(uuidgen)
	# $name / $cluster are expanded by Ceph, not by us
	cat >"$conf" <<EOF
[global]
fsid = $fsid
mon_host = [v2:127.0.0.1:$mon2,v1:127.0.0.1:$mon1]
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_port_min = $bmin
ms_bind_port_max = $bmax
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
ms_mon_client_mode = crc
run_dir = $dir/run
admin_socket = $dir/run/\$name.asok
log_file = $dir/log/\$name.log
mon_data = $dir/mon
osd_data = $dir/osd
osd_objectstore = bluestore
bluestore_block_path = $dir/osd.block
bluestore_block_size = ${RGW_BLOCK_SIZE:-10737418240}
osd_memory_target = 1073741824
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
mon_max_pg_per_osd = 1000
osd_crush_chooseleaf_type = 0
mon_warn_on_pool_no_redundancy = false
mon_warn_on_insecure_global_id_reclaim_allowed = false
mon_data_avail_crit = 1
mon_data_avail_warn = 2
# commit map changes after 0.1 s instead of 1 s (each of the ~10 pool
# commands radosgw issues on first start waits for one): start-up 17 s -> 6 s
paxos_propose_interval = 0.1
rgw_frontends = beast endpoint=127.0.0.1:$port
rgw_data = $dir
# STS (AssumeRole, AssumeRoleWithWebIdentity) for the credential sources'
# tests; the key is read at start only and must be 16 characters.
rgw_sts_key = tierdteststskey0
rgw_s3_auth_use_sts = true

[client.admin]
# CLI tools: no admin socket (parallel invocations would fight over it)
admin_socket =
EOF
	export RGW_DIR=$dir RGW_CEPH_CONF=$conf

	_rgw_phase() { [ "${RGW_VERBOSE:-0}" = 1 ] && _rgw_log "  +$(_rgw_since "$t0") s $*"; return 0; }
	# -- mon
	CEPH_CONF=$conf monmaptool --create --addv a "[v2:127.0.0.1:$mon2,v1:127.0.0.1:$mon1]" \
		--fsid "$fsid" "$dir/run/monmap" >>"$dir/log/setup.log" 2>&1 ||
		{ _rgw_fail "$dir" "monmaptool" "$dir/log/setup.log"; return 1; }
	CEPH_CONF=$conf ceph-mon --mkfs -i a --monmap "$dir/run/monmap" >>"$dir/log/setup.log" 2>&1 ||
		{ _rgw_fail "$dir" "ceph-mon --mkfs" "$dir/log/setup.log"; return 1; }
	_rgw_spawn "$dir" mon.a ceph-mon -i a ||
		{ _rgw_fail "$dir" "could not spawn daemon" ""; return 1; }
	_rgw_wait "$deadline" "CEPH_CONF=$qconf timeout 10 ceph --connect-timeout 5 mon stat >/dev/null 2>&1" \
		"$dir/run/mon.a.pid" ||
		{ _rgw_fail "$dir" "mon did not come up ($_RGW_WHY)" "$dir/log/mon.a.log"; return 1; }

	_rgw_phase "mon up"
	# -- osd
	local ouuid oid
	ouuid=$(uuidgen)
	oid=$(CEPH_CONF=$conf timeout 30 ceph --connect-timeout 10 osd new "$ouuid" 2>>"$dir/log/setup.log") ||
		{ _rgw_fail "$dir" "ceph osd new" "$dir/log/setup.log"; return 1; }
	CEPH_CONF=$conf timeout 60 ceph-osd -i "$oid" --mkfs --osd-uuid "$ouuid" >>"$dir/log/setup.log" 2>&1 ||
		{ _rgw_fail "$dir" "ceph-osd --mkfs" "$dir/log/osd.$oid.log"; return 1; }
	_rgw_phase "osd mkfs done"
	_rgw_spawn "$dir" "osd.$oid" ceph-osd -i "$oid" ||
		{ _rgw_fail "$dir" "could not spawn daemon" ""; return 1; }
	_rgw_wait "$deadline" "CEPH_CONF=$qconf timeout 10 ceph --connect-timeout 5 osd stat 2>/dev/null | grep ' 1 up' >/dev/null" \
		"$dir/run/osd.$oid.pid" ||
		{ _rgw_fail "$dir" "osd did not come up ($_RGW_WHY)" "$dir/log/osd.$oid.log"; return 1; }

	_rgw_phase "osd up"
	# -- radosgw
	_rgw_spawn "$dir" client.rgw.a radosgw -n client.rgw.a ||
		{ _rgw_fail "$dir" "could not spawn daemon" ""; return 1; }
	_rgw_wait "$deadline" "curl -s -o /dev/null --max-time 2 http://127.0.0.1:$port/" \
		"$dir/run/client.rgw.a.pid" ||
		{ _rgw_fail "$dir" "radosgw did not answer on 127.0.0.1:$port ($_RGW_WHY)" "$dir/log/client.rgw.a.log"; return 1; }

	_rgw_phase "radosgw answers"
	# -- S3 user
	local ak=${RGW_ACCESS_KEY:-} sk=${RGW_SECRET_KEY:-}
	[ -n "$ak" ] || ak=$(_rgw_random 20 'A-Z0-9')
	[ -n "$sk" ] || sk=$(_rgw_random 40 'A-Za-z0-9')
	CEPH_CONF=$conf timeout 60 radosgw-admin user create --uid=tierd-test --display-name=tierd-test \
		--access-key="$ak" --secret-key="$sk" >>"$dir/log/setup.log" 2>&1 ||
		{ _rgw_fail "$dir" "radosgw-admin user create" "$dir/log/setup.log"; return 1; }
	export RGW_ACCESS_KEY=$ak RGW_SECRET_KEY=$sk RGW_ENDPOINT=http://127.0.0.1:$port
	export RGW_REGION=${RGW_REGION:-us-east-1}

	_rgw_phase "user created"
	# -- wait until an authenticated request works (user is visible to rgw)
	local code
	# shellcheck disable=SC2016
	_rgw_wait "$deadline" 'code=$(rgw_curl -o /dev/null -w "%{http_code}" --max-time 5 "$RGW_ENDPOINT/" 2>/dev/null); [ "$code" = 200 ]' \
		"$dir/run/client.rgw.a.pid" ||
		{ _rgw_fail "$dir" "signed ListBuckets never returned 200 (last status ${code:-none}; $_RGW_WHY)" \
			"$dir/log/client.rgw.a.log"; return 1; }
	_rgw_log "started in $(_rgw_since "$t0") s: $RGW_ENDPOINT (mon $mon2/$mon1, osd ports $bmin-$bmax, dir $dir)"
}

# ---------------------------------------------------------------- bucket
rgw_make_bucket() {
	local name=${1:?usage: rgw_make_bucket NAME} body code
	body=$(mktemp)
	code=$(rgw_curl -X PUT -o "$body" -w '%{http_code}' "$RGW_ENDPOINT/$name") || true
	if [ "$code" != 200 ]; then
		_rgw_log "make_bucket $name: HTTP ${code:-none}: $(cat "$body")"
		rm -f "$body"
		return 1
	fi
	rm -f "$body"
}

# ---------------------------------------------------------------- stop
# Kill exactly the recorded pids, in dependency order: radosgw, then the
# osd, then the mon (killing the mon first makes the others hang in their
# shutdown for seconds).  TERM, then KILL after RGW_STOP_GRACE s (5).
_rgw_kill() {
	local dir=$1 group f pid pids i
	for group in 'client.*' 'osd.*' 'mon.*' '*'; do
		pids=()
		for f in "$dir"/run/$group.pid; do
			[ -f "$f" ] || continue
			pid=$(cat "$f" 2>/dev/null)
			_rgw_pid_ours "$pid" && pids+=("$pid")
		done
		[ ${#pids[@]} -gt 0 ] || continue
		kill -TERM "${pids[@]}" 2>/dev/null || true
		for ((i = 0; i < ${RGW_STOP_GRACE:-5} * 20; i++)); do
			local alive=()
			for pid in "${pids[@]}"; do _rgw_pid_ours "$pid" && alive+=("$pid"); done
			[ ${#alive[@]} -eq 0 ] && break
			sleep 0.05
		done
		for pid in "${pids[@]}"; do
			if _rgw_pid_ours "$pid"; then
				_rgw_log "stop: pid $pid ignored TERM for ${RGW_STOP_GRACE:-5} s, sending KILL"
				kill -KILL "$pid" 2>/dev/null || true
			fi
		done
		# reap if they are our children; otherwise poll until gone
		for pid in "${pids[@]}"; do
			wait "$pid" 2>/dev/null || true
			for ((i = 0; i < 100; i++)); do
				_rgw_pid_ours "$pid" || break
				sleep 0.05
			done
		done
	done
	return 0
}

rgw_stop() {
	local dir=${1:?usage: rgw_stop DIR}
	[ -d "$dir" ] || return 0
	if [ ! -e "$dir/ceph.conf" ] && [ ! -d "$dir/run" ]; then
		_rgw_log "stop: $dir does not look like an rgw_start DIR; not removing it"
		return 1
	fi
	_rgw_kill "$dir"
	local abs
	abs=$(cd "$dir" && pwd -P)
	rm -rf "$dir"
	if [ "${RGW_DIR:-}" = "$dir" ] || [ "${RGW_DIR:-}" = "$abs" ]; then
		unset RGW_DIR RGW_CEPH_CONF RGW_ENDPOINT
	fi
	return 0
}
