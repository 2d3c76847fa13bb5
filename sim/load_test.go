package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPeriodicLoads(t *testing.T) {
	sine := Sine{Mean: 100, Amplitude: 0.5, Period: 30 * time.Second}
	square := Square{Mean: 100, Amplitude: 0.5, Period: 30 * time.Second}
	for _, tc := range []struct {
		name string
		p    Profile
		at   time.Duration
		want float64
	}{
		{"sine start", sine, 0, 100},
		{"sine quarter", sine, 7500 * time.Millisecond, 150},
		{"sine half", sine, 15 * time.Second, 100},
		{"sine three quarters", sine, 22500 * time.Millisecond, 50},
		{"sine next period", sine, 37500 * time.Millisecond, 150},
		{"square start", square, 0, 150},
		{"square just before half", square, 15*time.Second - 1, 150},
		{"square half", square, 15 * time.Second, 50},
		{"square just before period", square, 30*time.Second - 1, 50},
		{"square next period", square, 30 * time.Second, 150},
		{"flat sine", Sine{Mean: 80, Period: time.Second}, 300 * time.Millisecond, 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, tc.p.Rate(tc.at), 1e-9)
		})
	}
}

// TestPeriodicLoadsMean: over whole periods both average their Mean.
func TestPeriodicLoadsMean(t *testing.T) {
	for _, p := range []Profile{Sine{Mean: 100, Amplitude: 0.5, Period: 30 * time.Second}, Square{Mean: 100, Amplitude: 0.3, Period: 10 * time.Second}} {
		var sum float64
		const n = 6000
		for i := range n {
			sum += p.Rate(time.Duration(i) * 60 * time.Second / n)
		}
		assert.InDelta(t, 100, sum/n, 1e-6, "%T", p)
	}
}
