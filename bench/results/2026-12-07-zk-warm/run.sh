#!/bin/bash
# ZooKeeper hot key, zklock against zk.Lock, with the warm-up BenchmarkHotKey64 now has; six rounds, the order of
# the two libraries alternated (each round is one process: a fresh ZooKeeper server).
cd "$(dirname "$0")/../../../zklock" && go test -c -o /tmp/zkbench.test . || exit 1
for r in 1 2 3 4 5 6; do
  o=normal; [ $((r % 2)) = 0 ] && o=reverse
  echo "== round $r $o $(uptime | sed 's/.*load/load/')"
  ZKLOCK_BENCH_ORDER=$o /tmp/zkbench.test -test.run '^$' -test.bench 'HotKey64' -test.benchtime 1x 2>&1 | grep -E "^Bench|FAIL"
done
