#!/bin/bash
# The rule of the event path (README, "How it works"): the code that answers
# fanotify events never waits on anything a tenant, a caller or the network
# controls. What a static look can hold it to:
# 1. every open of an inode by handle (an inode an event or a caller named)
#    is O_PATH, or goes through fsgroup_open_regular or fsgroup_open_fill
#    (both open_regular_at: O_PATH and S_ISREG first, then O_NONBLOCK: no
#    FIFO, device or lease can make it wait);
# 2. the files that read and answer events (and the D-Bus faces, served by
#    the same loop) walk no tree, read no directory and hash no whole file:
#    that runs on threads (offthread.h, treewalk.h) or in the worker.
#    tierd-holder's guard (holder/guard.c) answers events too;
# 3. nor sleeps or yields to let another process run: a reader not asleep
#    yet is looked at again later (supervisor/events/settle.c), never polled for;
# 4b. nor parse, merge or format an access trace (tracework.c, on threads);
# 4d. nor name a file through btrfs's tree (inopath.h; namer.h, on threads);
# 4e. nor open a directory by handle (its reconnect is a lookup a level);
# 4f. nor walk a named path past the kernel's lookup cache (RESOLVE_CACHED);
# 4g. nor decrypt or parse a catalog object read from the store (a
#    snapshot may be a GiB, a list of snapshots 4 MiB: store_get_worked);
# 4h. nor read the stub of a file a D-Bus caller named (a lookup in the
#    filesystem's tree: the caller picks cold ones);
# 4i. nor wait for the bus daemon (behind any caller's 10 MB message) or
#    the user database (LDAP, sssd) to say who a caller is: no
#    synchronous bus call, no creds query, no getpw*/getgr* but in a
#    thread's work function (dbus/callers.c asks the bus without waiting);
# 4j. nor sort or compare what a long task (gc, audit) gathered: millions
#    of hashes, catalog entries, listed objects (*_work, *_run: threads);
# 5. a log line (written from anywhere, the event path too) never waits
#    for journald: the journal sink sends with MSG_DONTWAIT only, and no
#    sd_journal_* call (which blocks while journald is behind) is made;
# 6. nor for a worker: tierd's end of each worker's socket is made
#    O_NONBLOCK right after the fork, every send to a worker goes through
#    workers.c (which keeps what a full socket refuses for EPOLLOUT), and
#    nothing else in tierd sends on a worker's socket;
# 7. nor for a file's inode lock after a fill or a sync (inodework.h).
# tests/integration/isolation.sh checks the same rule on a real kernel.
set -u
cd "$(dirname "$0")/../.."
status=0

# 1. open_by_handle_at statements (to their ';'), outside open_regular_at.
bad=$(awk '
	FNR == 1 { infn = "" }
	/^[a-z].*open_regular_at\(.*\) \{$/ { infn = "regular" }
	/^}/ { infn = "" }
	/open_by_handle_at\(/ { stmt = ""; collecting = 1; line = FNR }
	collecting { stmt = stmt $0; if ($0 ~ /;/) { collecting = 0
		if (infn != "regular" && stmt !~ /O_PATH/) print FILENAME ":" line ": " stmt } }
' supervisor/*.c supervisor/*/*.c dbus/*.c holder/*.c)
if [ -z "$bad" ]; then echo "ok - event path: every open by handle is O_PATH or open_regular_at (fsgroup.c)"
else echo "not ok - event path: an open by handle that may wait (use fsgroup_open_regular):"; echo "$bad" | sed 's/^/# /'; status=1; fi

# 2. No tree walk, directory read or whole-file hash where events are served
# or the bus is answered.
EVENT_FILES="supervisor/events/dispatch.c supervisor/events/fillrecord.c supervisor/events/fillwatch.c supervisor/events/preevent.c supervisor/events/fsgroup.c supervisor/events/settle.c common/readeraccess.c common/inflight.c common/fanevent.c
	supervisor/files/batch.c supervisor/events/usegroup.c supervisor/reload.c supervisor/sdstatus.c supervisor/journallog.c common/log.c dbus/*.c holder/*.c
	supervisor/traces/trace.c supervisor/traces/prefetch.c supervisor/traces/hydrate.c"
bad=$(grep -nE '\b(treewalk|opendir|fdopendir|readdir|nftw|fts_open|scandir|sha256_fd|hash_file|qsort)\(' $EVENT_FILES)
if [ -z "$bad" ]; then echo "ok - event path: no tree walk, directory read, whole-file hash or sort in $(echo $EVENT_FILES | wc -w) files"
else echo "not ok - event path: work that grows with a tenant's tree where events are answered:"; echo "$bad" | sed 's/^/# /'; status=1; fi

# 3. No sleep or yield where events are read and answered (dbus/ may wait
# for its bus name at start, before anything is served).
ANSWER_FILES=$(echo $EVENT_FILES | tr ' ' '\n' | grep -v '^dbus/')
bad=$(grep -nE '\b(sleep|usleep|nanosleep|clock_nanosleep|sched_yield|pause)\(' $ANSWER_FILES)
if [ -z "$bad" ]; then echo "ok - event path: no sleep or yield in $(echo $ANSWER_FILES | wc -w) files"
else echo "not ok - event path: a wait for another process to be scheduled where events are answered:"; echo "$bad" | sed 's/^/# /'; status=1; fi

# 4. The catalog's tree work (walking a tenant's tree, reducing a catalog
# to a tree and making it: work that grows with the tree) runs only on a
# thread of its own: called from an offthread_start work function, named
# *_run or *_thread by convention.
bad=$(awk '
/^[a-z][^;]*\(/ && $0 !~ /;[ \t]*$/ { fn = $0; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn) }
/(^|[^a-z_])(catalog_reduce|catalog_make_tree|catalog_walk)\(/ && fn !~ /(_run|_thread)$/ { print FILENAME ":" FNR ": in " fn "(): " $0 }
' $(ls supervisor/*.c supervisor/*/*.c dbus/*.c | grep -v supervisor/store/catalogtree.c))
if [ -z "$bad" ]; then echo "ok - event path: the catalog's tree work runs on threads only"
else echo "not ok - event path: the catalog's tree work called on the event loop (give it an offthread job):"; echo "$bad" | sed 's/^/# /'; status=1; fi

# 4b. So does the work of access traces that grows with them: parsing,
# merging and formatting a trace object (up to 16 MiB the tenant's store
# holds), naming touched files, finding traced ones. Only
# supervisor/traces/tracework.c (thread work functions) calls it.
bad=$(grep -nE '(^|[^a-z_])trace_(parse|merge|format|add)\(' $(ls supervisor/*.c supervisor/*/*.c dbus/*.c |
	grep -vE 'supervisor/traces/(tracework|traceformat)\.c'))
if [ -z "$bad" ]; then echo "ok - event path: trace objects are parsed, merged and formatted on threads only"
else echo "not ok - event path: trace work on the event loop (do it in supervisor/traces/tracework.c):"; echo "$bad" | sed 's/^/# /'; status=1; fi
# 4c. The network is asked only from threads: the store's host looked up
# (resolver.c's lookup_work) and temporary AWS keys fetched (awsfetch.c,
# run by awscreds.c's fetch_work); nothing else in tierd calls curl or the
# resolver, and those two are called from offthread work functions only.
bad=$( (grep -nE '\b(curl_easy_perform|curl_multi_perform|getaddrinfo|gethostbyname|res_query)\(' \
	$(ls supervisor/*.c supervisor/*/*.c dbus/*.c | grep -vE 'supervisor/workers/(awsfetch|resolver)\.c')
	grep -nE '(^|[^a-z_])awsfetch_run\(' $(ls supervisor/*.c supervisor/*/*.c dbus/*.c | grep -v awsfetch.c) | grep -v ':[[:space:]]*awsfetch_run(&f->plan'
	awk '/^[a-z][^;]*\(/ && $0 !~ /;[ \t]*$/ { fn = $0; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn) }
	     /getaddrinfo\(/ && fn != "lookup_work" { print FILENAME ":" FNR ": in " fn "(): " $0 }' supervisor/workers/resolver.c
	awk '/^[a-z][^;]*\(/ && $0 !~ /;[ \t]*$/ { fn = $0; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn) }
	     /awsfetch_run\(/ && fn != "fetch_work" { print FILENAME ":" FNR ": in " fn "(): " $0 }' supervisor/workers/awscreds.c) |
	grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/?\*|//)')
if [ -z "$bad" ]; then echo "ok - event path: the network (curl, DNS) is asked from threads only"
else echo "not ok - event path: a network call that may run on the event loop (give it an offthread job):"; echo "$bad" | sed 's/^/# /'; status=1; fi
# 4d. So is naming a file whose dentry was dropped (inopath.h: a btrfs
# tree lookup per directory level, as deep as the tenant chose): only
# namer.c and tracework.c (thread work) include inopath.h, and in namer.c
# only name_work (its thread's work) calls inode_rel_beneath or
# subvol_rel_of_fd; the loop reads names through usage_name_of_fd (the
# /proc link, and names the threads found).
bad=$( (grep -lE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"inopath\.h"' $(find supervisor dbus common holder -name '*.[ch]') |
	grep -vxE 'supervisor/(files/(inopath|namer)|traces/tracework)\.c' | sed 's/$/: includes inopath.h/'
	awk '/^[^ \t#\/*}{][^;]*\(/ && $0 !~ /;[ \t]*$/ { fn = $0; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn) }
	     /(inode_rel_beneath|subvol_rel_of_fd)[[:space:])]*\(/ && $0 !~ /^[a-z].*\) \{$/ && fn != "name_work" {
		print FILENAME ":" FNR ": in " fn "(): " $0 }' supervisor/files/namer.c) |
	grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/?\*|//)')
if [ -z "$bad" ]; then echo "ok - event path: files whose dentries were dropped are named on threads only"
else echo "not ok - event path: a file named through btrfs's tree on the event loop (ask namer.h):"; echo "$bad" | sed 's/^/# /'; status=1; fi
# 4e. So is opening a directory by its handle: a directory's dentry must be
# connected, and if the kernel dropped it, open_by_handle_at() finds it
# again through its parents, a lookup per level, as deep as the tenant
# chose. The catalog's watch hears directories by handle: in
# catalogchanges.c only dir_link opens one, and only resolve_work (its
# thread's work) calls dir_link; catalogwatch.c opens none.
bad=$(awk '/^[ \t]*(\/?\*|\/\/)/ { next }
	/^[^ \t#\/*}{][^;]*\(/ && $0 !~ /;[ \t]*$/ { fn = $0; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn) }
	/open_by_handle_at\(/ && fn != "dir_link" { print FILENAME ":" FNR ": in " fn "(): " $0 }
	/(^|[^a-z_])dir_link\(/ && $0 !~ /^[a-z].*\) \{$/ && fn != "resolve_work" { print FILENAME ":" FNR ": in " fn "(): " $0 }' \
	supervisor/store/catalogchanges.c supervisor/store/catalogwatch.c)
if [ -z "$bad" ]; then echo "ok - event path: the catalog's directories are opened by handle on threads only"
else echo "not ok - event path: a directory opened by handle on the event loop (catalogchanges.c: resolve_work):"; echo "$bad" | sed 's/^/# /'; status=1; fi
# 4f. And a path a caller or a job named is walked on the loop from the
# kernel's lookup cache only: every openat2 resolve in fileref.c has
# RESOLVE_CACHED (a level missing there is a lookup in the filesystem),
# and file_open_beneath is called uncached (false) only by pathwarm.c's
# warm_work, its thread's work.
bad=$( (grep -n '\.resolve *=' supervisor/files/fileref.c | grep -v RESOLVE_CACHED
	awk '/^[^ \t#\/*}{][^;]*\(/ && $0 !~ /;[ \t]*$/ { fn = $0; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn) }
	     /file_open_beneath\(/ && $0 !~ /true\)/ && $0 !~ /^[a-z].*\) \{$/ && !(FILENAME ~ /pathwarm\.c$/ && fn == "warm_work") {
		print FILENAME ":" FNR ": in " fn "(): " $0 }' $(ls supervisor/*.c supervisor/*/*.c dbus/*.c)) |
	grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/?\*|//)')
if [ -z "$bad" ]; then echo "ok - event path: a named path is walked from the lookup cache only (RESOLVE_CACHED), else on a thread"
else echo "not ok - event path: a path walked on the loop past the lookup cache (add RESOLVE_CACHED; pathwarm.c):"; echo "$bad" | sed 's/^/# /'; status=1; fi
# 4g. A catalog object read from the store (a snapshot may be a GiB, and
# reading it decrypts it whole) is decoded on a thread: catalog_decode is
# called only in the work functions store_get_worked runs (*_work,
# gc.c's mark_object): on a thread, or on the loop for an object of at
# most 64 KiB (storeio.c: WORK_INLINE_MAX). So is catalog_parse_json (a
# list of snapshots may be 4 MiB), but in catalog_parse_epoch (a lease:
# at most 4 KiB).
bad=$(awk '/^[ \t]*(\/?\*|\/\/)/ { next }
	/^[^ \t#\/*}{][^;]*\(/ && $0 !~ /;[ \t]*$/ { fn = $0; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn) }
	/(^|[^a-z_])catalog_(decode|parse_json)\(/ && $0 !~ /^[a-z].*\) \{$/ && fn !~ /_work$/ && fn != "mark_object" && fn != "catalog_parse_epoch" {
		print FILENAME ":" FNR ": in " fn "(): " $0 }' $(ls supervisor/*.c supervisor/*/*.c dbus/*.c))
if [ -z "$bad" ]; then echo "ok - event path: catalog objects read from the store are decoded on threads only"
else echo "not ok - event path: a catalog object decoded on the event loop (store_get_worked):"; echo "$bad" | sed 's/^/# /'; status=1; fi
# 4h. The D-Bus faces read no stub on the loop: a status's read
# (file_status_fd, stub_read*) is made in a thread's
# work function only (*_work: statusbus.c's status_work; FileStatus by
# path reads in pathwarm.c's warm_work).
bad=$(awk '/^[ \t]*(\/?\*|\/\/)/ { next }
	/^[^ \t#\/*}{][^;]*\(/ && $0 !~ /;[ \t]*$/ { fn = $0; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn) }
	/(^|[^a-z_])(file_status_fd|stub_read[a-z_]*|stub_pinned[a-z_]*)\(/ && $0 !~ /^[a-z].*\) \{$/ && fn !~ /_work$/ {
		print FILENAME ":" FNR ": in " fn "(): " $0 }' dbus/*.c)
if [ -z "$bad" ]; then echo "ok - event path: the D-Bus faces read callers' stubs on threads only"
else echo "not ok - event path: a caller's stub read on the event loop (statusbus.c: status_work):"; echo "$bad" | sed 's/^/# /'; status=1; fi
# 4i. Who is asking is learnt without waiting: no synchronous bus call
# (sd_bus_call*, sd_bus_get_name_creds, sd_bus_query_sender_creds...: a
# round trip to the bus daemon, which queues it behind what any caller
# sent) and no user database lookup (getpw*, getgr*, getgrouplist,
# initgroups: maybe the network) in supervisor/ or dbus/, but in a
# thread's work function (*_work: access.c's lookup_work). Startup's own
# calls (sd_bus_request_name) are not callers' and are not matched.
bad=$(awk '/^[ \t]*(\/?\*|\/\/)/ { next }
	/^[^ \t#\/*}{][^;]*\(/ && $0 !~ /;[ \t]*$/ { fn = $0; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn) }
	/(^|[^a-z_])(sd_bus_call(_method)?|sd_bus_get_(name|owner)_creds|sd_bus_query_sender_creds|sd_bus_get_name_machine_id|getpw[a-z_]*|getgr[a-z_]*|getgrouplist|initgroups)\(/ &&
	$0 !~ /^[a-z].*\) \{$/ && fn !~ /_work$/ {
		print FILENAME ":" FNR ": in " fn "(): " $0 }' $(ls supervisor/*.c supervisor/*/*.c dbus/*.c))
if [ -z "$bad" ]; then echo "ok - event path: callers are identified without waiting (no synchronous bus call or user database lookup)"
else echo "not ok - event path: a wait for the bus or the user database on the loop (dbus/callers.c, access.c's lookup_work):"; echo "$bad" | sed 's/^/# /'; status=1; fi
# 4j. A long task's sorts (gc's marks, audit's catalog, listing and
# walk) and what goes through its listings run on threads: in gc.c and
# audit.c, qsort, a sort of marks and the audit's comparison only in
# *_work or *_run functions, and listings only through store_list_worked
# (store_list runs its callback on the loop, over every object listed).
bad=$(awk '/^[ \t]*(\/?\*|\/\/)/ { next }
	/^[^ \t#\/*}{][^;]*\(/ && $0 !~ /;[ \t]*$/ { fn = $0; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn) }
	/(^|[^a-z_])(qsort|qsort_r|hashes_sort|hashes_merge_sort|compare_work|named_objects_work)\(/ && $0 !~ /^[a-z].*\) \{$/ && fn !~ /_(work|run)$/ {
		print FILENAME ":" FNR ": in " fn "(): " $0 }
	/(^|[^a-z_])store_list\(/ && fn != "on_snapshots_listed" && fn != "gc_start" { print FILENAME ":" FNR ": in " fn "(): " $0 }' \
	supervisor/store/gc.c supervisor/store/audit.c)
if [ -z "$bad" ]; then echo "ok - event path: gc's and audit's sorts and listings are gone through on threads only"
else echo "not ok - event path: a long task's sort or listing on the event loop (store_list_worked, a *_work function):"; echo "$bad" | sed 's/^/# /'; status=1; fi
# 4k. Rules 4d-4j trust a function named *_work to run on a thread: such a
# function is given to a thread (offthread_start, store_*_worked), and
# called directly only from another *_work function or from the audit's
# walk thread (walk_run), never from the loop's code.
bad=$(awk '/^[ \t]*(\/?\*|\/\/)/ { next }
	/^[^ \t#\/*}{][^;]*\(/ && $0 !~ /;[ \t]*$/ { fn = $0; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn) }
	/(^|[^a-z_0-9])[a-z_0-9]+_work\(/ && $0 !~ /^[a-z].*\) \{$/ && $0 !~ /^[a-z][^(]*\(.*\);$/ &&
	fn !~ /_work$/ && !(FILENAME ~ /audit\.c$/ && fn == "walk_run") { print FILENAME ":" FNR ": in " fn "(): " $0 }' \
	$(ls supervisor/*.c supervisor/*/*.c dbus/*.c))
if [ -z "$bad" ]; then echo "ok - event path: a thread's work function (*_work) is called from threads only"
else echo "not ok - event path: a *_work function called on the event loop (give it to a thread: offthread_start):"; echo "$bad" | sed 's/^/# /'; status=1; fi
# 5. The journal sink: every send non-blocking, no sd_journal_*.
bad=$( (grep -nE '\bsend(msg|to)?\(' supervisor/journallog.c | grep -v MSG_DONTWAIT
	grep -nE '\bsd_journal_[a-z]+\(' supervisor/*.c supervisor/*/*.c dbus/*.c common/*.c) | grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/?\*|//)')
if [ -z "$bad" ]; then echo "ok - event path: a log line never waits for journald (MSG_DONTWAIT, no sd_journal_*)"
else echo "not ok - event path: a log line that may wait for journald:"; echo "$bad" | sed 's/^/# /'; status=1; fi
# 6. Sends to a worker: only in workers.c, on a socket it made non-blocking
# (every proto_send elsewhere is one: the holder's socket is the only other).
bad=$( (grep -nE 'proto_send\(' supervisor/*.c supervisor/*/*.c dbus/*.c | grep -v '^supervisor/workers/workers.c:' | grep -v 'holder_sock'
	grep -qE 'fcntl\(w->sock, F_SETFL, O_NONBLOCK\)' supervisor/workers/workers.c || echo "supervisor/workers/workers.c: no fcntl(w->sock, F_SETFL, O_NONBLOCK)") | grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/?\*|//)')
if [ -z "$bad" ]; then echo "ok - event path: a worker that stops reading never holds tierd (its socket is non-blocking, sends only in workers.c)"
else echo "not ok - event path: a send that may wait for a worker:"; echo "$bad" | sed 's/^/# /'; status=1; fi
# 7. What takes a file's inode lock after each fill (its owner's mode and
# times put back) and after each sync (the stub's record) runs on the
# tenant's inode threads (supervisor/events/inodework.h): in fillrecord.c,
# nothing that takes it is called but from *_work functions (run on those
# threads) and from the rare paths named here: a failed verification, a
# manifest gone from the store, a record with nothing in flight
# (file_record, from tfile_record_checked); stub_put_back_attrs is the
# catalog's, on its threads. The lock is the worker's while
# it writes or syncs the file.
bad=$(awk '/^[a-z][^;]*\(/ && $0 !~ /;[ \t]*$/ { fn = $0; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn) }
	/(^|[^a-z_])(put_back_quiet|put_back_attrs|stub_write_fd|tally_stub_write|futimens|fchmod|fsetxattr)\(/ &&
	fn !~ /_work$/ && fn !~ /^(put_back_quiet|put_back_attrs|stub_put_back_attrs|file_record|file_record_verify_failure|file_forget_manifest|tfile_record_checked)$/ {
		print FILENAME ":" FNR ": in " fn "(): " $0 }' \
	supervisor/events/fillrecord.c | grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/?\*|//)')
if [ -z "$bad" ]; then echo "ok - event path: a fill's put-back and a sync's record take the inode lock on threads only"
else echo "not ok - event path: an inode lock taken on the event loop after a fill (give it an inode job):"; echo "$bad" | sed 's/^/# /'; status=1; fi
exit $status
