package main

import "runtime/debug"

// version is the command's version when the build sets it:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/dlock
//
// Otherwise commandVersion reads it from the build info.
var version = ""

// commandVersion returns what dlock --version prints after "dlock version".
func commandVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(version, bi)
}

// versionOf returns the version to print: set, if the build set one;
// otherwise the module version the go command recorded in bi — "v0.1.0" for
// `go install github.com/dlockgo/dlock/cmd/dlock@v0.1.0` — or "devel" if it
// recorded none. A binary built from a checkout (with VCS stamping, the go
// command's default outside a workspace; `go build -buildvcs=true` inside one)
// carries the commit it was built from: the go command derives a version from
// the repository's tags (a pseudo-version between releases, "+dirty" with
// uncommitted changes), and versionOf adds the revision, e.g.
// "v0.0.0-20261201222053-5336880429ed (git 5336880429ed7a6fcb6a3819262cf601b436f286, modified)".
func versionOf(set string, bi *debug.BuildInfo) string {
	if set != "" {
		return set
	}
	if bi == nil {
		return "devel"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var vcs, rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs":
			vcs = s.Value
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return v
	}
	if vcs == "" {
		vcs = "vcs"
	}
	v += " (" + vcs + " " + rev
	if modified == "true" {
		v += ", modified"
	}
	return v + ")"
}
