#!/usr/bin/env bash
# Builds a module of yours against this checkout of dlock, before v0.1.0 is
# published (README, "Use it"):
#
#   scripts/use-local.sh DIR
#
# DIR is your module's directory (it has a go.mod). The script writes
# DIR/go.work, or adds to the one there: your module, every module of this
# checkout's go.work (the core, fence, etcdlock, zklock, dlockprom, ...), and
# this checkout's replace lines. The modules require each other at the
# release version, which no proxy has yet; those lines give the go command
# the checkout's go.mod instead. It also merges the checkout's go.work.sum
# into DIR's. Then `go build` in DIR imports any package of dlock from this
# checkout, with nothing about dlock in your go.mod. It changes nothing in
# this checkout, and running it again changes nothing in DIR.
#
# go.work is for development: keep it out of version control (GOWORK=off
# builds without it). Once v0.1.0 is published, delete DIR/go.work and run
# `go get github.com/dlockgo/dlock@v0.1.0` (and the same for each module you
# import: github.com/dlockgo/dlock/fence@v0.1.0, ...).
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: scripts/use-local.sh DIR   (DIR: your module's directory, with its go.mod)" >&2
  exit 2
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$(cd "$1" && pwd)
if [ ! -f "$dir/go.mod" ]; then
  echo "use-local: $dir has no go.mod: run it on your module's directory" >&2
  exit 2
fi

cd "$dir"
export GOWORK="$dir/go.work"
[ -f go.work ] || go work init .
go work use .
# The checkout's modules and replace lines, as its go.work lists them.
for m in $(go work edit -json "$repo/go.work" | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p'); do
  go work use "$repo/${m#./}"
done
awk '$1 == "replace" && $2 == "(" { block = 1; next }
     $1 == "replace" { print $2, $3, $5; next }
     block && $1 == ")" { block = 0; next }
     block && NF >= 4 && $1 !~ /^\/\// { print $1, $2, $4 }' "$repo/go.work" |
  while read -r path version target; do
    target=${target#./}
    target=${target%/}
    go work edit -replace "$path@$version=$repo${target:+/$target}"
  done
if [ -f "$repo/go.work.sum" ]; then
  touch go.work.sum
  sort -u go.work.sum "$repo/go.work.sum" -o go.work.sum
fi
echo "use-local: $dir/go.work builds against $repo"
