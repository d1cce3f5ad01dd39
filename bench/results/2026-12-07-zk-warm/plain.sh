#!/bin/bash
# plain.txt: the same benchmark with a 3 s window, six rounds, order alternated; each round the checkout's zklock
# (multi) and then the plain-create experiment (zklock/node.go of ../2026-12-07-zk-create/experiment.patch, applied
# to a copy of the checkout in /tmp/zkexp, run with ZKEXP_PLAIN=1).
root=$(cd "$(dirname "$0")/../../.." && pwd)
rm -rf /tmp/zkexp && mkdir /tmp/zkexp && (cd "$root" && git ls-files -z | xargs -0 cp --parents -t /tmp/zkexp) || exit 1
sed -n '/^diff --git a\/zklock\/node.go/,$p' "$root/bench/results/2026-12-07-zk-create/experiment.patch" | (cd /tmp/zkexp && patch -p1) || exit 1
(cd "$root/zklock" && go test -c -o /tmp/zkbench.test .) && (cd /tmp/zkexp/zklock && go test -c -o /tmp/zkplain.test .) || exit 1
for r in 1 2 3 4 5 6; do
  o=normal; [ $((r % 2)) = 0 ] && o=reverse
  for v in multi plain; do
    echo "== round $r $o $v $(uptime | sed 's/.*load/load/')"
    if [ $v = plain ]; then bin=/tmp/zkplain.test; export ZKEXP_PLAIN=1; else bin=/tmp/zkbench.test; unset ZKEXP_PLAIN; fi
    ZKLOCK_BENCH_ORDER=$o ZKLOCK_BENCH_WINDOW=3s $bin -test.run '^$' -test.bench 'HotKey64' -test.benchtime 1x 2>&1 | grep -E "^Bench|FAIL"
  done
done
