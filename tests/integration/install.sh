#!/bin/bash
# make install into a scratch root: binaries, the D-Bus interfaces where
# D-Bus tools look for them, the bus policy and the systemd unit.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
ROOT=$TL_DIR/root
install_into() { make -s -C "$TL_ROOT" install DESTDIR="$ROOT" BUILD="$BUILD" >/dev/null; }
check "make install DESTDIR=..." install_into
for f in usr/sbin/tierd usr/bin/tierctl usr/libexec/tierd/tierd-worker usr/libexec/tierd/tierd-holder; do
	check "... $f, executable" test -x "$ROOT/$f"
done
for i in Manager Tenant Job Container; do
	check "... usr/share/dbus-1/interfaces/org.tierd1.$i.xml" cmp -s "$ROOT/usr/share/dbus-1/interfaces/org.tierd1.$i.xml" \
		"$TL_ROOT/dbus/org.tierd1.$i.xml"
done
check "... the OCI hook for CRI-O's hooks.d" cmp -s "$ROOT/usr/share/containers/oci/hooks.d/tierd.json" \
	"$TL_ROOT/contrib/oci/tierd-hook.json"
check "... the bus policy" test -f "$ROOT/usr/share/dbus-1/system.d/org.tierd1.conf"
for m in man8/tierd.8 man1/tierctl.1 man5/tierd-policy.5; do
	check "... usr/share/man/$m, which man renders" bash -c "MANWIDTH=80 man -l '$ROOT/usr/share/man/$m' 2>/dev/null | grep -q ."
done
check "... the bash completion, which completes tierctl's verbs" bash -c "source '$ROOT/usr/share/bash-completion/completions/tierctl'
	COMP_WORDS=(tierctl rel); COMP_CWORD=1; _tierctl; [ \"\${COMPREPLY[*]}\" = 'release reload release-groups' ]"
check "... the unit, which starts the installed tierd" grep -qx "ExecStart=/usr/sbin/tierd --policy /etc/tierd/policy.json" \
	"$ROOT/lib/systemd/system/tierd.service"
version=$(sed -n 's/^VERSION := //p' "$TL_ROOT/Makefile")
check "tierd --version says the Makefile's version ($version)" \
	bash -c "[ \"\$('$ROOT/usr/sbin/tierd' --version)\" = 'tierd $version' ]"
check "tierctl --version says it too" bash -c "[ \"\$('$ROOT/usr/bin/tierctl' --version)\" = 'tierctl $version' ]"
# A plain make builds and installs nothing else; a missing build package
# is named, with the command that installs it.
check "make all and make install never run apt-get (only deps, demo, check and bench do)" \
	bash -c "! make -n -C '$TL_ROOT' BUILD='$TL_DIR/b' all install DESTDIR='$TL_DIR/r' | grep -q apt-get"
check "make check does (make deps first)" bash -c "make -n -C '$TL_ROOT' BUILD='$TL_DIR/b' check | grep -q apt-get"
missing_msg() {
	local out
	out=$(make -s -C "$TL_ROOT" BUILD="$TL_DIR/b" BUILD_PKGS=tierd-no-such-package all 2>&1) && return 1
	grep -q "needs these Debian packages: tierd-no-such-package (sudo make deps installs them)" <<<"$out" &&
		[ ! -e "$TL_DIR/b" ]
}
check "a missing build package: make fails at once, naming it and make deps" missing_msg
# The unit as systemd reads it (its ExecStart= pointed at the installed
# binary: systemd-analyze checks that it exists): no complaint, and an
# exposure score no worse than the hardening gives today (6.8 of 10).
if command -v systemd-analyze >/dev/null; then
	mkdir -p "$TL_DIR/unit"
	sed "s|^ExecStart=/usr/sbin/tierd|ExecStart=$ROOT/usr/sbin/tierd|" "$ROOT/lib/systemd/system/tierd.service" \
		>"$TL_DIR/unit/tierd.service"
	check "systemd-analyze verify: the unit draws no complaint" \
		bash -c "out=\$(timeout 60 systemd-analyze verify '$TL_DIR/unit/tierd.service' 2>&1); [ -z \"\$out\" ] ||
			{ echo \"\$out\" | sed 's/^/# /'; false; }"
	score=$(timeout 60 systemd-analyze security --offline=true "$TL_DIR/unit/tierd.service" 2>/dev/null |
		sed -n 's/.*Overall exposure level for tierd.service: \([0-9.]*\).*/\1/p')
	check "systemd-analyze security: exposure $score, at most 6.8" \
		bash -c "timeout 60 systemd-analyze security --offline=true --threshold=68 '$TL_DIR/unit/tierd.service' \
			>'$TL_DIR/security.out' 2>&1 || { grep '✗' '$TL_DIR/security.out' | sed 's/^/# /'; false; }"
else
	skip "systemd-analyze: not installed (package systemd)"
fi
check "the installed tierd looks for its helpers in /usr/libexec/tierd" grep -q /usr/libexec/tierd "$ROOT/usr/sbin/tierd"
tl_summary
