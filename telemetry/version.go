package telemetry

import (
	"runtime/debug"
	"sync"
)

// Version returns connactor's module version as the running binary records
// it (runtime/debug.ReadBuildInfo): the version required by the main module
// when connactor is a dependency (the replacement's, when replaced by another
// version), the main module's own version when connactor is the main module
// (a tag, or a pseudo-version stamped from version control). It returns ""
// when the version is not known: a build from a source tree without version
// control information ("(devel)"), a replacement by a local directory, or a
// binary without build information. It is the version of the instrumentation
// scope of connactor's tracer and meter. The first call reads the build
// information; later calls cost nothing. Safe for concurrent use.
func Version() string { return version() }

var version = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return moduleVersion(bi)
})

// modulePath is connactor's module path (also its instrumentation scope name).
const modulePath = "github.com/connactor/connactor"

// moduleVersion returns connactor's version recorded in bi (see Version).
func moduleVersion(bi *debug.BuildInfo) string {
	v := ""
	if bi.Main.Path == modulePath {
		v = bi.Main.Version
	} else {
		for _, d := range bi.Deps {
			if d.Path != modulePath {
				continue
			}
			v = d.Version
			if d.Replace != nil {
				v = d.Replace.Version // "" for a directory
			}
			break
		}
	}
	if v == "(devel)" {
		return ""
	}
	return v
}
