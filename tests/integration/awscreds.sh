#!/bin/bash
# AWS keys the way AWS SDKs find them (supervisor/workers/awscreds.c), each
# source against a real S3 (the test's own Ceph RGW) with real temporary
# keys from RGW's STS:
# - web_identity: tierd asks RGW's STS (AssumeRoleWithWebIdentity) with a
#   token signed by an OpenID Connect issuer of the test's (awsmeta.py),
#   which RGW fetches the key of;
# - container and imds: awsmeta.py answers as EKS's and EC2's metadata
#   services do (a fake: nothing real can run here), with keys the test
#   gets from RGW's STS (AssumeRole) or RGW's own user keys;
# - env and chain: tierd's own environment.
# Then temporary keys fetched again before they expire, handed to the
# running worker (no restart, no failed read: the old keys are deleted in
# RGW once the new ones are in), and a failed fetch that keeps the keys.
set -u
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/rgw.sh"
tl_init
TIERCTL=$BUILD/tierctl
BUSCTL="busctl --system"
RGW_PORT=${RGW_PORT:-19300}
META_PORT=${META_PORT:-18650}
META=$TL_DIR/meta
BUCKET=tierd-creds
TENANTS="wi ctr imds env chain bad"

tl_loopfs btrfs 1G "$TL_DIR/fs" || { not_ok "mkfs"; tl_summary; exit 1; }
for s in $TENANTS; do tl_subvol btrfs "$TL_DIR/fs/$s"; done
tl_rgw_store "$BUCKET" x
mkdir -p "$META" "$TL_DIR/orig"

# sts FORM: a request to RGW's STS (or IAM: $2), signed with the test user's keys.
sts() {
	curl -sS --max-time 30 --aws-sigv4 "aws:amz:us-east-1:${2:-sts}" --user "$RGW_ACCESS_KEY:$RGW_SECRET_KEY" -X POST \
		-H 'Content-Type: application/x-www-form-urlencoded' --data "$1" "$RGW_ENDPOINT/"
}
ALL='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::*"]}]}'
role() { # NAME TRUST
	rgw_admin role create --role-name="$1" --path=/ --assume-role-policy-doc="$2" >/dev/null &&
		rgw_admin role-policy put --role-name="$1" --policy-name=all --policy-doc="$ALL" >/dev/null
}
check "RGW: a role the test user may assume" role S3Access \
	'{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam:::user/tierd-test"]},"Action":["sts:AssumeRole"]}]}'

# keys_json FILE SECONDS [AK SK]: keys as the metadata services give them,
# said to expire SECONDS after each answer: the test user's second key
# pair, or else real temporary keys from RGW's STS (good for an hour
# whatever is said).
keys_json() {
	local xml=""
	[ $# -ge 4 ] || xml=$(sts "Action=AssumeRole&DurationSeconds=3600&RoleArn=arn:aws:iam:::role/S3Access&RoleSessionName=t$RANDOM&Version=2011-06-15") || return 1
	python3 - "$1" "$2" "${3:-}" "${4:-}" "$xml" <<'EOF'
import json, re, sys, time
path, secs, ak, sk, xml = sys.argv[1:6]
get = lambda n: re.search(f"<{n}>([^<]*)</{n}>", xml).group(1)
keys = {"AccessKeyId": ak, "SecretAccessKey": sk} if ak else \
       {"AccessKeyId": get("AccessKeyId"), "SecretAccessKey": get("SecretAccessKey"), "Token": get("SessionToken")}
keys.update({"Code": "Success", "Type": "AWS-HMAC", "ExpiresIn": int(secs)})
open(path + ".tmp", "w").write(json.dumps(keys))
EOF
	mv "$1.tmp" "$1"
}

# The OpenID Connect issuer RGW trusts for web identity (its key's
# thumbprint is not checked by this RGW; x5c is needed).
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$META/oidc-key.pem" -out "$META/oidc-cert.pem" -days 2 \
	-subj /CN=127.0.0.1 >/dev/null 2>&1 && openssl x509 -in "$META/oidc-cert.pem" -outform DER -out "$META/oidc-cert.der"
THUMB=$(openssl x509 -in "$META/oidc-cert.pem" -noout -fingerprint -sha1 | sed 's/.*=//;s/://g')
printf 'Bearer ctr-%s\n' "$RANDOM$RANDOM" >"$META/container-token"
python3 "$(dirname "$0")/../lib/awsmeta.py" "$META" "$META_PORT" >"$TL_DIR/meta.log" 2>&1 &
TL_PIDS+=("$!")
check "the metadata services' fake answers" tl_eventually curl -sf -o /dev/null "http://127.0.0.1:$META_PORT/certs"
ISS=http://127.0.0.1:$META_PORT
rgw_admin caps add --uid=tierd-test --caps="oidc-provider=*" >/dev/null
provider() {
	sts "Action=CreateOpenIDConnectProvider&ClientIDList.member.1=tierd&ThumbprintList.member.1=$THUMB&Url=http%3A%2F%2F127.0.0.1%3A$META_PORT&Version=2010-05-08" iam |
		grep -q '<OpenIDConnectProviderArn>'
}
check "RGW: the issuer registered as an OpenID Connect provider" provider
check "RGW: a role for its tokens" role WebRole \
	'{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":["arn:aws:iam:::oidc-provider/127.0.0.1:'$META_PORT'"]},"Action":["sts:AssumeRoleWithWebIdentity"],"Condition":{"StringEquals":{"127.0.0.1:'$META_PORT':app_id":"tierd"}}}]}'
# jwt: a token of the issuer's, good for 10 minutes.
jwt() {
	local b64u='openssl base64 -A | tr "+/" "-_" | tr -d "="' now h p s
	now=$(date +%s)
	h=$(printf '{"alg":"RS256","typ":"JWT","kid":"k1"}' | eval "$b64u")
	p=$(printf '{"iss":"%s","aud":"tierd","sub":"tierd-node","client_id":"tierd","iat":%d,"exp":%d}' "$ISS" "$now" $((now + 600)) | eval "$b64u")
	s=$(printf '%s.%s' "$h" "$p" | openssl dgst -sha256 -sign "$META/oidc-key.pem" -binary | eval "$b64u")
	printf '%s.%s.%s' "$h" "$p" "$s"
}
# Mode 0644, as kubelet projects a service-account token.
jwt >"$TL_DIR/wi.token" && chmod 644 "$TL_DIR/wi.token"

# imds: first the test user's second key pair, said to expire 16 s after
# each answer (fetched again every 8 s): deleted in RGW once the new keys
# are in.
K1=TIERDK1$RANDOM$RANDOM S1=tierd-second-secret-$RANDOM$RANDOM
rgw_admin key create --uid=tierd-test --key-type=s3 --access-key="$K1" --secret-key="$S1" >/dev/null
check "imds: keys that expire in 16 s" keys_json "$META/imds.json" 16 "$K1" "$S1"
check "container: temporary keys from RGW's STS" keys_json "$META/container.json" 3600
export AWS_ACCESS_KEY_ID=$RGW_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$RGW_SECRET_KEY \
	AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$META_PORT/container \
	AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=$META/container-token \
	AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:$META_PORT

tenant() { # NAME SETTINGS
	printf '{"name": "%s", "subvolume": "%s", "mount": "%s", "backend": "s3://%s/%s"%s}' \
		"$1" "$TL_DIR/fs/$1" "$TL_DIR/views/$1" "$BUCKET" "$1" "$2"
}
WI=', "credential_source": "web_identity", "web_identity_token_file": "'$TL_DIR/wi.token'", "sts_endpoint": "'$RGW_ENDPOINT'"'
cat >"$TL_DIR/policy.json" <<EOF
{"defaults": {"stall_timeout": "5s", "connect_timeout": "2s", "endpoint": "$RGW_ENDPOINT"},
 "tenants": [
  $(tenant wi "$WI, \"role_arn\": \"arn:aws:iam:::role/WebRole\""),
  $(tenant ctr ', "credential_source": "container"'),
  $(tenant imds ', "credential_source": "imds"'),
  $(tenant env ', "credential_source": "env"'),
  $(tenant chain ', "credential_source": "chain"'),
  $(tenant bad "$WI, \"role_arn\": \"arn:aws:iam:::role/NoSuchRole\"")]}
EOF
tl_dbus_start
check "tierd starts with a tenant of each source" tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }
check "web_identity: keys from RGW's STS" tl_logged 20 "tenant wi: AWS keys from web_identity, good until"
check "container: keys from the container endpoint" tl_logged 20 "tenant ctr: AWS keys from container, good until"
check "imds: keys from IMDSv2, fetched again in 8 s" tl_logged 20 "tenant imds: AWS keys from imds, good until"
check "env: keys from tierd's environment" tl_logged 5 "tenant env: AWS keys from env"
check "chain: the environment's, first in AWS SDKs' order" tl_logged 5 "tenant chain: AWS keys from env"
check "a role STS refuses: said, with STS's reason" tl_logged 20 "tenant bad: cannot fetch AWS keys from web_identity: STS said"
check "imds: the session token asked for first (IMDSv2)" grep -q "REQ PUT /latest/api/token 200" "$TL_DIR/meta.log"

# Each tenant's keys work: a file archived, released and read back.
roundtrip() { # TENANT FILE
	local v=$TL_DIR/views/$1
	cp "$TL_DIR/orig/$2" "$v/$2" && timeout 60 "$TIERCTL" archive "$v/$2" >/dev/null &&
		timeout 60 "$TIERCTL" release "$v/$2" >/dev/null && timeout 60 cmp "$v/$2" "$TL_DIR/orig/$2"
}
for s in wi ctr imds env chain; do
	head -c 3M /dev/urandom >"$TL_DIR/orig/$s.bin"
	check "$s: a file archived with the tenant's keys, released and read back" roundtrip "$s" "$s.bin"
done
head -c 64K /dev/urandom >"$TL_DIR/orig/bad.bin"
cp "$TL_DIR/orig/bad.bin" "$TL_DIR/views/bad/bad.bin"
rc=0
timeout 60 "$TIERCTL" archive "$TL_DIR/views/bad/bad.bin" >"$TL_DIR/bad.out" 2>&1 || rc=$?
check "bad: its archive fails at once, not a hang (exit $rc)" bash -c "[ $rc != 0 ] && [ $rc != 124 ]"

worker_pid() { $BUSCTL get-property org.tierd1 "/org/tierd1/tenant/$1" org.tierd1.Tenant WorkerPid | cut -d' ' -f2; }
PID0=$(worker_pid imds)
# Rotation: temporary keys in place of the expiring pair, fetched before
# it expires; a reader reads all along; then the old pair is deleted.
tl_log_mark
check "imds: the next keys, temporary ones from STS (said to expire in 16 s)" keys_json "$META/imds.json" 16
reads=0 fails=0
# Two fetches after the new keys were written: the second surely took them.
fetched() { [ "$(tail -n +$((TL_LOG_MARK + 1)) "$TL_TIERD_LOG" | grep -c "tenant imds: AWS keys from imds")" -ge 2 ]; }
until fetched || [ $reads -ge 400 ]; do
	"$TIERCTL" release "$TL_DIR/views/imds/imds.bin" >/dev/null 2>&1
	timeout 30 cmp "$TL_DIR/views/imds/imds.bin" "$TL_DIR/orig/imds.bin" >/dev/null 2>&1 || fails=$((fails + 1))
	reads=$((reads + 1))
	sleep 0.1
done
check "imds: fetched again before they expire, twice" fetched
check "imds: no read failed meanwhile ($fails of $reads)" bash -c "[ $fails = 0 ] && [ $reads -gt 3 ]"
check "imds: the old pair deleted in RGW" rgw_admin key rm --uid=tierd-test --key-type=s3 --access-key="$K1"
check "imds: a read after goes with the new keys" bash -c "'$TIERCTL' release '$TL_DIR/views/imds/imds.bin' >/dev/null && timeout 30 cmp '$TL_DIR/views/imds/imds.bin' '$TL_DIR/orig/imds.bin'"
check "imds: with the same worker (pid $PID0)" test "$(worker_pid imds)" = "$PID0"

# A fetch that fails (the keys are fetched again every 8 s) keeps the
# keys the tenant has, and heals.
tl_log_mark
mv "$META/imds.json" "$META/imds.json.away"
check "imds: the service then answers 404: said, the keys kept" \
	tl_logged 20 "tenant imds: cannot fetch AWS keys from imds"
check "... keeping the keys it has" tl_logged 1 "keeping the keys it has meanwhile"
check "imds: a read meanwhile works" bash -c "'$TIERCTL' release '$TL_DIR/views/imds/imds.bin' >/dev/null && timeout 30 cmp '$TL_DIR/views/imds/imds.bin' '$TL_DIR/orig/imds.bin'"
tl_log_mark
keys_json "$META/imds.json" 3600 || not_ok "keys for an hour"
check "imds: the service back, keys fetched again" tl_logged 70 "tenant imds: AWS keys from imds"

# The chain without keys in the environment: a shared-credentials file
# counts only if it holds the profile (else the next source, the container
# endpoint's); AWS_PROFILE names it.
tl_tierd_stop
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
printf '[team-b]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$RGW_ACCESS_KEY" "$RGW_SECRET_KEY" >"$TL_DIR/shared.cred"
chmod 600 "$TL_DIR/shared.cred"
export AWS_SHARED_CREDENTIALS_FILE=$TL_DIR/shared.cred
tl_log_mark
# Without the env tenant: a source that cannot be used stops tierd at start.
python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); p["tenants"] = [t for t in p["tenants"] if t["name"] != "env"]; json.dump(p, open(sys.argv[2], "w"))' \
	"$TL_DIR/policy.json" "$TL_DIR/policy-noenv.json"
rc=0
timeout 30 "$BUILD/tierd" --policy "$TL_DIR/policy.json" --state-dir "$TL_DIR/state" --no-holder >"$TL_DIR/noenv.log" 2>&1 || rc=$?
check "env: no keys in the environment: tierd refuses to start, and says why (exit $rc)" \
	bash -c "[ $rc != 0 ] && [ $rc != 124 ] && grep -q 'tenant env: \"credential_source\": \"env\": AWS_ACCESS_KEY_ID' '$TL_DIR/noenv.log'"
check "tierd starts with no keys in its environment" tl_tierd_start "$TL_DIR/policy-noenv.json"
check "chain: a file without the profile passed over, the container endpoint's keys" \
	tl_logged 20 "tenant chain: AWS keys from container"
check "chain: ... which work" bash -c "'$TIERCTL' release '$TL_DIR/views/chain/chain.bin' >/dev/null && timeout 30 cmp '$TL_DIR/views/chain/chain.bin' '$TL_DIR/orig/chain.bin'"
tl_tierd_stop
export AWS_PROFILE=team-b
tl_log_mark
check "tierd starts with AWS_PROFILE=team-b" tl_tierd_start "$TL_DIR/policy-noenv.json"
check "chain: the file's profile team-b" tl_logged 20 "tenant chain: AWS keys from file $TL_DIR/shared.cred"
check "chain: ... which work" bash -c "'$TIERCTL' release '$TL_DIR/views/chain/chain.bin' >/dev/null && timeout 30 cmp '$TL_DIR/views/chain/chain.bin' '$TL_DIR/orig/chain.bin'"
unset AWS_PROFILE AWS_SHARED_CREDENTIALS_FILE

secrets=$(grep -ho '"SecretAccessKey": "[^"]*"' "$META"/*.json | cut -d'"' -f4)
check "no secret key or token in tierd's log" bash -c "
	! grep -qF -e '$RGW_SECRET_KEY' -e '$S1' -e '$(cut -c1-40 "$TL_DIR/wi.token")' $(printf -- "-e '%s' " $secrets) '$TL_TIERD_LOG'"
tl_summary
