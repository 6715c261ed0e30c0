#!/bin/bash
# The folders and the arrows between them: a file includes headers of its
# own folder and of the folders below it only.
#   cmd/ -> dbus/ -> supervisor/ -> policy/ -> common/
#   worker/, cli/, holder/ -> common/
# dbus/ is the face over supervisor/ (supervisor/face.h is how supervisor/
# tells it anything); cmd/tierd.c is the one file that names both. And no
# two folders have a header of the same name, so an include cannot mean
# one or the other depending on who includes it.
set -u
cd "$(dirname "$0")/../.."
status=0

declare -A below=(
	[common]="common"
	[policy]="policy common"
	[supervisor]="supervisor policy common"
	[dbus]="dbus supervisor policy common"
	[cmd]="cmd dbus supervisor policy common"
	[worker]="worker common"
	[cli]="cli common"
	[holder]="holder common"
)
bad=""
for dir in "${!below[@]}"; do
	for f in "$dir"/*.[ch]; do
		[ -e "$f" ] || continue
		for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
			[ -e "$dir/$h" ] && continue
			ok=""
			for d in ${below[$dir]}; do [ -e "$d/$h" ] && ok=1; done
			if [ -z "$ok" ]; then
				owner=$(for d in "${!below[@]}"; do [ -e "$d/$h" ] && echo "$d/"; done | tr '\n' ' ')
				bad+="$f includes \"$h\" (${owner:-no folder has it})"$'\n'
			fi
		done
	done
done
if [ -z "$bad" ]; then echo "ok - layers: every include goes to its own folder or one below"
else echo "not ok - layers: includes against the arrows (supervisor/ tells dbus/ through face.h):"; echo -n "$bad" | sed 's/^/# /'; status=1; fi

dups=$(for d in "${!below[@]}"; do ls "$d"/*.h 2>/dev/null; done | xargs -n1 basename | sort | uniq -d)
if [ -z "$dups" ]; then echo "ok - layers: no header name in two folders"
else echo "not ok - layers: headers of the same name in two folders:"; echo "$dups" | sed 's/^/# /'; status=1; fi
exit $status
