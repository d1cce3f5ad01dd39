package main

import "runtime/debug"

// version is the command's version. Release builds set it with
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/dlock
//
// Otherwise it is the module version go install recorded, or "devel".
var version = ""

// commandVersion returns what dlock --version prints after "dlock version".
func commandVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "devel"
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}
