package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHistoryKeepsWhatItWasGiven: the compact ring gives back each point
// as it was added (absent numbers and readings included), the newest n,
// and a full ring adds without allocating.
func TestHistoryKeepsWhatItWasGiven(t *testing.T) {
	const n = 10
	h := newHistory(n)
	t0 := time.Unix(1_700_000_000, 0)
	pt := func(i int) Point {
		f := float64(i)
		p := Point{Time: t0.Add(time.Duration(i) * time.Second), Readings: map[string]float64{"latency.p99": f / 100},
			Levels: map[string]float64{"recommendations": f / 30, "reviews": 1}, Shed: f / 50, Mode: "auto", Generation: uint64(i),
			Goodput: &f}
		if i%3 == 0 { // a reading and a number absent now and then
			p.Readings["reject.ratio"] = 0.01
			p.Pressure = &f
		}
		return p
	}
	var want []Point
	for i := range 2*n + 3 {
		p := pt(i)
		h.add(p, time.Millisecond)
		want = append(want, p)
	}
	got := h.since(time.Time{})
	require.Len(t, got, n)
	assert.Equal(t, want[len(want)-n:], got)
	assert.Equal(t, want[len(want)-2:], h.since(want[len(want)-3].Time))

	p := pt(3)
	allocs := testing.AllocsPerRun(100, func() { h.add(p, time.Millisecond) })
	assert.Zero(t, allocs, "a full ring's add")
}
