#!/usr/bin/env bash
# The A/B behind this folder: the project's bench built at base (518dde5, the
# commit before the Redis Acquire moved onto seam.Queue) and at head, run as
# whole processes one after the other, 10 pairs: pairs 1-5 base first, 6-10
# head first (the second process of a pair ran faster on this machine,
# whichever it was). Each run: "dlock Mutex" only, one round, 2 s per scenario.
# Then the micro-benchmark of the acquire path with and without a deadline,
# both sides built as test binaries, five rounds alternating.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
base=${BASE:-518dde5}
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/base" 2>/dev/null || true; rm -rf "$tmp"' EXIT
git -C "$root" worktree add -q "$tmp/base" "$base"
(cd "$tmp/base/bench" && go build -o "$tmp/bench-base" .)
(cd "$root/bench" && go build -o "$tmp/bench-head" .)
scen=uncontended,fresh-names,orders-shared,many-names-shared,hot-shared,hot-clients
for r in $(seq 1 10); do
  order="base head"
  [ "$r" -gt 5 ] && order="head base"
  for v in $order; do
    "$tmp/bench-$v" --libs "dlock Mutex" --scenarios "$scen" --rounds 1 --duration 2s --quiet \
      --json-file "$here/$v-$r.json" > /dev/null
  done
done
(cd "$tmp/base" && go test -c -o "$tmp/base.test" .)
(cd "$root" && go test -c -o "$tmp/head.test" .)
for r in 1 2 3 4 5; do
  for v in base head; do
    echo "== $v round $r"
    "$tmp/$v.test" -test.run '^$' -test.bench 'AcquireDeadline/defaults/(mutex|lock|fair|semaphore)$' -test.benchmem |
      grep -E '^Benchmark' | awk '{print $1, "acqDL", $5, "acqNone", $7, "cost", $9, "rel", $11, $15, "B/op", $17, "allocs"}'
  done
done > "$here/micro-acquire-deadline.txt"
