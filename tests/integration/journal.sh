#!/bin/bash
# tierd's log in the journal: a real systemd-journald of the test's own (a
# private mount namespace, volatile storage, none of the host's files or
# kernel log) receives tierd's lines with their priority and fields, so
# `journalctl -p err` finds the errors and only them, TENANT=alpha the
# tenant's lines, ERRNO, OBJECT and PATH are set, and the worker's lines
# (on the stream) carry their priority too. Under systemd, stderr is a
# journal stream that JOURNAL_STREAM names; without systemd as PID 1 here,
# systemd-cat makes the stream and the test exports JOURNAL_STREAM as
# systemd does.
set -u
JOURNALD=/lib/systemd/systemd-journald
if [ -z "${TL_JOURNAL_NS:-}" ] && [ -x "$JOURNALD" ]; then
	exec unshare -m --propagation private env TL_JOURNAL_NS=1 bash "$0" "$@"
fi
source "$(dirname "$0")/../lib/lib.sh"
tl_init
if [ ! -x "$JOURNALD" ] || ! command -v systemd-cat >/dev/null; then
	skip "journal: no systemd-journald or systemd-cat on this machine (package systemd)"
	tl_summary
	exit 0
fi
TIERCTL=$BUILD/tierctl
VIEW=$TL_DIR/views/alpha

# The journal's sockets and files on tmpfs, its config of its own, its
# own messages kept off the host's kernel log (/dev/kmsg is shared).
if [ -d /run/systemd ] && [ -d /run/log ]; then
	mount -t tmpfs -o mode=755 tmpfs /run/systemd && mount -t tmpfs -o mode=755 tmpfs /run/log
else
	mount -t tmpfs -o mode=755 tmpfs /run
fi
[ -d /var/log/journal ] && mount -t tmpfs tmpfs /var/log/journal
printf '[Journal]\nStorage=volatile\nReadKMsg=no\nAudit=no\nForwardToSyslog=no\nForwardToKMsg=no\nForwardToConsole=no\nForwardToWall=no\nRateLimitIntervalSec=0\n' \
	>"$TL_DIR/journald.conf"
[ -e /etc/systemd/journald.conf ] && mount --bind "$TL_DIR/journald.conf" /etc/systemd/journald.conf
[ -d /etc/systemd/journald.conf.d ] && mount -t tmpfs tmpfs /etc/systemd/journald.conf.d
mount --bind /dev/null /dev/kmsg
(unset NOTIFY_SOCKET LISTEN_FDS LISTEN_PID JOURNAL_STREAM; exec env SYSTEMD_LOG_TARGET=console "$JOURNALD") \
	>"$TL_DIR/journald.log" 2>&1 &
TL_PIDS+=($!)
journald_up() { [ -S /run/systemd/journal/socket ] && [ -S /run/systemd/journal/stdout ]; }
check "a systemd-journald of the test's own runs" tl_eventually journald_up || { tl_summary; exit 1; }
# J ARGS...: journalctl on the test's journal; a journald that hangs fails
# it (exit 124), it never reads as an empty answer.
J() { timeout 30 journalctl --sync >/dev/null 2>&1 && timeout 30 journalctl -D /run/log/journal --no-pager "$@"; }

tl_loopfs btrfs 1G "$TL_DIR/fs" || { not_ok "mkfs"; tl_summary; exit 1; }
tl_subvol btrfs "$TL_DIR/fs/alpha"
mkdir -p "$TL_DIR/store"
cat >"$TL_DIR/policy.json" <<EOF2
{"tenants": [{"name": "alpha", "subvolume": "$TL_DIR/fs/alpha", "mount": "$VIEW", "backend": "file://$TL_DIR/store/alpha"}]}
EOF2
tl_dbus_start || { not_ok "dbus-daemon"; tl_summary; exit 1; }
# As systemd starts a service: stdout and stderr a journal stream, and
# JOURNAL_STREAM its device and inode.
cat >"$TL_DIR/as-a-service" <<'EOF2'
#!/bin/sh
exec systemd-cat -t tierd sh -c 'export JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2); exec "$@"' sh "$@"
EOF2
chmod +x "$TL_DIR/as-a-service"
TL_TIERD_WRAPPER=$TL_DIR/as-a-service check "tierd starts with its stderr a journal stream" \
	tl_tierd_start "$TL_DIR/policy.json" || { tl_summary; exit 1; }

# What tierd logs: a start, an archive and a release, then a fill that
# fails (the object deleted from the store): tierd's error with ENOENT, and
# the worker's own error line.
head -c 100000 /dev/urandom >"$VIEW/f"
"$TIERCTL" archive "$VIEW/f" >/dev/null && "$TIERCTL" release "$VIEW/f" >/dev/null
KEY=$(getfattr --absolute-names --only-values -n security.tierd "$TL_DIR/fs/alpha/f" | sed -n 's/^key=//p')
rm -f "$TL_DIR/store/alpha/$KEY"
timeout 20 cat "$VIEW/f" >/dev/null 2>"$TL_DIR/cat.err"
rc=$?
check "(a read of a file whose object is gone fails with EIO, exit $rc)" grep -q "Input/output error" "$TL_DIR/cat.err"

field() { # FIELD: the values of FIELD in the JSON lines on stdin
	python3 -c '
import json, sys
for l in sys.stdin:
    v = json.loads(l).get(sys.argv[1])
    if v is not None: print(v)' "$1"
}
fill_failed="tenant alpha: fill of $KEY [0, 100000) failed: No such file or directory"
check "tierd's lines come in on the journal's own socket (with fields), named tierd" \
	bash -c "$(declare -f J); J -o json _TRANSPORT=journal SYSLOG_IDENTIFIER=tierd | grep -q 'serving 1 tenant'"
check "journalctl -p err: tierd's failed fill is there" bash -c "$(declare -f J); J -p err -o cat | grep -qxF '$fill_failed'"
check "... and no info line (serving, started, archived)" \
	bash -c "$(declare -f J); out=\$(J -p err -o cat) && ! grep -qE 'serving|started|archived' <<<\"\$out\""
check "... the failed fill has ERRNO=2 (ENOENT)" bash -c "$(declare -f J field); J -o json MESSAGE='$fill_failed' | field ERRNO | grep -qx 2"
check "... and OBJECT=$KEY" bash -c "$(declare -f J field); J -o json MESSAGE='$fill_failed' | field OBJECT | grep -qx '$KEY'"
check "journalctl TENANT=alpha: the worker started, the archive, the failed fill" \
	bash -c "$(declare -f J); out=\$(J -o cat TENANT=alpha); grep -q 'worker [0-9]* started' <<<\"\$out\" &&
		grep -q 'archived' <<<\"\$out\" && grep -qF '$fill_failed' <<<\"\$out\""
check "journalctl PATH=$VIEW/f: its archive and release" \
	bash -c "$(declare -f J); out=\$(J -o cat PATH='$VIEW/f'); grep -q '^tenant alpha: archived ' <<<\"\$out\" &&
		grep -q '^tenant alpha: released ' <<<\"\$out\""
check "the worker's error line (on the stream) is an error too: PRIORITY=3" \
	bash -c "$(declare -f J field); J -o json _TRANSPORT=stdout PRIORITY=3 | field MESSAGE | grep -q '^alpha\[[0-9]*\]: request .*: No such file or directory'"
check "... and no other worker line is" \
	bash -c "$(declare -f J); out=\$(J -p err -o cat _TRANSPORT=stdout) && ! grep -qv 'No such file' <<<\"\$out\""
check "tierd stops (SIGTERM)" tl_tierd_stop

# A child that inherits JOURNAL_STREAM but whose stderr went elsewhere (a
# file, a terminal) writes plain lines there.
JOURNAL_STREAM=1:2 "$BUILD/tierd" --check-policy "$TL_DIR/policy.json" 2>"$TL_DIR/plain.log"
check "stderr not the stream JOURNAL_STREAM names: plain lines (tierd[PID]: info: ...)" \
	grep -qE '^tierd\[[0-9]+\]: info: .*a valid policy' "$TL_DIR/plain.log"
tl_summary
