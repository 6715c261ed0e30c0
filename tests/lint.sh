#!/bin/bash
# Static analysis of every C file: cppcheck (warnings, portability,
# performance) and clang-tidy (bugprone and the static analyzer, .clang-tidy),
# each clean but for the short, justified suppressions in
# tests/lint/cppcheck.supp and .clang-tidy.
set -u
cd "$(dirname "$0")/.."
SRC=$(ls cmd/*.c common/*.c policy/*.c supervisor/*.c supervisor/*/*.c dbus/*.c worker/*.c cli/*.c holder/*.c)
INC="-Icommon -Ipolicy $(ls -d supervisor supervisor/*/ | sed "s|^|-I|; s|/$||" | tr "\n" " ")-Idbus -Iworker -Icli"
FLAGS="-std=gnu11 -D_GNU_SOURCE -DTIERD_LIBEXECDIR=\"/usr/libexec/tierd\" -DTIERD_VERSION=\"$(sed -n 's/^VERSION := //p' Makefile)\" $INC $(pkg-config --cflags mount libsystemd json-c libcurl)"
status=0

if command -v cppcheck >/dev/null; then
	out=$(cppcheck -q --std=c11 --enable=warning,portability,performance --inline-suppr -D_GNU_SOURCE $INC \
		--suppressions-list=tests/lint/cppcheck.supp --error-exitcode=1 $SRC 2>&1)
	if [ $? -eq 0 ] && [ -z "$out" ]; then echo "ok - cppcheck: $(echo $SRC | wc -w) files clean"
	else echo "not ok - cppcheck:"; echo "$out" | sed 's/^/# /'; status=1; fi
else
	echo "skip - cppcheck is not installed (make deps installs it)"
fi

if command -v clang-tidy >/dev/null; then
	export FLAGS
	# The files first, then the compiler's flags after "--".
	out=$(echo $SRC | tr ' ' '\n' | xargs -P "$(nproc)" -n 4 sh -c 'clang-tidy -quiet "$@" -- $FLAGS' tidy 2>&1 |
		grep -E "(warning|error):")
	if [ -z "$out" ]; then echo "ok - clang-tidy: $(echo $SRC | wc -w) files clean (.clang-tidy)"
	else echo "not ok - clang-tidy:"; echo "$out" | sed 's/^/# /'; status=1; fi
else
	echo "skip - clang-tidy is not installed (make deps installs it)"
fi
# The event path's rule, as far as a static look can hold it.
bash tests/lint/eventpath.sh || status=1
# The folders: arrows downward only, no header name twice.
bash tests/lint/layers.sh || status=1
exit $status
