#!/bin/bash
# tierctl tenant import of a catalog of many files (default 100,000, in
# 1,000 directories): the time from the call to its reply (the tree made as
# released stubs, and the new writer's snapshot of it), against tar making
# the same tree of empty files with the same names, modes and mtimes (the
# baseline). The catalog is written straight into a file:// store; every
# entry names one real object, so a sample of the files is read back.
set -u
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/lib.sh"
N=${BENCH_FILES:-$(bench_size 100000 10000)}
tl_init
FS=$TL_DIR/fs STORE=$TL_DIR/store
tl_loopfs btrfs 4G "$FS" || { echo "bench import: cannot make the filesystem"; exit 1; }
tl_subvol btrfs "$FS/alpha"
mkdir -p "$STORE" "$TL_DIR/tar"
head -c 8192 /dev/urandom >"$TL_DIR/content"
SHA=$(sha256sum <"$TL_DIR/content" | cut -d' ' -f1)
mkdir -p "$STORE/sha256" && cp "$TL_DIR/content" "$STORE/sha256/$SHA"

echo "# writing a catalog of $N files, and a tar of the same tree..."
python3 - "$STORE" "$N" "$SHA" "$TL_DIR/tree.tar" <<'PY'
import hashlib, io, json, os, sys, tarfile, time
store, n, sha, tar = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
now = int(time.time() * 1e6)
def put(key, data):
    os.makedirs(os.path.dirname(os.path.join(store, key)), exist_ok=True)
    open(os.path.join(store, key), "wb").write(data)
dirs = 1000
lines = [json.dumps({"tierd_catalog": 1, "kind": "snapshot", "epoch": 1, "seq": 0, "time": now,
                     "entries": n + dirs}, separators=(",", ":"))]
t = tarfile.open(tar, "w", format=tarfile.PAX_FORMAT)
for d in range(dirs):
    lines.append(json.dumps({"op": "put", "path": f"d{d:04}", "type": "dir", "mode": 0o755, "uid": 0, "gid": 0,
                             "mtime": [1700000000, 0]}, separators=(",", ":")))
    ti = tarfile.TarInfo(f"d{d:04}"); ti.type = tarfile.DIRTYPE; ti.mode = 0o755; ti.mtime = 1700000000
    t.addfile(ti)
for i in range(n):
    path = f"d{i % dirs:04}/file {i:07}"
    lines.append(json.dumps({"op": "put", "path": path, "type": "file", "mode": 0o644, "uid": 1000, "gid": 1000,
                             "mtime": [1700000000 + i, 0], "size": 8192, "sha256": sha, "chunk": 1048576},
                            separators=(",", ":")))
    ti = tarfile.TarInfo(path); ti.mode = 0o644; ti.uid = ti.gid = 1000; ti.mtime = 1700000000 + i; ti.size = 0
    t.addfile(ti, io.BytesIO(b""))
t.close()
body = ("\n".join(lines) + "\n").encode()
obj = body + ('{"sha256":"%s"}\n' % hashlib.sha256(body).hexdigest()).encode()
put("catalog/snapshot/0000000000000000.00000001", obj)
put("catalog/snapshots/00000001", json.dumps([{"seq": 0, "time": now, "epoch": 1}]).encode())
put("catalog/epoch/00000001", json.dumps({"epoch": 1, "start_seq": 1, "node": "bench:the lost node"}).encode())
PY

# Baseline: tar making the same tree (empty files), twice, median.
BASE=()
for _ in 1 2; do
	rm -rf "$TL_DIR/tar/t" && mkdir -p "$TL_DIR/tar/t" && sync
	t0=$(bench_now); tar -xf "$TL_DIR/tree.tar" -C "$TL_DIR/tar/t" --same-owner --same-permissions; sync; BASE+=("$(bench_since "$t0")")
done

cat >"$TL_DIR/policy.json" <<EOF2
{"tenants": [{"name": "alpha", "subvolume": "$FS/alpha", "mount": "$TL_DIR/views/alpha",
  "backend": "file://$STORE", "catalog": true, "catalog_key": "$TL_CATALOG_KEY"}]}
EOF2
tl_dbus_start || exit 1
tl_tierd_start "$TL_DIR/policy.json" || exit 1
t0=$(bench_now)
"$BUILD/tierctl" tenant import alpha --from "file://$STORE" >"$TL_DIR/import.out" || { cat "$TL_DIR/import.out"; exit 1; }
sync
IMPORT_S=$(bench_since "$t0")
cat "$TL_DIR/import.out"
RSS_KIB=$(awk '/^VmHWM:/ { print $2 }' "/proc/$TL_TIERD_PID/status")
MADE=$(find "$FS/alpha" -type f | wc -l)
[ "$MADE" -eq "$N" ] || { echo "bench import: $MADE files made, not $N"; exit 1; }
# Every 997th file read back through the view: the object's bytes.
for i in $(seq 0 997 $((N - 1))); do
	bench_same "$TL_DIR/views/alpha/d$(printf %04d $((i % 1000)))/file $(printf %07d "$i")" "$SHA"
done
tl_tierd_stop
BENCH_RUNS=1 BENCH_BASELINE_SPREAD=$(bench_spread "${BASE[@]}") \
	bench_row I1 "catalog: tierctl tenant import of $N files (one run)" s "$IMPORT_S" "$(bench_median "${BASE[@]}")" \
	"tar -x of the same tree, empty files" "-" 0 \
	"the issue's target: under 60 s for 100,000 files; tierd's peak RSS $RSS_KIB KiB"
