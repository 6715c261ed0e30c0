#!/bin/bash
# The folders and the arrows between them: a file includes headers of its
# own folder and of the folders below it only.
#   cmd/ -> dbus/ -> supervisor/ -> policy/ -> common/
#   worker/, cli/, holder/ -> common/
# dbus/ is the face over supervisor/ (supervisor/face.h is how supervisor/
# tells it anything); cmd/tierd.c is the one file that names both.
# supervisor/'s families (events/, files/, store/...) are one folder here.
# And no two folders have a header of the same name, so an include cannot
# mean one or the other depending on who includes it.
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
# Each header's folder (its top folder: supervisor/events/x.h is supervisor's).
declare -A owner
dups=""
for h in $(ls common/*.h policy/*.h supervisor/*.h supervisor/*/*.h dbus/*.h worker/*.h cli/*.h holder/*.h 2>/dev/null); do
	name=$(basename "$h")
	[ -n "${owner[$name]:-}" ] && dups+="$name: ${owner[$name]}/ and ${h%%/*}/ ($h)"$'\n'
	owner[$name]=${h%%/*}
done
bad=""
for f in $(ls cmd/*.c common/*.[ch] policy/*.[ch] supervisor/*.[ch] supervisor/*/*.[ch] dbus/*.[ch] worker/*.[ch] \
	cli/*.[ch] holder/*.[ch] 2>/dev/null); do
	top=${f%%/*}
	for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		o=${owner[$h]:-}
		case " ${below[$top]} " in
		*" $o "*) ;;
		*) bad+="$f includes \"$h\" (${o:-no folder has it}${o:+/})"$'\n' ;;
		esac
	done
done
if [ -z "$bad" ]; then echo "ok - layers: every include goes to its own folder or one below"
else echo "not ok - layers: includes against the arrows (supervisor/ tells dbus/ through face.h):"; echo -n "$bad" | sed 's/^/# /'; status=1; fi
if [ -z "$dups" ]; then echo "ok - layers: no header name in two folders"
else echo "not ok - layers: headers of the same name in two folders:"; echo -n "$dups" | sed 's/^/# /'; status=1; fi
exit $status
