package brownout

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVersionOf(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	assert.Equal(t, "v0.3.0 commit 0123456789ab (modified) go1.26.8", versionOf(bi))
	assert.Equal(t, "(devel) go1.26.8", versionOf(&debug.BuildInfo{GoVersion: "go1.26.8"}))
	assert.NotEmpty(t, Version())
}
