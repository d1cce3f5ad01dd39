#!/usr/bin/env bash
# The project's test command (README "Two commands"; .ci/run calls it): it
# installs what a fresh Debian machine lacks for the tests, then vets and
# tests every module of the workspace with -race, and the bench module.
# Tests start their own redis-server, Sentinel, Cluster, PostgreSQL, etcd
# and ZooKeeper processes on free loopback ports and stop them by PID.
#
# Every module runs, whatever the others did; at the end one line per
# module says passed or FAILED and how long it took, and the script exits
# non-zero if any module failed. DLOCK_TEST_MODULES="./etcdlock ./zklock"
# runs only those modules (paths as in go.work, plus "bench").
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/install.sh || { echo "scripts/install.sh failed" >&2; exit 1; }

# Every module in go.work, core first. The bench module (peer libraries) is
# outside the root workspace on purpose (bench/go.work makes it a workspace
# of its own): it is tested last, without -race (its scenarios measure).
modules="$(go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p') bench"
if [ -n "${DLOCK_TEST_MODULES:-}" ]; then
  modules=$DLOCK_TEST_MODULES
fi

summary=()
failed=0
for m in $modules; do
  if [ -z "$(cd "$m" && go list ./... 2>/dev/null)" ]; then
    summary+=("$(printf '%-20s %-8s %6s' "$m" "no pkgs" "-")")
    continue
  fi
  echo "== $m"
  start=$(date +%s)
  race=-race
  timeout=30m
  if [ "$m" = bench ]; then
    race=
    timeout=10m
  fi
  if (cd "$m" && go vet ./... && go test $race -timeout "$timeout" ./...); then
    status=passed
  else
    status=FAILED
    failed=1
  fi
  summary+=("$(printf '%-20s %-8s %5ss' "$m" "$status" "$(($(date +%s) - start))")")
done

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
if [ "$failed" != 0 ]; then
  echo "some modules FAILED" >&2
  exit 1
fi
echo "every module passed"
