package signals

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDefaultBuildNeedsNoLinkname: a build without tags must not reach
// into the runtime by go:linkname, so that a Go upgrade cannot break it
// (see shard.go). It checks the files the default build compiles, whatever
// tags this test binary was built with.
func TestDefaultBuildNeedsNoLinkname(t *testing.T) {
	pkg, err := build.Default.ImportDir(".", 0)
	require.NoError(t, err)
	assert.Empty(t, pkg.SFiles, "assembly files in the default build")
	for _, name := range pkg.GoFiles {
		b, err := os.ReadFile(filepath.Join(pkg.Dir, name))
		require.NoError(t, err)
		assert.False(t, strings.Contains(string(b), "//go:linkname"), "%s has a go:linkname directive", name)
	}
	assert.Contains(t, strings.Join(pkg.IgnoredGoFiles, " "), "shard_procpin.go", "the pinned variant is still there, behind its tag")
}

// TestShardHintIsSmall: every build's hint indexes a shard after masking,
// from any goroutine.
func TestShardHintIsSmall(t *testing.T) {
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				if h := shardHint(); h < 0 {
					t.Errorf("shardHint() = %d, want ≥ 0", h)
				}
			}
		})
	}
	wg.Wait()
}
