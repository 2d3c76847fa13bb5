package brownout

import (
	"runtime/debug"
	"strings"
)

// Version describes the build: the module's version ("(devel)" when
// built from a checkout), the commit and whether the tree had changes,
// and the Go version, as the Go toolchain recorded them.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	var b strings.Builder
	b.WriteString(v)
	if rev != "" {
		b.WriteString(" commit ")
		b.WriteString(rev[:min(len(rev), 12)])
		if modified == "true" {
			b.WriteString(" (modified)")
		}
	}
	b.WriteString(" ")
	b.WriteString(bi.GoVersion)
	return b.String()
}
