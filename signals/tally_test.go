package signals

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMoments(t *testing.T) {
	var m Moments
	assert.True(t, math.IsNaN(m.Mean()))
	assert.True(t, math.IsNaN(m.Var()))
	for _, x := range []float64{1, 2, 3, 4} {
		m.Add(x)
	}
	assert.Equal(t, 2.5, m.Mean())
	assert.InDelta(t, 5.0/3, m.Var(), 1e-12)
	var a, b Moments
	a.Add(1)
	a.Add(2)
	b.Add(3)
	b.Add(4)
	a.Merge(b)
	assert.Equal(t, m, a)
	tl := Tally{Feature: "x", On: a, Unattributed: 1}
	tl.Merge(Tally{Feature: "x", Off: b, Unattributed: 2})
	assert.Equal(t, int64(2), tl.Off.N)
	assert.Equal(t, int64(3), tl.Unattributed)
}
