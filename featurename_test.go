package brownout_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout"
)

// TestNewRefusesFeatureNamesTheDaemonRefuses: a feature's name is one
// flag key, as brownoutd's check-config requires — "recs.level" would be
// both a feature and recs's level flag, "a/b" reachable over OFREP only
// as a%2Fb — in embedded and fleet mode alike.
func TestNewRefusesFeatureNamesTheDaemonRefuses(t *testing.T) {
	for _, bad := range []string{"recs.level", "a/b", "a b", `a\b`, "a?b", "a#b", "a%2Fb", "brownout.features"} {
		for mode, o := range map[string]brownout.Options{
			"embedded": {Features: []brownout.Feature{{Name: "recs"}, {Name: bad}}},
			"fleet":    {Daemon: "http://127.0.0.1:18090", NoPush: true, Features: []brownout.Feature{{Name: "recs"}, {Name: bad}}},
		} {
			b, err := brownout.New(o)
			if assert.Error(t, err, "%s: %q", mode, bad) {
				assert.Contains(t, err.Error(), "brownout: Features[1].Name: ", mode)
				assert.Contains(t, err.Error(), "a flag key", mode)
			} else {
				b.Close()
			}
		}
	}
	b, err := brownout.New(brownout.Options{Features: []brownout.Feature{{Name: "recs"}, {Name: "levels.v2"}, {Name: "reviews-level"}}})
	assert.NoError(t, err, "a dot, a dash, level not as the suffix")
	b.Close()
}
