package testapp

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/brownout/brownout/signals"

	"github.com/brownout/brownout/internal/server"
)

// StatsPath is where a served app reports its state, for the harness.
const StatsPath = "/debug/brownout"

// Live is the state a served app reports at StatsPath.
type Live struct {
	// The gate (shed stacks) or failsafe-go's limiter.
	Limit, Admitting, InFlight float64
	Queued                     int
	// The controller's published levels and shed level, and its reason.
	Levels     map[string]float64
	Shed       float64
	Mode       string
	Reason     string
	Generation uint64
	App        Stats
	// Refused counts the refusals so far by class and reason (the
	// shedder's recorder), for per-second readings.
	Refused map[string]uint64
	// Costs is what the controller has learned of each feature's cost.
	Costs []LearnedCost
}

// LearnedCost is what a controller has learned of a feature's cost
// (dimmer.CostEstimate), beside what it was told.
type LearnedCost struct {
	Feature string
	// Prior is the configured cost (dimmer.Feature.Cost), a share of the
	// all-off request.
	Prior float64
	// Known: Value and SE hold the estimate, in shares of the all-off
	// request's measured service time (Base); Seconds is the extra service
	// time itself. Service time is the tally's: from the gate's admission
	// to the handler's return, as the shed middleware measures it.
	Known         bool
	Value, SE     float64
	Seconds, Base float64
	// Contrasted is how many ticks the feature was contrasted in.
	Contrasted int
}

// Read returns p's live state.
func (p *Protected) Read() Live {
	l := Live{App: p.App.Stats(), Levels: map[string]float64{}}
	switch {
	case p.Shedder != nil:
		st := p.Shedder.Stats()
		l.Limit, l.Admitting, l.InFlight = st.Limit, st.Admitting, st.InFlight
		l.Queued = st.Queued[0] + st.Queued[1] + st.Queued[2]
		l.Refused = map[string]uint64{}
		for c, cc := range p.Shedder.Recorder().Counters().Load() {
			for why, n := range cc.Rejected {
				if n > 0 {
					l.Refused[signals.Class(c).String()+"."+signals.Reason(why).String()] = n
				}
			}
		}
	case p.Limiter != nil:
		l.Limit, l.InFlight, l.Queued = float64(p.Limiter.Limit()), float64(p.Limiter.Inflight()), p.Limiter.Queued()
		l.Admitting = l.Limit
	}
	if p.Controller != nil {
		st := p.Controller.Status()
		for _, f := range st.Features {
			l.Levels[f.Name] = f.Level
		}
		l.Shed, l.Mode, l.Reason, l.Generation = st.Shed, st.Mode.String(), st.Reason, st.Generation
		fs := p.Controller.Config().Features
		for i, e := range p.Controller.Costs() {
			if i >= len(fs) {
				break
			}
			lc := LearnedCost{Feature: fs[i].Name, Prior: fs[i].Cost, Known: e.Known(), Contrasted: e.Contrasted,
				Seconds: finite(e.Seconds), Base: finite(e.Base)}
			if lc.Known {
				lc.Value, lc.SE = e.Value, e.SE
			}
			l.Costs = append(l.Costs, lc)
		}
	}
	return l
}

// ServeConfig configures Serve.
type ServeConfig struct {
	// Listen is the address, e.g. 127.0.0.1:0.
	Listen string
	App    Config
	Stack  Stack
	// Ready, when set, receives the bound address once the server listens.
	Ready func(addr string)
}

// Serve runs cfg's app behind its stack until ctx is done: every path but
// StatsPath is a page.
func Serve(ctx context.Context, cfg ServeConfig) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := Build(ctx, cfg.App, cfg.Stack)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+StatsPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(p.Read())
	})
	mux.Handle("/", p.Handler)
	// The lab's load generator is the app's one client, with as many
	// connections as its load needs: no cap per client.
	ln, err := server.ListenWith(cfg.Listen, server.Limits{PerClient: -1})
	if err != nil {
		return err
	}
	srv := server.New(mux)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// finite is x, or 0 where it is NaN or infinite (JSON has neither).
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
