package brownout_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout"
	"github.com/brownout/brownout/dimmer"
)

// TestProbe: Options.Probe is the controller's (dimmer.Config.Probe) —
// the default, a share, off — and refused in fleet mode, where the
// daemon's law probes.
func TestProbe(t *testing.T) {
	for probe, want := range map[float64]float64{0: dimmer.DefaultProbe, 0.02: 0.02, -1: 0} {
		b, err := brownout.New(brownout.Options{Features: features(), Probe: probe})
		require.NoError(t, err, probe)
		assert.Equal(t, want, b.Controller().Config().Probe, probe)
		b.Close()
	}
	_, err := brownout.New(brownout.Options{Features: features(), Probe: 0.5})
	assert.ErrorContains(t, err, "probe 0.5")
	_, err = brownout.New(brownout.Options{Daemon: "http://127.0.0.1:18090", NoPush: true, Probe: 0.02})
	assert.EqualError(t, err, "brownout: Probe in fleet mode: the daemon's law sets the levels; set its law.probe")
}
