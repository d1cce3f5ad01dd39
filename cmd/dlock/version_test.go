package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	const rev = "5336880429ed7a6fcb6a3819262cf601b436f286"
	checkout := func(version, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{
			Main: debug.Module{Path: "github.com/dlockgo/dlock/cmd/dlock", Version: version},
			Settings: []debug.BuildSetting{
				{Key: "-buildmode", Value: "exe"},
				{Key: "vcs", Value: "git"},
				{Key: "vcs.revision", Value: rev},
				{Key: "vcs.time", Value: "2026-12-01T22:20:53Z"},
				{Key: "vcs.modified", Value: modified},
			},
		}
	}
	for _, c := range []struct {
		name string
		set  string
		bi   *debug.BuildInfo
		want string
	}{
		{"go install @version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}, "v0.1.0"},
		{"no build info", "", nil, "devel"},
		{"checkout without VCS stamping", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"checkout at a tag", "", checkout("v0.1.0", "false"), "v0.1.0 (git " + rev + ")"},
		{"checkout between tags", "", checkout("v0.1.1-0.20261201222053-5336880429ed", "false"),
			"v0.1.1-0.20261201222053-5336880429ed (git " + rev + ")"},
		{"modified checkout", "", checkout("v0.1.1-0.20261201222053-5336880429ed+dirty", "true"),
			"v0.1.1-0.20261201222053-5336880429ed+dirty (git " + rev + ", modified)"},
		{"revision but no version", "", checkout("(devel)", "false"), "devel (git " + rev + ")"},
		{"set by -ldflags", "v9.8.7", checkout("v0.1.0", "true"), "v9.8.7"},
	} {
		if got := versionOf(c.set, c.bi); got != c.want {
			t.Errorf("%s: versionOf = %q, want %q", c.name, got, c.want)
		}
	}
}
