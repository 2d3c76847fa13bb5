package dimmer

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A measured rise of the load dims at once, in the period it shows: the
// feedforward moves the levels for it before the pressure rises.
func TestLoadRiseDims(t *testing.T) {
	r := newRig(t, refusalsConfig())
	r.window = 5 * time.Second
	r.steps(2, 2, -1)
	r.steps(20, 0.8, -1) // in the band: the levels hold for a load of 100
	b := r.c.State().Brightness
	r.load = 125
	st := r.step(1.2, -1)
	assert.Less(t, st.Brightness, b, "25 %% more load: a fast step")
}

// The load fell but latency is still over target: the law dims further
// (K is corrected down), it does not hold for good.
func TestFallenButStillOverDims(t *testing.T) {
	r := newRig(t, refusalsConfig())
	r.window = 5 * time.Second
	r.steps(2, 2, -1)
	b := r.c.State().Brightness
	require.Less(t, b, 1.0)
	r.load = 70
	st := r.steps(60, 1.3, -1)
	assert.Less(t, st.Brightness, b, "over target at a lower load: dims")
}

// With the cascade off (MaxShed < 0) the brightness is never −0.
func TestNoNegativeZero(t *testing.T) {
	cfg := refusalsConfig()
	cfg.MaxShed = -1
	r := newRig(t, cfg)
	r.window = 5 * time.Second
	st := r.steps(10, 3, -1)
	assert.False(t, math.Signbit(st.Brightness), "brightness %v", st.Brightness)
}
