package dimmer

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestModelWideQuantumDims: in quanta of 0.5 (the widest Config takes), a
// load that triples from one served at full brightness dims the levels —
// a dead band of two quanta (1.0 here) held full brightness under a 2.4×
// overload, refusing over half the arrivals; it is a quantum now.
// (Found reviewing the probe; not the probe's: q 0.5 gives no probe.)
func TestModelWideQuantumDims(t *testing.T) {
	r := newModelRigWith(t, func(c *Config) { c.Quantum = 0.5 })
	r.periods(5, 300)
	r.periods(30, 100)
	st := r.periods(60, 300)
	assert.Less(t, st.Brightness, 1.0, st.Reason)
}
