#!/usr/bin/env bash
# Sets the version the modules require of each other — the version the next
# release tags on every module of go.work (docs/ARCHITECTURE.md, "Releasing"):
#
#   scripts/set-version.sh vX.Y.Z
#
# In every go.mod of the repository, each requirement on one of our modules
# becomes vX.Y.Z; in every go.work, so do the replace lines that give the
# workspace those modules' go.mod at the required version. It commits and
# tags nothing; scripts/release-check.sh then checks the result.
set -euo pipefail
cd "$(dirname "$0")/.."
root=github.com/dlockgo/dlock

if [ $# != 1 ] || ! [[ "$1" =~ ^v[01]\.[0-9]+\.[0-9]+$ ]]; then
  echo "usage: scripts/set-version.sh vX.Y.Z (X 0 or 1: v2 and later need /v2 module paths)" >&2
  exit 2
fi
v=$1

for f in $(git ls-files 'go.mod' '*/go.mod'); do
  awk '$1 == "require" && $2 == "(" { block = 1; next }
       $1 == "require" { print $2; next }
       block && $1 == ")" { block = 0; next }
       block && NF >= 2 && $1 !~ /^\/\// { print $1 }' "$f" |
    while read -r p; do
      case "$p" in "$root" | "$root"/*) go mod edit -require="$p@$v" "$f" ;; esac
    done
done
for f in $(git ls-files 'go.work' '*/go.work'); do
  # The replace lines "github.com/dlockgo/dlock[/m] vA.B.C => dir", in a block
  # or not; sed keeps the file's layout and comments (go work edit would not).
  sed -E -i "s#^([[:space:]]*(replace[[:space:]]+)?$root(/[^[:space:]]+)?[[:space:]]+)v[^[:space:]]+([[:space:]]+=>)#\\1$v\\4#" "$f"
done
echo "the modules now require each other at $v:"
git diff --stat -- '*go.mod' '*go.work'
