#!/bin/bash
# var: head with the old admitted (zklock/acquire.go of 9ae5dc7), built as /tmp/zk-var.test
cd "$(git rev-parse --show-toplevel)/zklock"
for r in 1 2 3 4 5 6; do
  case $((r % 3)) in 1) o="base head var";; 2) o="head var base";; 0) o="var base head";; esac
  for v in $o; do
    echo "== round $r $v load $(cut -d' ' -f1 /proc/loadavg)"
    /tmp/zk-$v.test -test.run '^$' -test.bench 'BenchmarkHotKey64' -test.benchtime 1x 2>&1 | grep -E "^Benchmark"
  done
done
