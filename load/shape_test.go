package load

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shaped is one phase of each shape, with periods that do not divide the
// phase (a part period at the end).
var shaped = []Phase{
	{Name: "const", Rate: 120, Duration: 7 * time.Second},
	{Name: "sine", Rate: 400, Amplitude: 200, Period: 3 * time.Second, Duration: 7 * time.Second, Shape: Sine},
	{Name: "square", Rate: 333, Amplitude: 200, Period: 2 * time.Second, Duration: 7 * time.Second, Shape: Square},
	{Name: "ramp up", Rate: 350, Amplitude: 250, Duration: 7 * time.Second, Shape: Ramp},
	{Name: "ramp down", Rate: 350, Amplitude: -250, Duration: 7 * time.Second, Shape: Ramp},
}

// Each shape offers, by any moment, its rate's integral up to it: sent's
// closed forms against a sum over a thousand steps a second.
func TestShapesOfferTheirRatesIntegral(t *testing.T) {
	for _, p := range shaped {
		const step = time.Millisecond
		sum := 0.0
		for at := time.Duration(0); at < p.Duration; at += step {
			if at%(500*time.Millisecond) == 0 {
				assert.InDelta(t, sum, p.sent(at), 0.5, "%s at %v", p.Name, at)
			}
			sum += p.rateAt(at+step/2) * step.Seconds()
		}
		assert.InDelta(t, sum, p.sent(p.Duration), 0.5, p.Name)
	}
	// Whole periods offer the mean; a ramp offers the mean of its ends.
	sine := shaped[1]
	assert.InDelta(t, 400*6.0, sine.sent(6*time.Second), 1e-9)
	assert.InDelta(t, 600, sine.rateAt(750*time.Millisecond), 1e-9, "the peak a quarter period in")
	square := shaped[2]
	assert.Equal(t, 533.0, square.rateAt(999*time.Millisecond))
	assert.Equal(t, 133.0, square.rateAt(time.Second))
	assert.InDelta(t, 333*6.0, square.sent(6*time.Second), 1e-9)
	up, down := shaped[3], shaped[4]
	assert.Equal(t, 100.0, up.rateAt(0))
	assert.InDelta(t, 600.0, up.rateAt(up.Duration), 1e-9)
	assert.Equal(t, 600.0, down.rateAt(0))
	assert.InDelta(t, 350*7.0, down.sent(down.Duration), 1e-9)
}

// The pacer sends request n when the phases have offered n: at inverts due
// across shaped phases, and never goes back.
func TestPhasesAtFollowsTheShapes(t *testing.T) {
	ps := phases(shaped)
	total := ps.due(ps.total())
	var last time.Duration
	for n := uint64(1); float64(n) <= total; n += 37 {
		at := ps.at(n)
		require.GreaterOrEqual(t, at, last, "request %d", n)
		last = at
		assert.InDelta(t, float64(n), ps.due(at), 0.01, "request %d at %v", n, at)
	}
	assert.Equal(t, ps.total(), ps.at(uint64(total)+1), "after the last: the end")
	// The pacer's rate is the phase's at that moment.
	assert.InDelta(t, 600, ps.Rate(7*time.Second+750*time.Millisecond), 1e-9)
	assert.Equal(t, 533.0, ps.Rate(14*time.Second+500*time.Millisecond))
}

func TestParsePhases(t *testing.T) {
	ps, err := ParsePhases("300:20s, sine:400:200:30s:2m,square:333/s:200:10s:1m,ramp:600:100:1m30s,50/s:1s")
	require.NoError(t, err)
	want := []Phase{
		{Name: "1", Rate: 300, Duration: 20 * time.Second},
		{Name: "2", Rate: 400, Amplitude: 200, Period: 30 * time.Second, Duration: 2 * time.Minute, Shape: Sine},
		{Name: "3", Rate: 333, Amplitude: 200, Period: 10 * time.Second, Duration: time.Minute, Shape: Square},
		{Name: "4", Rate: 350, Amplitude: -250, Duration: 90 * time.Second, Shape: Ramp},
		{Name: "5", Rate: 50, Duration: time.Second},
	}
	assert.Equal(t, want, ps)
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	assert.Equal(t, "300:20s,sine:400:200:30s:2m0s,square:333:200:10s:1m0s,ramp:600:100:1m30s,50:1s", strings.Join(s, ","))

	for in, msg := range map[string]string{
		"":                         `phase ""`,
		"300":                      "unknown form",
		"300:0s":                   "duration",
		"-1:10s":                   "rate",
		"NaN:10s":                  "rate",
		"sine:400:200:30s":         "sine takes mean:amplitude:period:duration",
		"sine:400:500:30s:1m":      "amplitude 500: want within the mean rate 400",
		"square:400:100:0s:1m":     "period",
		"square:100:100:3ns:1s":    "period 3ns: want at least 1ms",
		"ramp:1e306:0:1h":          "rate 5e+305: want 0 to 1e+09",
		"sine:2e9:1e9:1s:1m":       "rate 2e+09",
		"Inf:10s":                  "rate",
		"ramp:100:1m":              "ramp takes from:to:duration",
		"ramp:100:-5:1m":           "rate",
		"triangle:400:100:10s:1m":  "unknown form",
		"300:20s,,300:20s":         `phase ""`,
		"sine:400:200:30s:1m:junk": "sine takes",
	} {
		_, err := ParsePhases(in)
		if assert.Error(t, err, in) {
			assert.Contains(t, err.Error(), msg, in)
		}
	}
}

// A run's phases are checked as ParsePhases checks them, whoever built
// them.
func TestRunRefusesAPhaseThatCannotBeSent(t *testing.T) {
	for _, p := range []Phase{
		{Name: "x", Rate: 100, Amplitude: 150, Period: time.Second, Duration: time.Second, Shape: Sine},
		{Name: "x", Rate: 100, Amplitude: 50, Duration: time.Second, Shape: Square},
		{Name: "x", Rate: 100, Duration: 0},
		{Name: "x", Rate: math.NaN(), Duration: time.Second},
		{Name: "x", Rate: 100, Duration: time.Second, Shape: Ramp + 1},
	} {
		_, err := Run(t.Context(), Config{Target: "http://127.0.0.1:1", Phases: []Phase{p}})
		assert.Error(t, err, "%+v", p)
	}
}

// A shaped run sends what its shape offers, and its report's offered load
// is the shape's mean over the part measured.
func TestRunSendsAShape(t *testing.T) {
	rec := newRecorder(t, nil)
	p := Phase{Name: "square", Rate: 100, Amplitude: 80, Period: time.Second, Duration: 2 * time.Second, Shape: Square}
	rep := run(t, Config{Target: rec.srv.URL, Phases: []Phase{p}, Skip: 250 * time.Millisecond})
	hits := rec.all()
	assert.InDelta(t, 200, len(hits), 2, "two periods of 180 and 20 a second, half a second each")
	require.Len(t, rep.Phases, 1)
	// Measured from 0.25 s: 0.25 s at 180, then 0.5 s at 20, 0.5 s at 180,
	// 0.5 s at 20 — 155 requests in 1.75 s.
	assert.InDelta(t, 155/1.75, rep.Phases[0].Offered, 1e-6)
}

// FuzzParsePhases: any input parses to phases that can be sent and print
// back to the same phases, or is refused with an error; never a panic.
func FuzzParsePhases(f *testing.F) {
	for _, s := range []string{"300:20s", "sine:400:200:30s:2m", "square:333:200:10s:1m", "ramp:600:100:1m30s",
		"300/s:20s,ramp:0:0:1s", "sine:1e308:1e308:1ns:1ns", "square:5:5:3ns:7ns", "square:1e9:1e9:1ms:2562047h", ":", "sine::::", "1:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParsePhases(s)
		if err != nil {
			return
		}
		var back []string
		for _, p := range ps {
			require.NoError(t, p.validate())
			back = append(back, p.String())
			last := 0.0
			for _, at := range []time.Duration{0, p.Duration / 3, p.Duration / 2, p.Duration} {
				assert.GreaterOrEqual(t, p.rateAt(at), -1e-9*p.Rate, "%s at %v", p, at)
				n := p.sent(at)
				require.False(t, math.IsNaN(n) || math.IsInf(n, 0), "%s: offered %v by %v", p, n, at)
				assert.GreaterOrEqual(t, n, last-1e-9*max(n, 1), "%s: what it offers never falls (%v)", p, at)
				last = n
			}
		}
		again, err := ParsePhases(strings.Join(back, ","))
		require.NoError(t, err, strings.Join(back, ","))
		require.Len(t, again, len(ps))
		for i := range ps {
			assert.Equal(t, ps[i].Shape, again[i].Shape)
			assert.Equal(t, ps[i].Duration, again[i].Duration)
			assert.Equal(t, ps[i].Period, again[i].Period)
			// (A ramp's ends go through its mean and amplitude: equal
			// within rounding.)
			assert.InDelta(t, ps[i].Rate, again[i].Rate, 1e-12*max(ps[i].Rate, 1))
			assert.InDelta(t, ps[i].Amplitude, again[i].Amplitude, 1e-12*max(ps[i].Rate, 1))
		}
	})
}
