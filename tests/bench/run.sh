#!/bin/bash
# make bench: each benchmark prints its ratios against a baseline measured
# in the same run; none passes or fails on speed.
set -u
cd "$(dirname "$0")/../.."
for b in tests/bench/*.sh; do
	[ "$(basename "$b")" = run.sh ] && continue
	echo "== $(basename "$b" .sh)"
	bash "$b" || echo "bench $(basename "$b" .sh): did not complete"
done
