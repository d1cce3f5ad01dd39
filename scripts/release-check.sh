#!/usr/bin/env bash
# Proves that a release of the modules in go.work can be installed and used
# the way a user would (docs/ARCHITECTURE.md, "Releasing"):
#
#   scripts/release-check.sh [vX.Y.Z]
#
# The version is the one the modules require of each other (every go.mod
# names the same one; vX.Y.Z, if given, must be it). If the repository has
# the release's tags, the tagged commit is checked; otherwise a scratch clone
# of HEAD gets the tags (v0.1.0 for the core, etcdlock/v0.1.0, ...) — the
# repository itself is never tagged, so this runs on any commit. Uncommitted
# changes are not part of HEAD and are not checked.
#
# From the tags, the go command builds the module zips as the public proxy
# would (GOPROXY=direct, the GitHub URL rewritten to the scratch clone); that
# download cache is a file-based module proxy. Then, with GOWORK=off,
# GOFLAGS=-mod=mod, a module cache of its own and
# GOPROXY=file://<that proxy>,file://<this machine's module cache>,<go env GOPROXY>
# (third-party modules come from the local cache, else the usual proxy, and
# are verified against the checksum database; ours are not in it: GONOSUMDB),
# it proves:
#   - go install github.com/dlockgo/dlock/cmd/dlock@vX.Y.Z (and @latest) works
#     and the installed `dlock --version` prints vX.Y.Z;
#   - a consumer module importing only the core, etcdlock, zklock, dlockprom,
#     dlockotel or fence builds, and prints what it pulls (go list -m all);
#     the core's consumer pulls nothing but go-redis's own graph, and
#     dlockotel's builds no package of the OpenTelemetry SDK (the API only);
#   - dlock built from the checkout (-buildvcs=true) prints the git revision.
# Builds use -trimpath so that the build cache serves later runs whatever the
# temporary module cache's path; it changes nothing else.
set -euo pipefail

root=github.com/dlockgo/dlock
repo=$(cd "$(dirname "$0")/.." && git rev-parse --show-toplevel)
started=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-release-check.XXXXXX")
cleanup() { chmod -R u+w "$work" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

fail() { echo "release-check: FAILED: $*" >&2; exit 1; }
step() { echo "== $* ($(($(date +%s) - started))s)"; }

# quiet LOG CMD...: runs CMD with its output in LOG, shown if CMD fails.
quiet() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { cat "$log" >&2; return 1; }
}

# requires prints "path version" for each requirement of the go.mod file $1.
requires() {
  awk '$1 == "require" && $2 == "(" { block = 1; next }
       $1 == "require" { print $2, $3; next }
       block && $1 == ")" { block = 0; next }
       block && NF >= 2 && $1 !~ /^\/\// { print $1, $2 }' "$1"
}

# replaces prints "path version" for each replace directive of the go.mod or
# go.work file $1 (version "=>" for one that replaces every version).
replaces() {
  awk '$1 == "replace" && $2 == "(" { block = 1; next }
       $1 == "replace" { print $2, $3; next }
       block && $1 == ")" { block = 0; next }
       block && NF >= 3 && $1 !~ /^\/\// { print $1, $2 }' "$1"
}

# check_tree checks the commit checked out in $clone and sets modules (the
# go.work directories), paths (their module paths) and version.
check_tree() {
  cd "$clone"
  modules=($(go work edit -json go.work | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p'))
  [ ${#modules[@]} -gt 0 ] || fail "go.work lists no modules"
  paths=()
  local m want got
  for m in "${modules[@]}"; do
    m=${m#./}
    want=$root/$m
    if [ "$m" = . ]; then want=$root; fi
    got=$(sed -n 's/^module[[:space:]]*//p' "$m/go.mod")
    [ "$got" = "$want" ] || fail "$m/go.mod declares module $got, not $want, the module its tags release"
    paths+=("$want")
  done
  local versions=() f p v
  for f in $(git ls-files 'go.mod' '*/go.mod'); do
    if awk '$1 == "replace" || $1 == "exclude" { found = 1 } END { exit !found }' "$f"; then
      fail "$f has replace or exclude directives: go install pkg@version refuses such a module (the workspace, go.work, replaces for development)"
    fi
    while read -r p v; do
      case "$p" in "$root" | "$root"/*) ;; *) continue ;; esac
      [[ " ${paths[*]} " == *" $p "* ]] || fail "$f requires $p, which is not a module of go.work (not released)"
      versions+=("$v")
    done < <(requires "$f")
  done
  [ ${#versions[@]} -gt 0 ] || fail "no module requires another: nothing says which version the release is"
  version=$(printf '%s\n' "${versions[@]}" | sort -u)
  [ "$(wc -l <<<"$version")" = 1 ] ||
    fail "the modules require each other at several versions ($(echo $version)); one release tags them together: scripts/set-version.sh vX.Y.Z"
  [[ "$version" =~ ^v[01]\.[0-9]+\.[0-9]+$ ]] ||
    fail "the modules require each other at $version: a release is vX.Y.Z with X 0 or 1 (v2 and later need /v2 module paths)"
  for f in $(git ls-files 'go.work' '*/go.work'); do
    while read -r p v; do
      case "$p" in "$root" | "$root"/*) ;; *) continue ;; esac
      [ "$v" = "$version" ] || fail "$f replaces $p at ${v/=>/every version}, not at $version, the version go.mod requires"
    done < <(replaces "$f")
  done
}

clone=$work/repo
git clone -q "$repo" "$clone"
head=$(git -C "$clone" rev-parse HEAD)
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  echo "release-check: $repo has uncommitted changes; checking its HEAD, $head, without them"
fi
check_tree
if [ $# -gt 0 ] && [ "$1" != "$version" ]; then
  fail "asked for $1, but the modules require each other at $version: scripts/set-version.sh $1, then commit"
fi

tag_of() { if [ "$1" = . ]; then echo "$version"; else echo "${1#./}/$version"; fi; }
if tagged=$(git -C "$clone" rev-parse -q --verify "refs/tags/$version^{commit}"); then
  for m in "${modules[@]}"; do
    t=$(tag_of "$m")
    c=$(git -C "$clone" rev-parse -q --verify "refs/tags/$t^{commit}") || fail "$version is tagged but $t is not"
    [ "$c" = "$tagged" ] || fail "$t is on $c, $version on $tagged: one release tags every module on one commit"
  done
  git -C "$clone" checkout -q --detach "$tagged"
  head_version=$version
  check_tree
  [ "$version" = "$head_version" ] || fail "the commit tagged $head_version requires its siblings at $version"
  step "$version: the repository's tags, on $tagged"
else
  tagged=
  for m in "${modules[@]}"; do git -C "$clone" tag "$(tag_of "$m")"; done
  step "$version: not tagged yet; tagged HEAD $head in a scratch clone"
fi
commit=$(git -C "$clone" rev-parse HEAD)

# The file-based proxy: the module zips the go command makes from the tags.
proxy=$work/proxy
specs=()
for p in "${paths[@]}"; do specs+=("$p@$version"); done
(cd "$work" && quiet "$work/proxy.log" env GOWORK=off GOFLAGS=-modcacherw GOMODCACHE="$proxy" GOPROXY=direct \
  GOPRIVATE="$root" GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0="url.$clone.insteadOf" GIT_CONFIG_VALUE_0="https://$root" \
  go mod download "${specs[@]}") || fail "the go command cannot make modules of the tags"
proxy=$proxy/cache/download
step "file proxy: ${#specs[@]} modules in $proxy"

# The user's side: no workspace, our modules only from the file proxy.
third_party="file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)"
user_env=(GOWORK=off GOFLAGS="-mod=mod -modcacherw -trimpath" GOTOOLCHAIN=local GOMODCACHE="$work/modcache"
  GONOSUMDB="$root" GOPRIVATE= GONOPROXY= GOBIN="$work/bin"
  GOPROXY="file://$proxy,$third_party")
user() { env "${user_env[@]}" "$@"; }


(cd "$work" && quiet "$work/install.log" user go install "$root/cmd/dlock@$version") || fail "go install $root/cmd/dlock@$version"
out=$("$work/bin/dlock" --version)
[ "$out" = "dlock version $version" ] || fail "the installed dlock --version printed \"$out\", want \"dlock version $version\""
latest=$(cd "$work" && user go list -m -f '{{.Version}}' "$root/cmd/dlock@latest")
[ "$latest" = "$version" ] || fail "$root/cmd/dlock@latest is $latest, want $version"
step "go install $root/cmd/dlock@$version: \"$out\"; @latest is $latest"

# consumer DIR PKG@VERSION...: a module whose main package imports each PKG,
# built against those versions; its go list -m all goes to DIR/modules.
consumer() {
  local dir=$work/consumer/$1 p
  shift
  mkdir -p "$dir"
  printf 'module example.com/consumer\n\ngo 1.26.0\n' >"$dir/go.mod"
  {
    printf 'package main\n\nimport (\n'
    for p in "$@"; do printf '\t_ "%s"\n' "${p%@*}"; done
    printf ')\n\nfunc main() {}\n'
  } >"$dir/main.go"
  (cd "$dir" && quiet "$dir/get.log" user go get "$@") || fail "go get $* in a consumer module"
  (cd "$dir" && quiet "$dir/build.log" user go build -o /dev/null .) || fail "a consumer of $* does not build"
  (cd "$dir" && user go list -m all) >"$dir/modules" || fail "go list -m all in a consumer of $*"
}

for p in "" etcdlock zklock dlockprom dlockotel fence; do
  pkg=$root${p:+/$p}
  consumer "${p:-core}" "$pkg@$version"
  mods=$work/consumer/${p:-core}/modules
  while read -r path v; do
    case "$path" in "$root" | "$root"/*) [ "$v" = "$version" ] || fail "a consumer of $pkg gets $path $v" ;; esac
  done <"$mods"
  step "a consumer of only $pkg builds; go list -m all: $(($(wc -l <"$mods") - 1)) modules besides itself"
  tail -n +2 "$mods" | sed 's/^/     /'
done

# dlockotel depends on the OpenTelemetry API: its consumer's build has no
# package of the SDK (its go.mod names the SDK for dlockotel's tests only).
deps=$(cd "$work/consumer/dlockotel" && user go list -deps .) || fail "go list -deps in a consumer of $root/dlockotel"
sdk=$(grep '^go.opentelemetry.io/otel/sdk' <<<"$deps" || true)
[ -z "$sdk" ] || fail "a consumer of only $root/dlockotel builds OpenTelemetry SDK packages: $(echo $sdk)"
step "a consumer of only $root/dlockotel builds no OpenTelemetry SDK package"

# The core's go.mod needs go-redis and nothing else: its consumer's graph is
# go-redis's own, plus the core.
redis=$(awk '$1 == "github.com/redis/go-redis/v9" { print $2 }' "$work/consumer/core/modules")
consumer go-redis "github.com/redis/go-redis/v9@$redis"
extra=$(comm -23 <(tail -n +2 "$work/consumer/core/modules" | sort) <(tail -n +2 "$work/consumer/go-redis/modules" | sort))
[ "$extra" = "$root $version" ] ||
  fail "the core pulls more than go-redis $redis does: $(echo $extra)"
step "the core pulls go-redis's graph and nothing else"

# Built from the checkout (the workspace), dlock names its revision. The
# go command records the version it derives from the tags in the module
# cache, so this build too uses the temporary one.
(cd "$clone" && quiet "$work/checkout.log" env GOFLAGS="-buildvcs=true -trimpath -modcacherw" \
  GOMODCACHE="$work/modcache" GOPROXY="$third_party" go build -o "$work/dlock-checkout" ./cmd/dlock) ||
  fail "go build ./cmd/dlock in the checkout"
out=$("$work/dlock-checkout" --version)
[[ "$out" == *" (git $commit)" ]] || fail "dlock built from the checkout printed \"$out\", want its revision $commit"
step "dlock built from the checkout: \"$out\""

echo "release-check: $version is releasable from $commit ($(($(date +%s) - started))s)"
if [ -z "$tagged" ]; then
  tags=()
  for m in "${modules[@]}"; do tags+=("$(tag_of "$m")"); done
  echo "to release it, tag that commit and push the tags at once:"
  echo "  for t in ${tags[*]}; do git tag -a \"\$t\" -m \"\$t\" $commit; done"
  echo "  git push --atomic origin ${tags[*]}"
fi
