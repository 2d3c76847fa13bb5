package load

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Shape is how a phase's offered load moves around its mean (Phase.Rate)
// over the phase: the loads a controller must follow, not only the steps
// between phases.
type Shape uint8

const (
	// Constant: Rate throughout.
	Constant Shape = iota
	// Sine: Rate + Amplitude·sin(2πt/Period), t from the phase's start.
	Sine
	// Square: Rate + Amplitude for the first half of each Period, Rate −
	// Amplitude for the second.
	Square
	// Ramp: from Rate − Amplitude to Rate + Amplitude, linearly over the
	// phase (a negative Amplitude falls); Period is not read.
	Ramp
)

var shapeNames = [...]string{Constant: "constant", Sine: "sine", Square: "square", Ramp: "ramp"}

func (s Shape) String() string {
	if int(s) < len(shapeNames) {
		return shapeNames[s]
	}
	return "shape(" + strconv.Itoa(int(s)) + ")"
}

// rateAt is the phase's offered rate at t from its start.
func (p Phase) rateAt(t time.Duration) float64 {
	switch p.Shape {
	case Sine:
		return p.Rate + p.Amplitude*math.Sin(2*math.Pi*float64(t)/float64(p.Period))
	case Square:
		if 2*(t%p.Period) < p.Period {
			return p.Rate + p.Amplitude
		}
		return p.Rate - p.Amplitude
	case Ramp:
		return p.Rate - p.Amplitude + 2*p.Amplitude*min(float64(t)/float64(p.Duration), 1)
	}
	return p.Rate
}

// sent is how many requests the phase offers in its first t (within
// [0, Duration]): the rate's integral, in closed form.
func (p Phase) sent(t time.Duration) float64 {
	t = min(max(t, 0), p.Duration)
	s := t.Seconds()
	switch p.Shape {
	case Sine:
		per := p.Period.Seconds()
		return p.Rate*s + p.Amplitude*per/(2*math.Pi)*(1-math.Cos(2*math.Pi*s/per))
	case Square:
		// Each whole period's excess and deficit cancel; within one, the
		// excess grows for its first half and shrinks over the second.
		in := (t % p.Period).Seconds()
		tri := min(in, p.Period.Seconds()-in)
		return p.Rate*s + p.Amplitude*tri
	case Ramp:
		d := p.Duration.Seconds()
		return (p.Rate-p.Amplitude)*s + p.Amplitude*s*s/d
	}
	return p.Rate * s
}

// maxRate bounds a phase's rate and amplitude, requests a second: a
// billion, far past what one generator sends, and far enough under the
// floats' range that the pacer's sums of a phase of hours stay exact to a
// request (at 1e306, a ramp's count overflowed and the pacer went quiet).
const maxRate = 1e9

// minPeriod is the shortest period of a sine or square: a millisecond, the
// finest a server's counters or a controller's ticks see a load move; under
// it the pacer's microseconds cannot follow the shape.
const minPeriod = time.Millisecond

// validate reports what makes the phase one that cannot be sent.
func (p Phase) validate() error {
	switch {
	case !(p.Rate >= 0) || p.Rate > maxRate:
		return fmt.Errorf("load: phase %q: rate %v: want 0 to %g requests a second", p.Name, p.Rate, float64(maxRate))
	case p.Duration <= 0:
		return fmt.Errorf("load: phase %q: duration %v: want > 0", p.Name, p.Duration)
	case p.Shape > Ramp:
		return fmt.Errorf("load: phase %q: unknown shape %v", p.Name, p.Shape)
	case p.Shape == Constant:
		return nil
	case math.IsNaN(p.Amplitude) || math.Abs(p.Amplitude) > p.Rate:
		return fmt.Errorf("load: phase %q: %v amplitude %v: want within the mean rate %v (an offered rate is never negative)", p.Name, p.Shape, p.Amplitude, p.Rate)
	case p.Shape != Ramp && p.Amplitude < 0:
		return fmt.Errorf("load: phase %q: %v amplitude %v: want ≥ 0", p.Name, p.Shape, p.Amplitude)
	case p.Shape != Ramp && p.Period < minPeriod:
		return fmt.Errorf("load: phase %q: %v period %v: want at least %v", p.Name, p.Shape, p.Period, minPeriod)
	}
	return nil
}

// String is the phase as ParsePhases reads it.
func (p Phase) String() string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	switch p.Shape {
	case Sine, Square:
		return fmt.Sprintf("%v:%s:%s:%v:%v", p.Shape, f(p.Rate), f(p.Amplitude), p.Period, p.Duration)
	case Ramp:
		return fmt.Sprintf("ramp:%s:%s:%v", f(p.Rate-p.Amplitude), f(p.Rate+p.Amplitude), p.Duration)
	}
	return fmt.Sprintf("%s:%v", f(p.Rate), p.Duration)
}

// phasesSyntax is ParsePhases' grammar, for its errors.
const phasesSyntax = "rate:duration (800:40s), sine:mean:amplitude:period:duration (400:200:30s:2m), square:mean:amplitude:period:duration, or ramp:from:to:duration"

// ParsePhases parses a comma-separated list of phases, each one of
//
//	rate:duration                            800:40s (or 800/s:40s)
//	sine:mean:amplitude:period:duration      sine:400:200:30s:2m
//	square:mean:amplitude:period:duration    square:333:200:10s:1m
//	ramp:from:to:duration                    ramp:100:600:1m
//
// A sine swings mean ± amplitude once a period; a square holds mean +
// amplitude for the first half of each period and mean − amplitude for the
// second; a ramp goes from one rate to the other over the phase. Phases
// are named by their position from 1.
func ParsePhases(s string) ([]Phase, error) {
	var out []Phase
	for i, f := range strings.Split(s, ",") {
		p, err := parsePhase(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("load: phase %q: %w; want %s", f, err, phasesSyntax)
		}
		p.Name = strconv.Itoa(i + 1)
		if err := p.validate(); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePhase(f string) (Phase, error) {
	parts := strings.Split(f, ":")
	rate := func(s string) (float64, error) {
		r, err := strconv.ParseFloat(strings.TrimSuffix(s, "/s"), 64)
		if err != nil || !(r >= 0) || math.IsInf(r, 0) {
			return 0, fmt.Errorf("rate %q: want a number ≥ 0", s)
		}
		return r, nil
	}
	dur := func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("duration %q: want one > 0, e.g. 40s", s)
		}
		return d, nil
	}
	var p Phase
	var err error
	switch kind := parts[0]; {
	case kind == "sine" || kind == "square":
		if len(parts) != 5 {
			return p, fmt.Errorf("%s takes mean:amplitude:period:duration", kind)
		}
		p.Shape = Sine
		if kind == "square" {
			p.Shape = Square
		}
		if p.Rate, err = rate(parts[1]); err != nil {
			return p, err
		}
		if p.Amplitude, err = rate(parts[2]); err != nil {
			return p, fmt.Errorf("amplitude: %w", err)
		}
		if p.Period, err = dur(parts[3]); err != nil {
			return p, fmt.Errorf("period: %w", err)
		}
		p.Duration, err = dur(parts[4])
		return p, err
	case kind == "ramp":
		if len(parts) != 4 {
			return p, fmt.Errorf("ramp takes from:to:duration")
		}
		from, err := rate(parts[1])
		if err != nil {
			return p, err
		}
		to, err := rate(parts[2])
		if err != nil {
			return p, err
		}
		p.Shape, p.Rate, p.Amplitude = Ramp, (from+to)/2, (to-from)/2
		p.Duration, err = dur(parts[3])
		return p, err
	case len(parts) == 2:
		if p.Rate, err = rate(parts[0]); err != nil {
			return p, err
		}
		p.Duration, err = dur(parts[1])
		return p, err
	}
	return p, fmt.Errorf("unknown form")
}
