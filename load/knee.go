package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

// KneeConfig is an open-loop step test against one URL.
type KneeConfig struct {
	// URL is requested with Method (default GET) and Header.
	URL    string
	Method string
	Header http.Header
	Body   []byte
	// From, Step and Steps: the rates of the steps, From, From+Step, …
	// (Steps of them). Defaults 50, 50, 12.
	From, Step float64
	Steps      int
	// Hold is each step's length; the first quarter (at most 2 s) is not
	// measured. Default 6 s.
	Hold time.Duration
	// Timeout is the client's. Default 2 s.
	Timeout time.Duration
	// Users: distinct X-User-ID values. Default 5000.
	Users int
	// Progress receives a line a second; nil: none.
	Progress io.Writer
}

// KneeStep is one step's measure.
type KneeStep struct {
	Rate, Goodput float64
	P50, P99      time.Duration
	// Errors: refusals, timeouts and failures per second.
	Errors float64
}

// Knee is the step test's result and what follows from it.
type Knee struct {
	Steps []KneeStep
	// At is the index of the first step past the knee (p99 at least
	// three times the unloaded p99, or goodput under 95 % of the rate);
	// −1 when no step got there.
	At int
	// Capacity (μ, requests per second) is the most a saturated step
	// served (goodput under 95 % of its rate) that did not collapse
	// (under half of what was served up to the knee: an unprotected server
	// past its capacity serves less, not the same, down to nothing);
	// without such a step, the most served up to the knee (a lower bound
	// when there is no knee). Base is the p50 of the lightest step (the
	// service time, unloaded).
	Capacity float64
	Base     time.Duration
	// Collapsed is the index of the first step past the knee whose
	// goodput fell under half of what was served up to the knee; −1 when
	// none did.
	Collapsed int
	// Suggested settings.
	Suggest Suggestion
}

// Suggestion is what the knee says about settings.
type Suggestion struct {
	// QueueBound is K ≈ μ × acceptable wait, for waits of 100 ms, 300 ms
	// and 800 ms (sheddable, default and critical: shed's MaxWait).
	QueueBound [3]int
	// Concurrency is Little's law at the knee: μ × the unloaded service
	// time, the work in flight that keeps the server busy without a
	// queue (shed's adaptive limit finds it by itself; this is for a
	// fixed limit).
	Concurrency float64
	// P99Target is the last p99 before the knee, times 1.5, rounded up
	// to 50 ms: a target the server can hold.
	P99Target time.Duration
	// Timeout for callers of this URL: the p99 before the knee × 1.5,
	// at least 50 ms (fallback.Config's adaptive timeout does this
	// continuously).
	Timeout time.Duration
}

// FindKnee runs the step test.
func FindKnee(ctx context.Context, cfg KneeConfig) (*Knee, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("load: knee: %q is not an absolute URL", cfg.URL)
	}
	if cfg.From == 0 {
		cfg.From = 50
	}
	if cfg.Step == 0 {
		cfg.Step = 50
	}
	if cfg.Steps == 0 {
		cfg.Steps = 12
	}
	if cfg.Hold == 0 {
		cfg.Hold = 6 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if !(cfg.From > 0) || !(cfg.Step >= 0) || cfg.Steps < 1 || cfg.Steps > 200 || cfg.Hold < 2*time.Second || math.IsInf(cfg.From+cfg.Step, 0) {
		return nil, errors.New("load: knee: want from > 0, step ≥ 0, 1 to 200 steps of at least 2 s")
	}
	if cfg.Method == "" {
		cfg.Method = http.MethodGet
	}
	path := u.RequestURI()
	u.Path, u.RawPath, u.RawQuery, u.Fragment = "", "", "", ""
	phases := make([]Phase, cfg.Steps)
	for i := range phases {
		phases[i] = Phase{Name: fmt.Sprintf("%.0f/s", cfg.From+float64(i)*cfg.Step), Rate: cfg.From + float64(i)*cfg.Step, Duration: cfg.Hold}
	}
	rep, err := Run(ctx, Config{
		Target: u.String(), Phases: phases, Timeout: cfg.Timeout, Users: cfg.Users, Progress: cfg.Progress,
		Skip: min(cfg.Hold/4, 2*time.Second),
		Mix:  []Kind{{Name: "knee", Share: 1, Method: cfg.Method, Path: path, Body: cfg.Body, Header: cfg.Header}},
	})
	if err != nil {
		return nil, err
	}
	k := &Knee{At: -1, Collapsed: -1}
	for _, p := range rep.Phases {
		var refused float64
		for _, v := range p.Refused {
			refused += v
		}
		k.Steps = append(k.Steps, KneeStep{Rate: p.Offered, Goodput: p.Goodput, P50: p.P50, P99: p.P99, Errors: refused + p.Timeouts + p.Errors})
	}
	k.analyse()
	return k, nil
}

// collapseShare: a step past the knee that serves under 1/collapseShare
// of the capacity has collapsed.
const collapseShare = 2

// analyse finds the knee and the suggestions.
func (k *Knee) analyse() {
	if len(k.Steps) == 0 {
		return
	}
	k.Base = k.Steps[0].P50
	base99 := k.Steps[0].P99
	k.At, k.Collapsed = -1, -1
	for i, s := range k.Steps {
		if i > 0 && (s.P99 >= 3*base99 || s.Goodput < 0.95*s.Rate) {
			k.At = i
			break
		}
	}
	last := len(k.Steps) - 1
	if k.At >= 0 {
		last = k.At
	}
	// What the server served up to the knee: the steps before it served
	// their whole rate.
	var upTo float64
	for _, s := range k.Steps[:last+1] {
		upTo = max(upTo, s.Goodput)
	}
	// μ is what a saturated step serves (goodput under 95 % of its rate):
	// a step just past the knee may still serve its whole rate for a few
	// seconds while its queue grows. But not a step that collapsed (under
	// half of what was served up to the knee): without admission control
	// a server past its capacity serves less, down to nothing. With no
	// saturated step that held, the most served up to the knee.
	k.Capacity = 0
	for i, s := range k.Steps {
		switch {
		case s.Goodput < upTo/collapseShare:
			if k.Collapsed < 0 && k.At >= 0 && i > k.At {
				k.Collapsed = i
			}
		case s.Goodput < 0.95*s.Rate:
			k.Capacity = max(k.Capacity, s.Goodput)
		}
	}
	if k.Capacity == 0 {
		k.Capacity = upTo
	}
	before := len(k.Steps) - 1
	if k.At > 0 {
		before = k.At - 1
	}
	p99 := k.Steps[before].P99
	for i, w := range []float64{0.1, 0.3, 0.8} {
		k.Suggest.QueueBound[i] = int(math.Ceil(k.Capacity * w))
	}
	k.Suggest.Concurrency = k.Capacity * k.Base.Seconds()
	r := 50 * time.Millisecond
	k.Suggest.P99Target = max((time.Duration(1.5*float64(p99))+r-1)/r*r, r)
	k.Suggest.Timeout = max(time.Duration(1.5*float64(p99)), 50*time.Millisecond)
}

// WriteTable writes the steps and the suggestions.
func (k *Knee) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\tgoodput/s\tp50\tp99\terrors/s\t")
	for i, s := range k.Steps {
		mark := ""
		if i == k.At {
			mark = "  ← the knee"
		}
		fmt.Fprintf(tw, "%.0f\t%.1f\t%s\t%s\t%.1f\t%s\n", s.Rate, s.Goodput, ms(s.P50), ms(s.P99), s.Errors, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	if k.At < 0 {
		fmt.Fprintf(&b, "no knee within the steps: raise --from/--step; capacity at least %.0f/s\n", k.Capacity)
	} else {
		fmt.Fprintf(&b, "the knee: p99 turns steep at %.0f/s (before it %s); capacity μ ≈ %.0f/s, unloaded service time %s\n",
			k.Steps[k.At].Rate, ms(k.Steps[max(k.At-1, 0)].P99), k.Capacity, ms(k.Base))
	}
	if k.Collapsed >= 0 {
		fmt.Fprintf(&b, "collapsed: at %.0f/s the server served %.0f/s — past its capacity an unprotected server serves less, not the same; this is what admission control is for\n",
			k.Steps[k.Collapsed].Rate, k.Steps[k.Collapsed].Goodput)
	}
	s := k.Suggest
	fmt.Fprintf(&b, "suggested: queue bounds K ≈ μ × wait: %d (100 ms), %d (300 ms), %d (800 ms); a fixed concurrency limit ≈ μ × service time = %.1f; p99 target %s; callers' timeout %s\n",
		s.QueueBound[0], s.QueueBound[1], s.QueueBound[2], s.Concurrency, ms(s.P99Target), ms(s.Timeout))
	_, err := io.WriteString(w, b.String())
	return err
}

func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}
