#!/bin/bash
# ZooKeeper hot key: what the listing a waiter makes when the node it watches is deleted costs. One test binary
# built with experiment.patch applied; ZKEXP_DIRECT=1 grants on that deletion without the listing (UNSAFE: see
# README), unset it is the head's code. Three rounds, each the head then the experiment, the order of zklock and
# zk.Lock alternated per round; each run is one process with a fresh ZooKeeper server.
set -e
cd "$(dirname "$0")/../../.."
patch=bench/results/2026-12-07-zk-list/experiment.patch
git apply "$patch"
trap 'git apply -R "$patch"' EXIT # the checkout is the head again, whether the build worked or not
(cd zklock && go test -c -o /tmp/zkexp.test .)
git apply -R "$patch"
trap - EXIT
for r in 1 2 3; do
  for e in "" 1; do
    o=normal; [ $((r % 2)) = 0 ] && o=reverse
    echo "== r$r exp=$e $o"
    (cd zklock && ZKEXP_DIRECT=$e ZKLOCK_BENCH_ORDER=$o /tmp/zkexp.test -test.run '^$' -test.bench 'HotKey64' -test.benchtime 1x 2>&1 | grep -E "^Bench|FAIL")
  done
done
