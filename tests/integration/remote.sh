#!/bin/bash
# Remote stores on the real kernel: a plain HTTP store (nginx WebDAV, with a
# bearer token) and S3 (a real one-node Ceph RADOS Gateway on 127.0.0.1 that
# checks SigV4 signatures), through a real tierd and its worker.
set -u
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/nginx.sh"
source "$(dirname "$0")/../lib/rgw.sh"
tl_init
TIERCTL=$BUILD/tierctl
BUSCTL="busctl --system"
PREAD=$BUILD/tests/pread-at
HTTP_PORT=${HTTP_PORT:-18080}
RGW_PORT=${RGW_PORT:-19000}

tl_loopfs btrfs 2G "$TL_DIR/fs" || { not_ok "mkfs"; tl_summary; exit 1; }
tl_subvol btrfs "$TL_DIR/fs/web"
tl_subvol btrfs "$TL_DIR/fs/s3"
mkdir -p "$TL_DIR/orig"
for s in 0 1 4095 $((5 << 20)); do head -c "$s" /dev/urandom >"$TL_DIR/orig/f$s"; done

state_of() { "$TIERCTL" status --json "$1" | sed -n 's/.*"state":"\([a-z]*\)".*/\1/p'; }
fill_bytes() { tl_tenant_field "$1" fill_bytes; }
put_files() { # DIR NAMES...
	local d=$1; shift
	for f in "$@"; do cp "$TL_DIR/orig/$f" "$d/$f"; done
}
roundtrip() { # VIEW NAMES...: archive, release, read back
	local v=$1; shift
	local paths=()
	for f in "$@"; do paths+=("$v/$f"); done
	"$TIERCTL" archive "${paths[@]}" && "$TIERCTL" release "${paths[@]}" || return 1
	for f in "$@"; do [ "$(state_of "$v/$f")" = released ] || { echo "# $f not released"; return 1; }; done
	for f in "$@"; do cmp "$v/$f" "$TL_DIR/orig/$f" || return 1; done
}

# The secrets sit in a directory laid out as kubelet lays out a Secret
# volume (its AtomicWriter): the keys in ..<timestamp>/, ..data a link to
# it, each key a link through ..data; an update writes a new ..<timestamp>/,
# renames a new ..data link over the old one and removes the old directory.
SECRET=$TL_DIR/secret
mkdir -m 1777 "$SECRET"
secret_update() { # KEY=FILE...: the Secret's whole new content
	local stamp old kv
	stamp=..$(date +%Y_%m_%d_%H_%M_%S.%N) old=$(readlink "$SECRET/..data")
	mkdir -m 0755 "$SECRET/$stamp" || return 1
	for kv in "$@"; do
		install -m 0600 "${kv#*=}" "$SECRET/$stamp/${kv%%=*}" || return 1
		[ -L "$SECRET/${kv%%=*}" ] || ln -s "..data/${kv%%=*}" "$SECRET/${kv%%=*}" || return 1
	done
	ln -s "$stamp" "$SECRET/..data_tmp" && mv -T "$SECRET/..data_tmp" "$SECRET/..data" || return 1
	[ -z "$old" ] || rm -rf "${SECRET:?}/$old"
}

nginx_install
printf 'Bearer sekrit\n' >"$TL_DIR/token" && chmod 600 "$TL_DIR/token"
secret_update token="$TL_DIR/token"
# While $TL_DIR/slow-store exists, manifests are sent at 512 bytes a second
# (a GET of one takes seconds) and objects at 4 MiB/s (a chunk's GET, a
# quarter of a second): which GETs run side by side shows in the log.
NGINX_LOCATION_EXTRA="set \$slow ''; if (-f $TL_DIR/slow-store) { set \$slow y; }
	      if (\$uri ~ /manifest/) { set \$slow \"\${slow}m\"; } if (\$slow = ym) { set \$limit_rate 512; }
	      if (\$slow = y) { set \$limit_rate 4m; }" \
	nginx_start "$HTTP_PORT" sekrit || { not_ok "nginx"; tl_summary; exit 1; }

if ! rgw_install >"$TL_DIR/rgw-install.log" 2>&1; then
	RGW_OK=false
	cat "$TL_DIR/rgw-install.log"
	not_ok "install Ceph (mon, osd, radosgw) from Debian"
elif RGW_START_TIMEOUT=180 rgw_start "$TL_DIR/rgw" "$RGW_PORT" >"$TL_DIR/rgw-start.log" 2>&1; then
	RGW_OK=true
	TL_RGW_DIR=$TL_DIR/rgw
	ok "Ceph RGW up on $RGW_ENDPOINT"
	rgw_make_bucket tierd-test >/dev/null
	printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$RGW_ACCESS_KEY" "$RGW_SECRET_KEY" >"$TL_DIR/s3.cred"
	chmod 600 "$TL_DIR/s3.cred"
	secret_update token="$TL_DIR/token" s3.cred="$TL_DIR/s3.cred"
else
	RGW_OK=false
	tail -n 30 "$TL_DIR/rgw-start.log"
	not_ok "Ceph RGW starts"
fi
cleanup_rgw() { [ "${RGW_OK:-false}" = true ] && rgw_stop "$TL_DIR/rgw" >/dev/null 2>&1; tl_cleanup; }
trap cleanup_rgw EXIT

S3_TENANT=""
[ "$RGW_OK" = true ] && S3_TENANT=',
  {"name": "s3", "subvolume": "'$TL_DIR/fs/s3'", "mount": "'$TL_DIR/views/s3'",
   "backend": "s3://tierd-test/tenants/s3", "endpoint": "http://127.0.0.1:'$RGW_PORT'",
   "credentials": "'$SECRET/s3.cred'", "multipart_threshold": "16M", "part_size": "5M"}'
cat >"$TL_DIR/policy.json" <<EOF2
{"defaults": {"stall_timeout": "5s", "connect_timeout": "2s"},
 "tenants": [
  {"name": "web", "subvolume": "$TL_DIR/fs/web", "mount": "$TL_DIR/views/web",
   "backend": "http://127.0.0.1:$HTTP_PORT/objects/web", "headers": {"Authorization": "@$SECRET/token"}}$S3_TENANT]}
EOF2
tl_dbus_start
check "tierd starts with an HTTP and an S3 tenant" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }
WEB=$TL_DIR/views/web S3=$TL_DIR/views/s3

# --- plain HTTP store ---
put_files "$WEB" f0 f1 f4095 f$((5 << 20))
check "http: files of 0 B to 5 MiB archived, released, read back identical" roundtrip "$WEB" f0 f1 f4095 f$((5 << 20))
check "http: objects are in the store under the tenant's prefix" \
	bash -c "ls $TL_DIR/www/objects/web/sha256/ | grep -q ."
check "http: the bearer token went with every request (no 401 in the log)" \
	bash -c "! grep -q '\" 401 ' $TL_DIR/nginx/access.log"
head -c $((40 << 20)) /dev/urandom >"$TL_DIR/orig/big"
put_files "$WEB" big
"$TIERCTL" archive "$WEB/big" && "$TIERCTL" release "$WEB/big"
before=$(fill_bytes web) LOG0=$(wc -l <"$TL_DIR/nginx/access.log")
touch "$TL_DIR/slow-store"
check "http: a 4 KiB read in the middle of a released 40 MiB file" \
	bash -c "cmp <(timeout 60 $PREAD $WEB/big $((20 << 20)) 4096) <($PREAD $TL_DIR/orig/big $((20 << 20)) 4096)"
rm -f "$TL_DIR/slow-store"
after=$(fill_bytes web)
check "http: ... fetched only its chunk ($((after - before)) bytes)" \
		test $((after - before)) -gt 0 -a $((after - before)) -le $((256 << 10))
check "http: ... as a ranged GET (206 in the server's log)" grep -q '" 206 262144 ' "$TL_DIR/nginx/access.log"
# The manifest's head went with the chunk, not before it: the chunk's GET
# began well before the (slowed) manifest's ended, and the manifest's
# before the chunk's ended, which one request after the other cannot do.
side_by_side() {
	tail -n +$((LOG0 + 1)) "$TL_DIR/nginx/access.log" | grep '"GET ' | python3 -c '
import re, sys
g = [re.search(r"\"GET /objects/web/(manifest|sha256)/\S+ .* c=(\d+) t=([\d.]+) d=([\d.]+)$", l) for l in sys.stdin]
if len(g) != 2 or None in g or sorted(m[1] for m in g) != ["manifest", "sha256"]:
    sys.exit(f"not one manifest GET and one object GET: {len(g)} GETs")
t = {m[1]: (float(m[3]) - float(m[4]), float(m[3])) for m in g}
(ms, me), (os_, oe) = t["manifest"], t["sha256"]
if not (me - ms >= 1 and os_ < me - 0.5 and ms < oe):
    sys.exit(f"manifest {ms:.3f}..{me:.3f}, object {os_:.3f}..{oe:.3f}: not side by side")
'
}
check "http: ... its manifest fetched beside the chunk (two GETs at once, one round trip)" side_by_side

# The bearer token rotates in its Secret (as a projected service-account
# token does, hourly): tierd reads the header file anew and hands the new
# header to the running worker; the store then takes only the new token.
web_worker() { $BUSCTL get-property org.tierd1 /org/tierd1/tenant/web org.tierd1.Tenant WorkerPid | cut -d' ' -f2; }
WPID=$(web_worker)
check "http: the store takes the old and the new token while it rotates" nginx_set_token "$HTTP_PORT" 'sekrit|sekrit2'
printf 'Bearer sekrit2\n' >"$TL_DIR/token" && chmod 600 "$TL_DIR/token"
secret_update token="$TL_DIR/token" $([ "$RGW_OK" = true ] && echo s3.cred="$TL_DIR/s3.cred")
logged_within_10s() { for _ in $(seq 100); do grep -q "$1" "$TL_TIERD_LOG" && return 0; sleep 0.1; done; return 1; }
check "http: a rotated token file is picked up (logged within 10 s)" \
	logged_within_10s 'tenant web: header files changed, handing them to the workers'
check "http: then only the new token (the old one expired)" nginx_set_token "$HTTP_PORT" sekrit2
N401=$(grep -c '" 401 ' "$TL_DIR/nginx/access.log")
"$TIERCTL" release "$WEB/big" >/dev/null
check "http: a released file reads back with the new token" timeout 60 cmp "$WEB/big" "$TL_DIR/orig/big" ||
	{ grep -n 'header\|web' "$TL_TIERD_LOG" | tail -30; tail -5 "$TL_DIR/nginx/access.log"; }
check "http: ... no request was refused (no new 401)" test "$(grep -c '" 401 ' "$TL_DIR/nginx/access.log")" = "$N401"
check "http: ... by the same worker (no restart)" test "$(web_worker)" = "$WPID"

# --- S3: Ceph RGW, SigV4 checked for real ---
if [ "$RGW_OK" = true ]; then
	head -c $((40 << 20)) /dev/urandom >"$TL_DIR/orig/multi"
	head -c $((300 << 20)) /dev/urandom >"$TL_DIR/orig/huge"
	put_files "$S3" f0 f1 f4095 f$((5 << 20)) multi huge
	check "s3: files of 0 B to 300 MiB archived to RGW, released, read back identical" \
		roundtrip "$S3" f0 f1 f4095 f$((5 << 20)) multi huge
	key=$(getfattr --absolute-names --only-values -n security.tierd "$TL_DIR/fs/s3/multi" | sed -n 's/^key=//p')
	rgw_curl -sI "$RGW_ENDPOINT/tierd-test/tenants/s3/$key" >"$TL_DIR/head"
	check "s3: a 40 MiB file became a multipart object (ETag ends in -N)" grep -qi 'etag: ".*-[0-9]*"' "$TL_DIR/head"
	check "s3: its SHA-256 is recorded as object metadata" grep -qi "x-amz-meta-sha256: ${key#sha256/}" "$TL_DIR/head"
	"$TIERCTL" release "$S3/huge"
	before=$(fill_bytes s3)
	check "s3: a 4 KiB read in the middle of a released 300 MiB object" \
		bash -c "cmp <($PREAD $S3/huge $((150 << 20)) 4096) <($PREAD $TL_DIR/orig/huge $((150 << 20)) 4096)"
	after=$(fill_bytes s3)
	check "s3: ... fetched only its chunk ($((after - before)) bytes)" \
		test $((after - before)) -gt 0 -a $((after - before)) -le $((256 << 10))
	no_uploads() { ! rgw_curl -s "$RGW_ENDPOINT/tierd-test?uploads=" | grep -q '<UploadId>'; }
	check "s3: no upload left behind (no multipart upload in progress)" no_uploads

	# Uploads a crashed worker left behind are aborted by its replacement:
	# 250 of them, over two pages of the listing, each page more than the
	# 8 KiB a small answer holds.
	for i in $(seq 250); do
		rgw_curl -s -X POST "$RGW_ENDPOINT/tierd-test/tenants/s3/sha256/$(printf '%064d' "$i")?uploads=" >/dev/null
	done
	check "s3: (250 dangling multipart uploads exist)" \
		test "$(rgw_curl -s "$RGW_ENDPOINT/tierd-test?max-uploads=1000&uploads=" | grep -o '<UploadId>' | wc -l)" = 250
	sleep 1.1
	s3_worker=$(tl_tenant_field s3 worker.pid)
	[ "${s3_worker:-0}" -gt 1 ] && kill -KILL "$s3_worker"
	for _ in $(seq 50); do no_uploads && break; sleep 0.2; done
	check "s3: a restarted worker aborts every multipart upload a crash left behind (all 250)" no_uploads
	check "s3: ... and says so" grep -q "aborted 250 multipart upload(s) left behind by a crash" "$TL_TIERD_LOG"

	# A wrong secret: a clear error at archive, EIO at restore.
	"$TIERCTL" release "$S3/f4095"
	printf '[default]\naws_access_key_id = %s\naws_secret_access_key = wrong\n' "$RGW_ACCESS_KEY" >"$TL_DIR/wrong.cred"
	secret_update token="$TL_DIR/token" s3.cred="$TL_DIR/wrong.cred"
	sleep 3 # tierd re-reads the credentials file when it changes
	head -c 100000 /dev/urandom >"$S3/denied"
	check_fails "s3: with a wrong secret, archive fails" "$TIERCTL" archive "$S3/denied"
	check "s3: ... with a clear error in the log (HTTP 403)" grep -q "HTTP 403" "$TL_TIERD_LOG"
	check_fails "s3: ... and a restore gets EIO" cat "$S3/f4095"
	check "s3: ... without the secret in any log" bash -c "! grep -q '$RGW_SECRET_KEY' $TL_TIERD_LOG"
	secret_update token="$TL_DIR/token" s3.cred="$TL_DIR/s3.cred"
	sleep 3
	check "s3: the Secret updated back to the right keys: picked up without a restart, reads work" \
		cmp "$S3/f4095" "$TL_DIR/orig/f4095"
	# A key turned into a link out of the Secret's directory (to a file
	# root owns, mode 0600): refused with a reason, the last keys kept.
	"$TIERCTL" release "$S3/f4095"
	ln -sfn "$TL_DIR/wrong.cred" "$SECRET/s3.cred"
	check "s3: a key linked out of its directory is refused, saying why" \
		tl_eventually grep -q "credentials $SECRET/s3.cred: it is a symbolic link out of its directory" "$TL_TIERD_LOG"
	check "s3: ... the last good keys stay in use (a read works)" cmp "$S3/f4095" "$TL_DIR/orig/f4095"
	ln -sfn ..data/s3.cred "$SECRET/s3.cred"

	# The store goes away mid-read: EIO within the stall timeout, then back.
	"$TIERCTL" release "$S3/huge"
	kill -STOP $(cat "$TL_DIR"/rgw/run/*.pid 2>/dev/null) 2>/dev/null
	start=$(date +%s)
	check_fails "s3: RGW frozen: a read fails" timeout 60 cat "$S3/huge" >/dev/null
	took=$(($(date +%s) - start))
	check "s3: ... within the timeout ($took s)" test "$took" -lt 30
	kill -CONT $(cat "$TL_DIR"/rgw/run/*.pid 2>/dev/null) 2>/dev/null
	check "s3: RGW back: the next read succeeds" cmp "$S3/huge" "$TL_DIR/orig/huge"
else
	skip "s3 tests: RGW did not start (see above)"
fi

check "SIGTERM: tierd exits 0" tl_tierd_stop
tl_summary
