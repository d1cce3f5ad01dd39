#!/usr/bin/env bash
# Installs what the tests need and a fresh Debian machine lacks: Debian
# packages for the servers (redis-server with Sentinel, PostgreSQL,
# promtool) and the Go modules of every module. Safe to run again: it
# installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server redis-sentinel redis-tools)
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
# promtool validates deploy/prometheus (dlockprom's TestAlertRules, TestDashboard).
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing: ${missing[*]} — install them with: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

go mod download
for m in $(go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p'); do
  (cd "$m" && go mod download)
done
(cd bench && go mod download)
