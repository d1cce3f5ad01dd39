#!/bin/bash
# A/B of zklock's BenchmarkHotKey64, one process per round and binary:
#   (cd <checkout of 9ae5dc7>/zklock && go test -c -o /tmp/zk-base.test .)
#   (cd zklock && go test -c -o /tmp/zk-head.test .)
#   ROUNDS="1 2 3" ORDER="base head" ./run.sh      (hotkey.txt: also ORDER="head base", ZKLOCK_BENCH_ORDER=reverse)
cd "$(git rev-parse --show-toplevel)/zklock"
for r in ${ROUNDS:-1 2 3}; do
  for v in ${ORDER:-base head}; do
    echo "== round $r $v load $(cut -d' ' -f1 /proc/loadavg)"
    /tmp/zk-$v.test -test.run '^$' -test.bench 'BenchmarkHotKey64' -test.benchtime 1x 2>&1 | grep -E "^Benchmark"
  done
done
