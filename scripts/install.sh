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
# ZooKeeper 3.8 for the zklock tests: Debian's jars and a JRE (internal/zkproc).
if [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v java >/dev/null 2>&1; then
  missing+=(zookeeper)
fi
# Chromium for the browser tests of `dlock top` (cmd/dlock, chromedp).
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
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

# etcd for the etcdlock tests (internal/etcdproc): the server at the client's
# version (v3.7.3), built once from its module into the user cache.
etcd_bin="${XDG_CACHE_HOME:-$HOME/.cache}/dlock/etcd-v3.7.3/etcd"
if [ -z "${DLOCK_ETCD:-}" ] && ! command -v etcd >/dev/null 2>&1 && [ ! -x "$etcd_bin" ]; then
  echo "building etcd v3.7.3 into $etcd_bin"
  (cd internal/etcdserver && GOWORK=off go build -o "$etcd_bin" .)
fi

for m in $(go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p'); do
  (cd "$m" && go mod download)
done
# bench: its own workspace (bench/go.work), whose go mod download would fetch every
# module of the graph; loading its packages fetches only what they and their tests need.
(cd bench && go list -deps -test ./... >/dev/null)
