package telemetry

import (
	"runtime/debug"
	"testing"
)

func TestModuleVersionIsConnactorsFromTheBuildInformation(t *testing.T) {
	dep := func(path, version string, replace *debug.Module) *debug.Module {
		return &debug.Module{Path: path, Version: version, Replace: replace}
	}
	for _, c := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"a dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps: []*debug.Module{dep("example.com/other", "v0.1.0", nil), dep(modulePath, "v1.4.0", nil)}}, "v1.4.0"},
		{"replaced by another version", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{dep(modulePath, "v1.4.0", dep("example.com/fork", "v1.4.1-fork", nil))}}, "v1.4.1-fork"},
		{"replaced by a directory", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{dep(modulePath, "v1.4.0", dep("../connactor", "", nil))}}, ""},
		{"the main module, tagged", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.5.0"}}, "v1.5.0"},
		{"the main module, stamped from version control", debug.BuildInfo{Main: debug.Module{Path: modulePath,
			Version: "v1.5.1-0.20261123120000-abcdefabcdef+dirty"}}, "v1.5.1-0.20261123120000-abcdefabcdef+dirty"},
		{"a source tree without version control", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, ""},
		{"not in the binary", debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "v0.1.0"}}, ""},
	} {
		if got := moduleVersion(&c.bi); got != c.want {
			t.Errorf("%s: moduleVersion = %q, want %q", c.name, got, c.want)
		}
	}
	if v := Version(); v == "(devel)" {
		t.Errorf("Version() = %q", v)
	}
}
