package provider_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/provider"
)

// TestCheckFeatureName: brownoutd's rule for a feature's name — one flag
// key — and NewRemote applies it to Features.
func TestCheckFeatureName(t *testing.T) {
	for _, ok := range []string{"recommendations", "recs.v2", "reviews-level", "levels", "brownout.feature", "ünïcode"} {
		assert.NoError(t, provider.CheckFeatureName(ok), ok)
	}
	for _, bad := range []string{"", "recs.level", ".level", "a/b", "a b", "a\tb", `a\b`, "a?b", "a#b", "a%2Fb", "brownout.features"} {
		assert.Error(t, provider.CheckFeatureName(bad), "%q", bad)
	}
	assert.EqualError(t, provider.CheckFeatureName("recs.level"),
		`"recs.level": a flag key (no spaces, /, ?, #, %; not ending in .level; not brownout.features)`, "check-config's words")
	_, err := provider.NewRemote(provider.RemoteOptions{URL: "http://127.0.0.1:18090", Features: []string{"recs", "a/b"}})
	assert.ErrorContains(t, err, `provider: remote: Features: "a/b": a flag key`)
}
