#!/bin/bash
# ZooKeeper hot key: zklock's create as a multi (head) against a plain create (ZKEXP_PLAIN=1), alternating.
cd /tmp/zkexp/zklock
for r in 1 2 3; do
  for v in multi plain; do
    echo "== round $r $v $(uptime | sed 's/.*load/load/')"
    if [ $v = plain ]; then export ZKEXP_PLAIN=1; else unset ZKEXP_PLAIN; fi
    go test -run '^$' -bench 'HotKey64' -benchtime 1x . 2>&1 | grep -E "^Bench|FAIL"
  done
done
