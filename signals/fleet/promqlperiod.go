package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/brownout/brownout/signals"
)

// countLabel names, in the answer of a PromQLSource's period query, which
// count a series holds (the query's parts are unions of aggregates whose
// metric names PromQL drops).
const countLabel = "brownout_count"

// The counts of the period query, by countLabel.
const (
	countArrived   = "arrived"
	countCompleted = "completed"
	countFailed    = "failed"
	countGood      = "good"
	countWaited    = "waited"
	countRejected  = "rejected" // by reason
	countInstances = "instances"
	countFeatureN  = "feature_requests" // by feature and state
	countFeatureS  = "feature_seconds"
	countFeatureQ  = "feature_squares"
	countWorkN     = "work_requests"
	countWorkS     = "work_seconds"
	countWorkQ     = "work_squares"
)

// periodQuery returns the one query whose answer holds a period's counts
// over the fleet: each counter's increase over period, summed (the
// rejections by reason, the feature tallies by feature and state), and
// the instances' spread of the arrivals, (Σλᵢ)²/Σλᵢ², each series
// labelled with countLabel. One query, so that every count is of the
// same samples.
func periodQuery(period time.Duration, selector string) string {
	sel := selecting(selector)
	rng := model.Duration(period).String()
	inc := func(metric string) string { return fmt.Sprintf("increase(%s[%s])", sel(metric), rng) }
	named := func(count, expr string) string {
		return fmt.Sprintf(`label_replace(%s, %q, %q, "", "")`, expr, countLabel, count)
	}
	parts := []string{
		named(countArrived, "sum("+inc(signals.MetricArrived)+")"),
		named(countCompleted, "sum("+inc(signals.MetricCompleted)+")"),
		named(countFailed, "sum("+inc(signals.MetricFailed)+")"),
		named(countGood, "sum("+inc(signals.MetricGood)+")"),
		named(countWaited, "sum("+inc(signals.MetricWaited)+")"),
		named(countRejected, "sum by (reason) ("+inc(signals.MetricRejected)+")"),
		named(countInstances, fmt.Sprintf("sum(%s)^2 / sum(sum by (instance, job) (%s)^2)", inc(signals.MetricArrived), inc(signals.MetricArrived))),
	}
	for _, f := range []struct{ count, metric, by string }{
		{countFeatureN, signals.MetricFeatureRequests, "feature, state"},
		{countFeatureS, signals.MetricFeatureServiceSum, "feature, state"},
		{countFeatureQ, signals.MetricFeatureServiceSquares, "feature, state"},
		{countWorkN, signals.MetricWorkRequests, ""},
		{countWorkS, signals.MetricWorkSum, ""},
		{countWorkQ, signals.MetricWorkSquares, ""},
	} {
		by := ""
		if f.by != "" {
			by = " by (" + f.by + ")"
		}
		parts = append(parts, named(f.count, "sum"+by+" ("+inc(f.metric)+")"))
	}
	return strings.Join(parts, " or ")
}

// periodEnd is when the latest whole period at now ended: the last
// multiple of the Period at least half a Period before now, so that
// Prometheus has scraped past it (a Period holds two scrape intervals).
// Periods so placed are adjacent and never overlap: each snapshot gives
// the latest one, the same until the next ends, as a push source gives
// an instance's last interval until its next push. (Counts over the
// Period before each snapshot's time would overlap from one tick to the
// next, and a period that began before a move of the levels and ended
// after it would read as one of the new levels.)
func (s *PromQLSource) periodEnd(now time.Time) time.Time {
	// (On the Unix clock's multiples, as Prometheus's own steps: Truncate
	// counts from the year 1.)
	ns, p := now.Add(-s.cfg.Period/2).UnixNano(), int64(s.cfg.Period)
	return time.Unix(0, ns-((ns%p)+p)%p)
}

// readPeriod sets snap's Recent, RecentSpan, RecentAt, Tallies, Work and
// Instances from the period query's answer at the latest period's end
// (see periodEnd), asked once a period.
func (s *PromQLSource) readPeriod(ctx context.Context, snap *signals.Snapshot, now time.Time) error {
	end := s.periodEnd(now)
	s.mu.Lock()
	last := s.mu.period
	s.mu.Unlock()
	p, err := last.p, last.err
	if !last.end.Equal(end) {
		p, err = s.askPeriod(ctx, end)
		if err == nil && !p.hasArrivals && snap.Has(signals.ArrivalRate) {
			// Arrivals in the window and none in the period: it holds
			// fewer than two samples of a series.
			err = fmt.Errorf("no counts for the period that ended at %s, though the window has arrivals: a period needs two of Prometheus's samples of a series (at least two scrape intervals)", end.UTC().Format(time.RFC3339))
		}
		// Kept for the period, failed or not — one cut short by the
		// snapshot's timeout too: the heaviest query is not asked again
		// each tick of a Prometheus that is slow to answer it.
		s.mu.Lock()
		s.mu.period = lastPeriod{end: end, p: p, err: err}
		s.mu.Unlock()
	}
	if p.hasArrivals {
		snap.Recent, snap.RecentSpan, snap.RecentAt = p.counts, s.cfg.Period, end
	}
	if p.instances > 0 {
		snap.Instances = p.instances
	}
	snap.Tallies, snap.Work = p.tallies, p.work
	return err
}

// askPeriod runs the period query at end and reads its answer.
func (s *PromQLSource) askPeriod(ctx context.Context, end time.Time) (period, error) {
	val, _, _, err := s.api.Query(ctx, s.period, end)
	if err != nil {
		return period{}, err
	}
	v, ok := val.(model.Vector)
	if !ok {
		return period{}, fmt.Errorf("result is a %s, want a vector", val.Type())
	}
	return parsePeriod(v)
}

// lastPeriod is the latest period read: its end and what was read.
type lastPeriod struct {
	end time.Time
	p   period
	err error
}

// period is a period query's answer, read.
type period struct {
	counts      signals.ClassCounts
	hasArrivals bool
	instances   float64
	tallies     []signals.Tally
	work        signals.Moments
}

// rawMoments are the increases of a count, its sum and its sum of
// squares, and which of the three the answer held (famRequests…).
type rawMoments struct {
	n, sum, sq float64
	fams       uint8
}

func (r *rawMoments) set(count string, v float64) {
	switch {
	case strings.HasSuffix(count, "_requests"):
		r.n, r.fams = v, r.fams|famRequests
	case strings.HasSuffix(count, "_seconds"):
		r.sum, r.fams = v, r.fams|famSum
	default:
		r.sq, r.fams = v, r.fams|famSquares
	}
}

// moments rounds the increase of the count to whole requests and scales
// the sums with it, so that a request's mean and second moment are the
// answer's (an increase is extrapolated to the period's ends: each of the
// three by the same factor, as they are scraped together).
func (r rawMoments) moments() signals.Moments {
	n := math.Round(r.n)
	if n < 1 {
		return signals.Moments{}
	}
	f := n / r.n
	return signals.Moments{N: int64(n), Sum: r.sum * f, SumSq: r.sq * f}
}

// parsePeriod reads a period query's answer. The tallies are left out,
// with an error, when a feature's state lacks one of its three counts
// or holds a time without requests; so is the work, and the work alone
// when the tallies have no work beside them (as ScrapeSource: a work
// without some of the tallied requests reads a feature's share too
// high).
func parsePeriod(v model.Vector) (period, error) {
	var p period
	var errs []error
	type state struct{ on, off rawMoments }
	features := map[string]*state{}
	unattributed := map[string]float64{}
	var work rawMoments
	bad, tooMany := false, false // the tallies (and the work) are left out; more than MaxFeatures
	for _, smp := range v {
		count := string(smp.Metric[countLabel])
		x := float64(smp.Value)
		if count == countInstances {
			if !math.IsNaN(x) && !math.IsInf(x, 0) && x >= 1 {
				p.instances = x
			}
			continue // (0/0 where no arrivals)
		}
		if !finiteNonNeg(x) || x > maxCount {
			errs = append(errs, fmt.Errorf("%s %v: %w", count, x, errValue))
			if strings.HasPrefix(count, "feature_") {
				bad = true // (a feature's count left out: its state does not hang together)
			}
			continue
		}
		n := uint64(math.Round(x))
		switch count {
		case countArrived:
			p.counts.Arrived, p.hasArrivals = n, true
		case countCompleted:
			p.counts.Completed = n
		case countFailed:
			p.counts.Failed = n
		case countGood:
			p.counts.Good = n
		case countWaited:
			p.counts.Waited = n
		case countRejected:
			if r, ok := reasonNamed(string(smp.Metric["reason"])); ok {
				p.counts.Rejected[r] += n
			} // (a reason this version does not know)
		case countWorkN, countWorkS, countWorkQ:
			work.set(count, x)
		case countFeatureN, countFeatureS, countFeatureQ:
			feature := string(smp.Metric["feature"])
			if err := signals.CheckFeature(feature); err != nil {
				errs = append(errs, fmt.Errorf("feature %q: %s", truncate(feature), strings.TrimPrefix(err.Error(), "signals: ")))
				continue
			}
			st := features[feature]
			if st == nil {
				if len(features) >= signals.MaxFeatures {
					if !tooMany {
						errs = append(errs, fmt.Errorf("more than %d features: a Recorder tallies at most %d (select one service's instances)", signals.MaxFeatures, signals.MaxFeatures))
					}
					tooMany, bad = true, true // (which 64 would be the answer's order's)
					continue
				}
				st = &state{}
				features[feature] = st
			}
			switch smp.Metric["state"] {
			case "on":
				st.on.set(count, x)
			case "off":
				st.off.set(count, x)
			case "unattributed":
				if count == countFeatureN {
					unattributed[feature] = x
				}
			} // (a state this version does not know)
		}
	}
	tallies := make([]signals.Tally, 0, len(features))
	for name, st := range features {
		for _, r := range []struct {
			state string
			m     rawMoments
		}{{"on", st.on}, {"off", st.off}} {
			// A state the fleet never counted has no series; one with
			// some of its three counts is broken.
			if r.m.fams != 0 && r.m.fams != famAll || r.m.n < 0.5 && (r.m.sum > 0 || r.m.sq > 0) {
				errs = append(errs, fmt.Errorf("feature %q, state %s: its requests, service time and squares do not hang together", name, r.state))
				bad = true
			}
		}
		tallies = append(tallies, signals.Tally{Feature: name, On: st.on.moments(), Off: st.off.moments(), Unattributed: int64(math.Round(unattributed[name]))})
	}
	if work.fams != 0 && work.fams != famAll || work.n < 0.5 && (work.sum > 0 || work.sq > 0) {
		errs = append(errs, errors.New("the work's requests, time and squares do not hang together"))
		bad = true
	}
	if !bad && len(tallies) > 0 {
		slices.SortFunc(tallies, func(a, b signals.Tally) int { return strings.Compare(a.Feature, b.Feature) })
		p.tallies = tallies
		if work.fams == famAll {
			p.work = work.moments()
		}
	} else if !bad {
		p.work = work.moments()
	}
	return p, errors.Join(errs...)
}
