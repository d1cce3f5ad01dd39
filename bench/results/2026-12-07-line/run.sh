#!/bin/bash
# A/B of the etcd and ZooKeeper acquire paths: base (c993171) vs head, alternating.
for r in 1 2 3; do
  for side in base head; do
    dir=/tmp/base; [ $side = head ] && dir=/work/main
    for m in zklock etcdlock; do
      echo "== round $r $side $m $(uptime | sed 's/.*load/load/')"
      (cd $dir/$m && go test -run '^$' -bench 'HotKey64|Uncontended|AcquireDeadline/(mutex|multi)' -benchtime 2s . 2>&1 | grep -E "^Bench|FAIL")
    done
  done
done
