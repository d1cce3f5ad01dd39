#!/usr/bin/env bash
# The project's test command (README "Two commands"; .ci/run calls it): it
# installs what a fresh Debian machine lacks for the tests, then vets and
# tests every module of the workspace with -race, and the bench module.
# Tests start their own redis-server, Sentinel, Cluster, PostgreSQL, etcd
# and ZooKeeper processes on free loopback ports and stop them by PID.
#
# Every module runs, whatever the others did; at the end one line per
# module says passed or FAILED and how long it took, then, if any failed,
# the failing tests' own lines (each "--- FAIL" with the output under it, a
# panic, a build error), so that a failure reads from the last lines of a
# CI log; the script exits non-zero if any module failed.
# DLOCK_TEST_MODULES="./etcdlock ./zklock" runs only those modules (paths
# as in go.work, plus "bench").
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
failures=()
failed=0
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
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
  log="$logs/$(echo "$m" | tr -c 'a-zA-Z0-9\n' _).log"
  if (cd "$m" && go vet ./... && go test $race -timeout "$timeout" ./...) 2>&1 | tee "$log"; then # pipefail: the tests' status
    status=passed
  else
    status=FAILED
    failed=1
    failures+=("$m")
  fi
  summary+=("$(printf '%-20s %-8s %5ss' "$m" "$status" "$(($(date +%s) - start))")")
done

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
if [ "$failed" != 0 ]; then
  # The failing tests' lines: a "--- FAIL" line and the indented output
  # under it, a panic and the 40 lines after it, a vet or build error, and
  # the package's FAIL line.
  for m in "${failures[@]}"; do
    log="$logs/$(echo "$m" | tr -c 'a-zA-Z0-9\n' _).log"
    echo
    echo "== failures in $m"
    awk '
      /^[ \t]*--- FAIL/ { block = 1; print; next }
      block && /^[ \t]/ { print; next }
      { block = 0 }
      /^panic: / { panic = 40 }
      panic > 0 { print; panic--; next }
      /^# / || /^vet: / || /\.go:[0-9]+:[0-9]+: / || /^FAIL/ { print }
    ' "$log"
  done
  echo
  echo "some modules FAILED" >&2
  exit 1
fi
echo "every module passed"
