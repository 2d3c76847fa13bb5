package fleet

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/brownout/brownout/signals"
)

// The fleet computation, shared by ScrapeSource and PushSource: both keep,
// per instance, the readings of the last Window (a reading is a scrape of
// the instance's /metrics or a push of the same numbers), and a Snapshot
// sums them over the instances that are alive.

// reading is what one instance said at one time.
type reading struct {
	// at is when the source read or received it, by the source's clock.
	at time.Time
	// clock is the instance's own time of the reading and run the start of
	// the run that made it (pushes that carry them; zero otherwise).
	// Within one run the instance's clock times its counts better than
	// arrival does (a stalled receiver bunches arrivals up).
	clock, run time.Time
	st         targetState
}

// series is the recent readings of one instance, oldest first: the newest
// reading at or before a Window before the latest, and every one after.
type series []reading

// add appends r and drops the readings no window ending at r needs.
func (s *series) add(r reading, window time.Duration) {
	h := *s
	cut := r.at.Add(-window)
	keep := 0
	for i, e := range h {
		if !e.at.After(cut) {
			keep = i
		}
	}
	*s = append(slices.Delete(h, 0, keep), r)
}

// thin drops readings from the inside of the series until it holds at
// most maxReads readings and maxBuckets histogram buckets. The oldest
// (the window's base) and the newest stay; of the others, the one whose
// neighbours are closest in time goes first, so that what is left spreads
// evenly over the window. Counts are cumulative, so a dropped reading
// loses nothing but a choice of base: the window's base may be a little
// older than Window (by at most the widest gap left), and rates divide by
// the time actually elapsed.
func (s *series) thin(maxReads, maxBuckets int) {
	h := *s
	total := 0
	for i := range h {
		total += h[i].st.buckets()
	}
	for len(h) > 2 && (len(h) > maxReads || total > maxBuckets) {
		drop, gap := 1, h[2].at.Sub(h[0].at)
		for i := 2; i < len(h)-1; i++ {
			if g := h[i+1].at.Sub(h[i-1].at); g < gap {
				drop, gap = i, g
			}
		}
		total -= h[drop].st.buckets()
		h = slices.Delete(h, drop, drop+1)
	}
	*s = h
}

// buckets is how many histogram buckets st keeps, classic and native: the
// measure of what a reading costs in memory (about 35 bytes a bucket).
func (st *targetState) buckets() int {
	return len(st.latency.classic) + len(st.latency.pos) + len(st.sojourn.classic) + len(st.sojourn.pos)
}

// elapsed returns the seconds between two readings of one instance: by the
// instance's clock when both come from the same run and carry it, else by
// the source's.
func elapsed(base, last reading) float64 {
	if !base.clock.IsZero() && last.clock.After(base.clock) && base.run.Equal(last.run) {
		return last.clock.Sub(base.clock).Seconds()
	}
	return last.at.Sub(base.at).Seconds()
}

// aggregate sums the signals of a fleet's instances into one Snapshot.
//
// Gauges (in flight, the gate, the minimum sojourn, standing queues) come
// from each instance's latest reading: in flight and the gate are summed,
// the minimum sojourn is the worst instance's, a queue stands if it stands
// anywhere. Counts and histograms are cumulative, so each instance
// contributes the difference between its latest reading and the oldest of
// its series (a Window before). A count that went down means the instance
// restarted, and as in Prometheus that is a reset, not a negative
// increase: the instance's new counts are its increase (for histograms:
// when any bucket or the sum went down, or the bucket layout changed).
// What the old process counted within the window is lost, so its rates
// read low for one Window after a restart. Quantiles are
// computed from the summed buckets — p99s cannot be averaged — native
// buckets when every instance has them, else classic ones with linear
// interpolation, as PromQL's histogram_quantile. Rates divide each
// instance's increase by its own elapsed time. An instance with a single
// reading gives only its gauges.
//
// gate.busy is computed from the latest two readings, not the window: the
// controller needs to know that the gate has room now (as Recorder does);
// so is Recent, the fleet's latest period (each instance's counts between
// its latest two readings, summed), which the model law reads as the
// period's arrivals.
type aggregate struct {
	snap                                 *signals.Snapshot
	errs                                 []error
	lat, soj                             hist
	latOK, sojOK                         bool
	rates                                [4]float64 // arrival, throughput, goodput, reject
	failed, completed, overload, arrived float64
	noRoom, atGate                       float64
	// arrSq: the instances' arrival rates over the window, squared and
	// summed (Snapshot.Instances; rates[0] is their sum).
	arrSq  float64
	gate   signals.GateReading
	gateOK bool
	// recent is each instance's counts over its latest interval (between
	// its last two readings), and that interval's length.
	recent []interval
}

// interval is an instance's counts over el seconds.
type interval struct {
	counts signals.ClassCounts
	el     float64
	at     time.Time // when the interval ended (its reading's arrival)
}

// add takes one instance's series; name starts its errors ("scrape
// http://…", "push shop-1").
func (f *aggregate) add(name string, s series) {
	if len(s) == 0 {
		return
	}
	snap := f.snap
	last := s[len(s)-1]
	st := last.st
	if st.hasInFlight {
		setSum(snap, signals.InFlight, st.inFlight)
	}
	if st.hasSojMin {
		setMax(snap, signals.SojournMin, st.sojournMin)
	}
	if st.hasGate {
		f.gate.Limit += st.gate.Limit
		f.gate.InFlight += st.gate.InFlight
		f.gate.Queued += st.gate.Queued
		f.gateOK = true
	}
	snap.Standing = snap.Standing || st.standing
	if len(s) < 2 {
		return // first reading: no difference yet
	}
	// A family absent from an earlier reading had not been created yet
	// (client_golang vectors appear lazily): its base is zero.
	base, prev := s[0], s[len(s)-2]
	if st.hasClasses {
		// A restart between the two readings (a new run, or any count
		// that went down): the new run's counts are the increase.
		restarted := !prev.run.Equal(last.run)
		for c := range st.classes {
			restarted = restarted || !covers(st.classes[c], prev.st.classes[c])
		}
		var sum signals.ClassCounts
		for c := range st.classes {
			d := st.classes[c]
			if !restarted {
				d = d.Sub(prev.st.classes[c])
			}
			if st.hasGate && (restarted || prev.st.hasGate) {
				// (An instance without a gate — the middleware alone, or
				// behind another limiter — found no gate full; nor did
				// one whose gate appeared within the interval: its
				// refusals before were another limiter's.)
				f.noRoom += float64(d.NoRoom())
				f.atGate += float64(d.AtGate())
			}
			sum.Merge(d)
		}
		if el := elapsed(prev, last); el > 0 {
			f.recent = append(f.recent, interval{sum, el, last.at})
		}
	}
	if st.hasLat {
		if err := mergeDelta(&f.lat, st.latency, base.st.latency); err != nil {
			f.errs = append(f.errs, fmt.Errorf("fleet: %s: %s: %w", name, signals.MetricLatency, err))
		} else {
			f.latOK = true
		}
	}
	if st.hasSoj {
		if err := mergeDelta(&f.soj, st.sojourn, base.st.sojourn); err != nil {
			f.errs = append(f.errs, fmt.Errorf("fleet: %s: %s: %w", name, signals.MetricSojourn, err))
		} else {
			f.sojOK = true
		}
	}
	if el := elapsed(base, last); st.hasClasses && el > 0 {
		snap.ClassesOK = true
		arrWas := f.rates[0]
		for c := range st.classes {
			d := st.classes[c]
			if d.Arrived >= base.st.classes[c].Arrived && d.Completed >= base.st.classes[c].Completed {
				d = d.Sub(base.st.classes[c])
			} // else the instance restarted: its counts are the increase
			snap.Classes[c].Merge(d)
			f.rates[0] += float64(d.Arrived) / el
			f.rates[1] += float64(d.Completed) / el
			f.rates[2] += float64(d.Good) / el
			f.rates[3] += float64(d.RejectedTotal()) / el
			f.failed += float64(d.Failed)
			f.completed += float64(d.Completed)
			f.overload += float64(d.Overload())
			f.arrived += float64(d.Arrived)
		}
		arr := f.rates[0] - arrWas // this instance's arrival rate
		f.arrSq += arr * arr
	}
}

// finish sets the signals computed from the sums.
func (f *aggregate) finish() {
	snap := f.snap
	if f.latOK {
		setQuantiles(snap, f.lat, signals.LatencyP50, signals.LatencyP90, signals.LatencyP99, signals.LatencyP999)
		if f.lat.count > 0 {
			snap.Set(signals.LatencyMean, f.lat.sum/f.lat.count)
		}
	}
	if f.sojOK {
		if v, ok := f.soj.quantile(0.99); ok {
			snap.Set(signals.SojournP99, v)
		}
	}
	if snap.ClassesOK {
		for i, k := range []signals.Key{signals.ArrivalRate, signals.Throughput, signals.Goodput, signals.RejectRate} {
			snap.Set(k, f.rates[i])
		}
		if f.completed > 0 {
			snap.Set(signals.ErrorRatio, f.failed/f.completed)
		}
		if f.arrived > 0 {
			snap.Set(signals.RejectRatio, f.overload/f.arrived)
		}
		if f.atGate > 0 {
			snap.Set(signals.GateBusy, min(f.noRoom/f.atGate, 1))
		}
		if f.arrSq > 0 {
			snap.Instances = f.rates[0] * f.rates[0] / f.arrSq
		}
	}
	if len(f.recent) > 0 {
		// What the fleet's latest period brought: each instance's latest
		// interval, brought to the intervals' mean length (its counts
		// times the mean over its own length: instances that push on
		// different periods add their rates, not their counts), summed.
		var span float64
		for _, in := range f.recent {
			span += in.el
		}
		span /= float64(len(f.recent))
		for _, in := range f.recent {
			snap.Recent.Merge(scaleCounts(in.counts, span/in.el))
			if in.at.After(snap.RecentAt) {
				snap.RecentAt = in.at // a new interval of any instance makes a new one of the fleet's
			}
		}
		snap.RecentSpan = time.Duration(span * float64(time.Second))
	}
	if f.gateOK {
		snap.Set(signals.GateLimit, f.gate.Limit)
		snap.Set(signals.GateQueued, float64(f.gate.Queued))
		if f.gate.Limit > 0 {
			snap.Set(signals.GateUtilization, f.gate.InFlight/f.gate.Limit)
		}
	}
}

// covers reports whether every count of c is at least o's: c may be a
// later reading of the same counters.
func covers(c, o signals.ClassCounts) bool {
	if c.Arrived < o.Arrived || c.Completed < o.Completed || c.Failed < o.Failed || c.Good < o.Good || c.Waited < o.Waited {
		return false
	}
	for i := range c.Rejected {
		if c.Rejected[i] < o.Rejected[i] {
			return false
		}
	}
	return true
}

func setSum(s *signals.Snapshot, k signals.Key, v float64) {
	old, _ := s.Get(k)
	s.Set(k, old+v)
}

func setMax(s *signals.Snapshot, k signals.Key, v float64) {
	if old, ok := s.Get(k); !ok || v > old {
		s.Set(k, v)
	}
}

func setQuantiles(s *signals.Snapshot, h hist, keys ...signals.Key) {
	for i, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		if v, ok := h.quantile(q); ok {
			s.Set(keys[i], v)
		}
	}
}

func mergeDelta(into *hist, cur, old hist) error {
	d, ok := cur.sub(old)
	if !ok {
		d = cur // restarted, or its buckets changed: its counts since then
	}
	return into.add(d)
}

// scaleCounts returns c's counts times f, rounded.
func scaleCounts(c signals.ClassCounts, f float64) signals.ClassCounts {
	if f == 1 {
		return c
	}
	sc := func(n uint64) uint64 { return uint64(math.Round(float64(n) * f)) }
	out := signals.ClassCounts{Arrived: sc(c.Arrived), Completed: sc(c.Completed), Failed: sc(c.Failed), Good: sc(c.Good), Waited: sc(c.Waited)}
	for i, r := range c.Rejected {
		out.Rejected[i] = sc(r)
	}
	return out
}
