package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/brownout/brownout/signals"
)

// PromQLConfig configures a PromQLSource. Address is required.
type PromQLConfig struct {
	// Address is the Prometheus server's base URL, e.g. http://127.0.0.1:9090.
	Address string
	// Queries maps signals to PromQL expressions that return a scalar or a
	// one-element vector. Default DefaultQueries("1m").
	Queries map[signals.Key]string
	// Timeout bounds one Snapshot (all queries). Default 5 s.
	Timeout time.Duration
	// Window is how far back the queries look (their PromQL range),
	// reported as Snapshot.Window: the controller waits that long after
	// each step before it counts the signals as describing the new level.
	// Default 1 minute, the range of DefaultQueries' default.
	Window time.Duration
	// RoundTripper sends the requests. Default http.DefaultTransport.
	RoundTripper http.RoundTripper
	// MaxBody bounds one answer's size: a larger one fails its query
	// (its signal is missing). Default DefaultMaxBody, as ScrapeSource's.
	MaxBody int64
	// Period is the length of the periods a snapshot's counts are of:
	// Snapshot.Recent, Tallies and Work are the increase of the
	// Collector's counters over the latest whole period (PromQL's
	// increase, summed over the fleet; periods end at the multiples of
	// the Period, the latest at least half a Period before the
	// snapshot's time), Snapshot.Instances its arrivals' spread over
	// the instances. The model law learns
	// the features' costs and what the load brings from them. It needs
	// two of Prometheus's samples of each series: at least two scrape
	// intervals. Default half of Window (a range of four scrape
	// intervals or more, as DefaultQueries asks, holds two in its half);
	// negative for none. At least a second otherwise, and at most Window.
	Period time.Duration
	// Selector is label matchers, as DefaultQueriesFor takes them, added
	// to the period's queries and, when Queries is nil, to the default
	// ones: the fleet of one service, where a Prometheus server scrapes
	// several. "" selects every series.
	Selector string
}

// DefaultQueries returns queries for the metrics signals.Collector exports,
// aggregated over every instance Prometheus scrapes, with rates and
// quantiles over rng (a PromQL range such as "30s" or "1m": at least four
// scrape intervals). Classic buckets are used so that the queries work
// whether or not the server ingests native histograms.
func DefaultQueries(rng string) map[signals.Key]string { return DefaultQueriesFor(rng, "") }

// DefaultQueriesFor is DefaultQueries over the series that selector
// selects: label matchers as PromQL writes them inside braces, e.g.
// service="shop" or job=~"shop-.*",env="prod", added to every metric's
// selector — the fleet of one service, where a Prometheus server scrapes
// several. It is inserted as given: check it where it comes from (a
// configuration); "" selects every series, as DefaultQueries.
func DefaultQueriesFor(rng, selector string) map[signals.Key]string {
	sel := selecting(selector)
	q := func(quantile, metric string) string {
		return fmt.Sprintf("histogram_quantile(%s, sum by (le) (rate(%s[%s])))", quantile, sel(metric+"_bucket"), rng)
	}
	rateOf := func(metric string, matchers ...string) string {
		return fmt.Sprintf("sum(rate(%s[%s]))", sel(metric, matchers...), rng)
	}
	rate := func(metric string) string { return rateOf(metric) }
	// gated is rateOf over the instances that export a gate's limit.
	// (count by, not group by: Prometheus before 2.20 has no group.)
	gated := func(metric string, matchers ...string) string {
		return fmt.Sprintf("sum(rate(%s[%s]) and on(instance, job) count by (instance, job) (%s))", sel(metric, matchers...), rng, sel(signals.MetricGateLimit))
	}
	const refused = `reason=~"max_wait|codel|deadline|concurrency"`
	return map[signals.Key]string{
		signals.LatencyP50:  q("0.5", signals.MetricLatency),
		signals.LatencyP90:  q("0.9", signals.MetricLatency),
		signals.LatencyP99:  q("0.99", signals.MetricLatency),
		signals.LatencyP999: q("0.999", signals.MetricLatency),
		signals.LatencyMean: fmt.Sprintf("%s / %s", rate(signals.MetricLatency+"_sum"), rate(signals.MetricLatency+"_count")),
		signals.SojournP99:  q("0.99", signals.MetricSojourn),
		signals.SojournMin:  "max(" + sel(signals.MetricSojournMin) + ")",
		signals.InFlight:    "sum(" + sel(signals.MetricInFlight) + ")",
		signals.ArrivalRate: rate(signals.MetricArrived),
		signals.Throughput:  rate(signals.MetricCompleted),
		signals.Goodput:     rate(signals.MetricGood),
		signals.RejectRate:  rate(signals.MetricRejected),
		signals.ErrorRatio:  fmt.Sprintf("%s / %s", rate(signals.MetricFailed), rate(signals.MetricCompleted)),
		signals.RejectRatio: fmt.Sprintf(`%s / %s`, rateOf(signals.MetricRejected, refused), rate(signals.MetricArrived)),
		// Over the instances that have a gate only: one without (the
		// middleware alone, or behind another limiter) found no gate
		// full — another limiter's refusals are no room at a gate — and a
		// fleet with no gate has no gate.busy.
		signals.GateBusy: fmt.Sprintf(`clamp_max((%s + %s) / (%s - %s), 1)`,
			gated(signals.MetricWaited), gated(signals.MetricRejected, `reason=~"max_wait|codel|deadline|concurrency|canceled"`),
			gated(signals.MetricArrived), gated(signals.MetricRejected, `reason=~"rate_limit|shed_level"`)),
		signals.GateUtilization: fmt.Sprintf("sum(%s) / sum(%s)", sel(signals.MetricGateInFlight), sel(signals.MetricGateLimit)),
		signals.GateQueued:      "sum(" + sel(signals.MetricGateQueued) + ")",
		signals.GateLimit:       "sum(" + sel(signals.MetricGateLimit) + ")",
	}
}

// selecting returns a function that writes metric{matchers…, selector}.
func selecting(selector string) func(metric string, matchers ...string) string {
	return func(metric string, matchers ...string) string {
		if selector != "" {
			matchers = append(matchers, selector)
		}
		if len(matchers) == 0 {
			return metric
		}
		return metric + "{" + strings.Join(matchers, ",") + "}"
	}
}

// PromQLSource reads a fleet's signals from a Prometheus server, one instant
// query per signal. It suits fleets too large to scrape from one daemon.
//
// A query that fails, returns no data, returns several series or returns
// NaN/±Inf leaves its signal missing, and Snapshot's error names the server,
// the signal and the query. It is safe for concurrent use.
type PromQLSource struct {
	cfg  PromQLConfig
	api  v1.API
	keys []signals.Key // sorted, for stable messages
	// period is the one query of a period's counts ("" for none).
	period string

	mu struct {
		sync.Mutex
		health health
		period lastPeriod
	}
}

// NewPromQLSource checks cfg and returns a source.
func NewPromQLSource(cfg PromQLConfig) (*PromQLSource, error) {
	if cfg.Address == "" {
		return nil, errors.New("fleet: promql source: no address")
	}
	if cfg.Queries == nil {
		cfg.Queries = DefaultQueriesFor("1m", cfg.Selector)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Window <= 0 {
		cfg.Window = time.Minute
	}
	switch {
	case cfg.Period == 0:
		cfg.Period = max(cfg.Window/2, time.Second)
	case cfg.Period > 0 && cfg.Period < time.Second:
		return nil, fmt.Errorf("fleet: promql source: period %v: want a second or more (two scrape intervals at least)", cfg.Period)
	case cfg.Period > cfg.Window:
		return nil, fmt.Errorf("fleet: promql source: period %v: want at most the window, %v (the periods' counts are the law's latest; the window's rates span several)", cfg.Period, cfg.Window)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	rt := cfg.RoundTripper
	if rt == nil {
		rt = http.DefaultTransport
	}
	c, err := api.NewClient(api.Config{Address: cfg.Address, RoundTripper: limitBodies{rt, cfg.MaxBody}})
	if err != nil {
		return nil, fmt.Errorf("fleet: promql source %s: %w", cfg.Address, err)
	}
	s := &PromQLSource{cfg: cfg, api: v1.NewAPI(c)}
	if cfg.Period > 0 {
		s.period = periodQuery(cfg.Period, cfg.Selector)
	}
	for k, q := range cfg.Queries {
		if k >= signals.NumKeys {
			return nil, fmt.Errorf("fleet: promql source: unknown signal %d", k)
		}
		if strings.TrimSpace(q) == "" {
			return nil, fmt.Errorf("fleet: promql source: empty query for %s", k)
		}
		s.keys = append(s.keys, k)
	}
	sort.Slice(s.keys, func(i, j int) bool { return s.keys[i] < s.keys[j] })
	return s, nil
}

// Name describes the source for messages.
// Its password (http://user:password@host) is never shown.
func (s *PromQLSource) Name() string { return "promql(" + shownURL(s.cfg.Address) + ")" }

// Snapshot evaluates every query at now, and gives the counts of the
// latest whole period (see PromQLConfig.Period): RecentAt is when it
// ended — the last multiple of the Period at least half a Period before
// now — and RecentSpan the Period, so that a daemon that ticks faster
// than the Period sees one period in several snapshots, as from a push
// source; its query is asked once a period. The tallies and the work are
// left out, with an error, when their query fails or its answer does not
// hang together; Recent is left out while no instance's arrivals are in
// Prometheus.
func (s *PromQLSource) Snapshot(ctx context.Context, now time.Time) (signals.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	snap := signals.Snapshot{Time: now, Window: s.cfg.Window, Source: s.Name()}
	var errs []error
	for _, k := range s.keys {
		q := s.cfg.Queries[k]
		v, err := s.query(ctx, q, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("fleet: %s: %s (%s): %w", s.Name(), k, q, err))
			continue
		}
		snap.Set(k, v)
	}
	if s.period != "" {
		if err := s.readPeriod(ctx, &snap, now); err != nil {
			errs = append(errs, fmt.Errorf("fleet: %s: the counts of a %v period: %w", s.Name(), s.cfg.Period, err))
		}
	}
	err := errors.Join(errs...)
	s.mu.Lock()
	s.mu.health.record(now, err)
	s.mu.Unlock()
	return snap, err
}

// Health reports the last Snapshot: OK when every query answered.
func (s *PromQLSource) Health() signals.SourceHealth {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.health.report(s.Name())
}

func (s *PromQLSource) query(ctx context.Context, q string, now time.Time) (float64, error) {
	val, _, _, err := s.api.Query(ctx, q, now)
	if err != nil {
		return 0, err
	}
	var f float64
	switch v := val.(type) {
	case *model.Scalar:
		f = float64(v.Value)
	case model.Vector:
		switch len(v) {
		case 0:
			return 0, errors.New("no data")
		case 1:
			f = float64(v[0].Value)
		default:
			return 0, fmt.Errorf("%d series, want one: aggregate the query", len(v))
		}
	default:
		return 0, fmt.Errorf("result is a %s, want a scalar or a vector", val.Type())
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("value %v: %w", f, errValue)
	}
	return f, nil
}

// limitBodies bounds the bodies of the answers rt receives: the client
// reads an answer whole before decoding it.
type limitBodies struct {
	rt  http.RoundTripper
	max int64
}

func (l limitBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	resp.Body = limitedBody{&countingReader{r: resp.Body, limit: l.max, what: "answer"}, resp.Body}
	return resp, nil
}

type limitedBody struct {
	io.Reader
	io.Closer
}
