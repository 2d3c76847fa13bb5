package lab

import (
	"testing"

	"github.com/brownout/brownout/sim"
	"github.com/stretchr/testify/assert"
)

func TestDirectionChangesCountReversalsOfTwoQuanta(t *testing.T) {
	secs := func(levels ...float64) []sim.Second {
		out := make([]sim.Second, len(levels))
		for i, l := range levels {
			out[i] = sim.Second{T: i, Level: l}
		}
		return out
	}
	assert.Equal(t, 0, DirectionChanges(secs(1, 0.5, 0, 0, 0.01, 0)), "a quantum back and forth is not a change")
	assert.Equal(t, 1, DirectionChanges(secs(1, 0.5, 0, 0.02)))
	assert.Equal(t, 2, DirectionChanges(secs(0.5, 0.6, 0.7, 0.68, 0.7, 0.72)))
	assert.Equal(t, 0, DirectionChanges(secs(0.5, 0.51, 0.5, 0.51, 0.5)))
	assert.Equal(t, 0, DirectionChanges(nil))
}

func TestSwingIsTheWidestRangeOfAFeature(t *testing.T) {
	assert.InDelta(t, 0.3, Swing([][]float64{{1, 0.5}, {0.9, 0.2}, {1, 0.4}}), 1e-12, "the second feature's 0.2–0.5")
	assert.Zero(t, Swing([][]float64{{0.4}, {0.4}}))
	assert.Zero(t, Swing(nil))
}
