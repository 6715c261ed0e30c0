#!/bin/bash
# The documentation against the code, so neither drifts: the man pages lint
# clean (mandoc -T lint, groff -ww); tierd-policy(5) is what
# man/policy-page.py makes of README.md's Policy section; every policy key
# the parser accepts is in that table and no other; every tierctl verb of
# --help is in tierctl(1) and in the bash completion, and nothing else is;
# every tierd option is in tierd(8); the pages name the Makefile's version.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-$PWD/build}
PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok - $*"; }
not_ok() { FAIL=$((FAIL + 1)); echo "not ok - $*"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else not_ok "$name"; fi; }
# same WHAT A B: two word lists (one per line) are the same set; says the difference.
same() {
	local d
	d=$(diff <(sort -u <<<"$2") <(sort -u <<<"$3")) && return 0
	echo "# $1: $(echo "$d" | grep '^[<>]' | tr '\n' ' ')"
	return 1
}
VERSION=$(sed -n 's/^VERSION := //p' Makefile)

for page in man/tierd.8 man/tierctl.1 man/tierd-policy.5; do
	if command -v mandoc >/dev/null; then
		check "$page: mandoc -T lint -W warning says nothing" \
			bash -c "out=\$(mandoc -T lint -W warning '$page' 2>&1); [ -z \"\$out\" ] || { echo \"\$out\" | sed 's/^/# /'; false; }"
	else
		echo "skip - $page: mandoc is not installed (make deps installs it)"
	fi
	check "$page: groff -ww -man says nothing" \
		bash -c "out=\$(groff -ww -z -man '$page' 2>&1); [ -z \"\$out\" ] || { echo \"\$out\" | sed 's/^/# /'; false; }"
	check "$page: names tierd $VERSION (the Makefile's version)" grep -q "^\\.TH .* \"tierd $VERSION\"" "$page"
done

check "man/tierd-policy.5 is what man/policy-page.py makes of README.md (run it to update the page)" \
	bash -c "python3 man/policy-page.py README.md '$VERSION' | cmp -s - man/tierd-policy.5"

# Policy keys: the parser's (policy/policy.c: top_keys, tenant_keys with
# SETTING_KEYS) against README's table (keys in its first column).
parser_keys=$(python3 - <<'PY'
import re
src = open("policy/policy.c").read()
settings = re.search(r"#define SETTING_KEYS((?:.*\\\n)*.*)", src).group(1)
tenant = re.search(r"tenant_keys\[\] = \{(.*?)\};", src, re.S).group(1).replace("SETTING_KEYS", settings)
top = re.search(r"top_keys\[\] = \{(.*?)\};", src, re.S).group(1)
for k in sorted(set(re.findall(r'"([a-z_]+)"', tenant + top))):
    print(k)
PY
)
readme_keys=$(sed -n '/^## Policy$/,/^## /p' README.md | grep '^| `' | cut -d'|' -f2 | grep -o '`[a-z_]*`' | tr -d '`')
check "policy keys: the parser's and README's table are the same ($(wc -l <<<"$parser_keys") keys)" \
	same "parser < > README" "$parser_keys" "$readme_keys"

help_verbs=$("$BUILD/tierctl" --help | grep -E '^  [a-z]' | awk '{print $1}')
page_verbs=$(grep -A1 '^\.TP' man/tierctl.1 | sed -nE 's/^\\fB([a-z]+(\\-[a-z]+)*).*/\1/p' | sed 's/\\-/-/g')
check "tierctl(1) has every verb of tierctl --help, and no other" same "help < > page" "$help_verbs" "$page_verbs"
completion_verbs=$(bash -c 'source contrib/bash-completion/tierctl; COMP_WORDS=(tierctl ""); COMP_CWORD=1; _tierctl
	printf "%s\n" "${COMPREPLY[@]}"' | grep -v '^-')
check "the bash completion offers every verb of tierctl --help, and no other" \
	same "help < > completion" "$help_verbs" "$completion_verbs"

tierd_options=$(sed -n '/static const struct option options\[\]/,/};/p' supervisor/daemon.c | grep -o '{ "[a-z-]*"' | cut -d'"' -f2)
missing=""
for o in $tierd_options; do grep -qF "\\fB\\-\\-${o//-/\\-}\\fR" man/tierd.8 || missing="$missing --$o"; done
check "tierd(8) describes every option tierd takes ($(echo $tierd_options | wc -w))${missing:+, not:$missing}" test -z "$missing"

echo "# $PASS passed, $FAIL failed, 0 skipped"
[ "$FAIL" -eq 0 ]
