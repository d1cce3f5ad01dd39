#!/usr/bin/env bash
# The project's test command (README "Two commands"; .ci/run calls it): it
# installs what a fresh Debian machine lacks for the tests, then vets and
# tests every module of the workspace with -race, and the bench module.
# Tests start their own redis-server, Sentinel, Cluster, PostgreSQL, etcd
# and ZooKeeper processes on free loopback ports and stop them by PID.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install.sh

# Every module in go.work, core first. The bench module (peer libraries) is
# outside the root workspace on purpose (bench/go.work makes it a workspace
# of its own): it is tested on its own below.
modules=$(go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p')
for m in $modules; do
  if [ -z "$(cd "$m" && go list ./... 2>/dev/null)" ]; then
    echo "== $m: no packages"
    continue
  fi
  echo "== $m"
  (cd "$m" && go vet ./... && go test -race -timeout 30m ./...)
done
echo "== bench"
(cd bench && go vet ./... && go test -timeout 10m ./...)
