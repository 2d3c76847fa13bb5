package gate

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// LimitConfig configures the adaptive concurrency limit, in cost units in
// flight. The zero value is adaptive from 8, between 1 and 1000, holding
// where latency is 1.6 × what it is at half the limit, re-measured about
// every 5 s.
//
// # Model
//
// The bottleneck behind the gate is hidden: a pool of W workers or
// database connections, a downstream. Below it, admitting more work raises
// throughput and leaves latency alone; past it, more work only waits
// inside the app (latency grows with the limit, throughput does not). The
// limit looks for that knee by comparing latency at the limit with latency
// at half the limit:
//
//	ratio = R(L) / R(L/2)          seconds per cost unit, admission to end
//
// (each with 100 µs added: differences of microseconds are the
// scheduler's noise, not a queue)
//
// A probe measures the baseline R(L/2): for a moment the gate admits only
// L/2, and the first L tickets admitted then (48 to 128; 16 at a cold
// start) are waited for — all of them, since the first to finish would be
// the shortest jobs (at the probe's time limit, those still running count
// with the time they have run) — with each sample capped at 4 baselines so
// that a few long jobs cannot swing it; the baseline moves halfway (in log
// space) to each probe's result.
// A probe that makes requests wait which the load alone would not — no
// class over capacity, and one request has waited half its class's
// MaxWait — ends at once with the part of its cohort it has: half the
// limit is under the knee (the limit settles near 1.6 × it), so at a load
// within capacity a probe's whole cost is the queue it builds.
// Probes run every ProbeEvery (±25 %, and at most 5 % of the time), and
// sooner (at least 1 s apart) while the baseline is unsettled, when the
// limit has moved more than 20 % from where the baseline was measured, or
// when the ratio jumps out of [1/Tolerance, 2·Tolerance]. Between probes,
// windows of twice the limit in completions (16 to 256) and at least two
// latencies measure R(L), and the limit moves multiplicatively towards the
// ratio Tolerance:
//
//	ratio > Tolerance, L in use:    L ← L · max(1 − 0.3(1 − Tolerance/ratio), ½)
//	ratio < 1.15, in use, twice:    L ← 1.5 L   (far below the knee)
//	ratio < Tolerance, L in use:    L ← L · min(1 + 0.3(Tolerance/ratio − 1), 1.5)
//	otherwise:                      hold
//
// For W workers the ratio is 1 while L ≤ W and L/W above it (Little's law:
// the extra work queues inside), so the limit settles near Tolerance × W.
// For a database whose service time grows with concurrency (the universal
// scalability law), the ratio at the throughput peak N* is about 1.6–1.8
// for moderate contention, so the limit settles near N*. The ratio is
// Little's law read both ways: X(L)/X(L/2) = 2/ratio, so Tolerance 1.6
// means "grow while doubling the work in flight still adds at least 25 %
// throughput". From below, the ratio is 1 and says so at once; from above,
// a baseline measured past the knee is itself queueing, and only probes at
// a lower limit correct it, a fifth at a time (halving at a cold start).
//
// Why a baseline measured at half the limit, and not a long-run average
// (Netflix's Gradient2, failsafe-go's adaptive limiter) or the minimum
// ever seen (Vegas): a long-run average of latency under sustained
// queueing becomes that queueing, and the limit drifts up without end —
// worst when clients time out and every sample is the client timeout; the
// minimum ever seen is stale after the service gets slower. A baseline
// re-measured at half the limit cannot be dragged up by queueing (at L/2
// below the knee nothing queues), follows a slower or faster service within
// a probe or two, and reads a slow dependency (latency that does not
// depend on concurrency: ratio 1) as no reason to refuse.
//
// A cold start begins at Initial (8) and measures the baseline first;
// while latency about doubles between L/2 and L (the limit is far above the
// knee) it halves, while latency stays flat it grows by half per window,
// and it ends when latency rises near the knee. Until then the gate
// neither refuses on estimated waits nor runs CoDel: a queue that the
// growing limit is about to drain is not an overload.
//
// The limit moves, and probes run, only while it is in use (an arrival
// found no room in this window or the one before): an idle service learns
// nothing about its capacity, and a baseline measured before the work got
// dearer (the dimmer brightened) must not shrink a limit nobody reaches.
type LimitConfig struct {
	// Initial limit. Default 8 (see the cold start above).
	Initial float64
	// Min and Max bound the limit. Default 1 and 1000.
	Min, Max float64
	// Tolerance is the latency ratio R(L)/R(L/2) at which the limit holds,
	// above 1 and below 2. Default 1.6.
	Tolerance float64
	// ProbeEvery is the time between probes of the baseline (±25 %; at
	// most 5 % of the time is spent probing). Default 5 s.
	ProbeEvery time.Duration
	// Fixed turns adaptation off: the limit stays at Initial.
	Fixed bool
}

func (c LimitConfig) withDefaults() LimitConfig {
	if c.Initial <= 0 {
		c.Initial = 8
	}
	if c.Min <= 0 {
		c.Min = 1
	}
	if c.Max <= 0 {
		c.Max = 1000
	}
	c.Max = max(c.Max, c.Min)
	if !(c.Tolerance > 1 && c.Tolerance < 2) {
		c.Tolerance = 1.6
	}
	if c.ProbeEvery <= 0 {
		c.ProbeEvery = 5 * time.Second
	}
	c.Initial = min(max(c.Initial, c.Min), c.Max)
	return c
}

const (
	windowMin    = 16  // completions per window: twice the limit, within these bounds…
	windowMax    = 256 //
	windowRTTs   = 2   // …and this many latencies, so that a change shows
	cohortMin    = 48  // tickets a probe admits and waits for: the limit, within
	cohortMax    = 128 // these bounds (two rounds of half the limit)…
	probeMinimum = 6   // …or, at its time limit, this many of them
	capRTTs      = 4   // a cohort sample counts at most this many baselines
	probeMax     = time.Second
	probeMaxRTTs = 8           // the time limit: probeMax or this many latencies
	probeDuty    = 20          // probes take at most 1/probeDuty of the time
	probeDefer   = 1           // a probe waits out a critical queue at most this many ProbeEvery since the last
	maxGrow      = 1.5         // the most a window grows the limit, which it does
	flat         = 1.15        // with a ratio under this twice running or at a cold start,
	coldMin      = 4           // whose windows need only this many completions
	minTrigger   = time.Second // between probes triggered by a jump
	drift        = 1.2         // the limit this far from the baseline's: probe again…
	nearKnee     = 1.25        // …upwards only with latency this much above the baseline
	halving      = 1.8         // at a cold start, a probe ratio this near 2: halve…
	keptAbove    = 0.75        // …if the probe kept this share of the throughput
	coldCohort   = 16          // a cold start's probes admit at least this many
	// slack is added to both latencies of the ratio (seconds per cost
	// unit): a difference of a few microseconds between L and L/2 is the
	// scheduler's noise, not queueing — without it a handler of a few µs
	// reads ratios of 5–10 from noise alone and the limit collapses to 1 —
	// while on millisecond work it moves the ratio by a few per cent.
	slack = 100e-6
)

// ratioOf is the latency ratio a/b with slack added to both.
func ratioOf(a, b float64) float64 { return (a + slack) / (b + slack) }

// gain is the share of the way to the ratio's target a window moves the
// limit.
const gain = 0.3

// outside marks a ticket admitted during a probe but not in its cohort:
// odd, and never a probe's phase in practice.
const outside = math.MaxUint32

// acc accumulates completions lock-free.
type acc struct {
	n    atomic.Int64
	lat  atomic.Int64 // nanoseconds
	cost atomic.Int64 // micro-units
}

func (a *acc) add(lat time.Duration, cost int64) {
	a.lat.Add(int64(lat))
	a.cost.Add(cost)
	a.n.Add(1)
}

// take empties a and returns seconds per cost unit and the count.
func (a *acc) take() (per float64, n int64) {
	n, lat, cost := a.n.Swap(0), a.lat.Swap(0), a.cost.Swap(0)
	if n == 0 || cost <= 0 {
		return 0, n
	}
	return float64(lat) / 1e9 / (float64(cost) / 1e6), n
}

// limiter is the adaptive limit. Releases record completions lock-free;
// update runs under the gate owner's serialization.
type limiter struct {
	cfg LimitConfig

	// Lock-free: read and written by admissions and releases.
	adm         atomic.Int64  // admission limit in micro-units (half the limit while probing)
	phase       atomic.Uint32 // even: normal; odd: probing. Tickets carry it.
	full        atomic.Bool   // an arrival found no room since the last update
	warm        atomic.Bool   // recent holds a measurement
	peak        atomic.Int64  // most cost in flight at a release since the last update
	due         atomic.Int64  // unix ns: the earliest next update
	completed   atomic.Int64  // micro-units completed, ever
	win         acc           // completions admitted at the limit
	probe       acc           // completions of the current probe's cohort
	cohort      atomic.Int64  // tickets admitted during the current probe
	cohortT     atomic.Int64  // Σ admission times (unix ns) of the cohort…
	cohortC     atomic.Int64  // …and Σ costs (micro-units)
	cohortFirst atomic.Int64  // unix ns: the cohort's first admission
	doneT       atomic.Int64  // Σ admission times of the cohort members done
	cohortSize  atomic.Int64  // the current probe's cohort
	cap         atomic.Int64  // nanoseconds per cost unit a cohort sample counts at most; 0: none
	winN        atomic.Int64  // completions a window needs

	// Serialized.
	limit       float64 // outside probes
	base        float64 // seconds per cost unit at half the limit; 0: none yet
	recent      float64 // seconds per cost unit at the limit; 0: none yet
	ratio       float64 // the last window's recent/base
	external    bool    // the limit is set from outside (SetLimit)
	critical    bool    // critical requests within capacity wait at the gate (set by the gate before update)
	hurts       bool    // a probe now makes requests wait that the load alone would not (set by the gate before update)
	costly      bool    // the last probe kept less than keptAbove of the throughput
	settle      bool    // the next window is the refill after a probe: discard it
	cold        bool    // no sign of the knee yet: slow start
	flatRun     int     // windows in a row with flat latency and the limit in use
	kneeRun     int     // windows in a row with latency near the knee
	windows     int     // windows since the last probe
	last        float64 // the last window's seconds per cost unit
	reprobe     bool    // a cold start halved: probe again
	highRun     int     // cold start: windows in a row at about twice the baseline
	prevFull    bool    // the window before this one found the limit in use
	baseAt      float64 // the limit whose half the baseline was measured at
	probing     bool
	probeStart  time.Time
	nextProbe   time.Time
	lastProbe   time.Time
	dutyUntil   time.Time // no probe before: probes cost at most 1/probeDuty of the throughput
	doneAt      int64     // completed at the last probe's start or end, micro-units
	winDone     int64     // completed at the start of this window, micro-units
	lastX       float64   // cost units per second completed in the last window at the limit
	probeX      float64   // …and during the last probe, at half the limit
	between     float64   // cost units per second completed between the last two probes
	windowStart time.Time
	rng         uint64
}

func newLimiter(cfg LimitConfig) *limiter {
	cfg = cfg.withDefaults()
	// The first window is discarded (settle): the first completions of a
	// fresh process are its shortest requests.
	l := &limiter{cfg: cfg, rng: 0x9e3779b97f4a7c15, cold: !cfg.Fixed, settle: true}
	l.set(cfg.Initial)
	return l
}

// record takes one completion of t at now; cur is the cost in flight just
// before t's release. It is safe for concurrent use and reports whether an
// update is due.
func (l *limiter) record(t *Ticket, now time.Time, cur int64) bool {
	l.completed.Add(micro(t.Cost))
	lat := max(now.Sub(t.Start), 0)
	switch {
	case t.phase&1 == 0:
		l.win.add(lat, micro(t.Cost))
	case t.phase == l.phase.Load():
		// A few long jobs would swing a cohort's mean: each counts at
		// most capRTTs baselines.
		if c := l.cap.Load(); c > 0 {
			lat = min(lat, time.Duration(float64(c)*t.Cost))
		}
		l.probe.add(lat, micro(t.Cost))
		l.doneT.Add(t.Start.UnixNano())
	}
	for {
		p := l.peak.Load()
		if cur <= p || l.peak.CompareAndSwap(p, cur) {
			break
		}
	}
	return l.isDue(now)
}

// isDue reports whether update has something to do at now.
func (l *limiter) isDue(now time.Time) bool {
	if now.UnixNano() < l.due.Load() {
		return false
	}
	if l.phase.Load()&1 == 1 {
		return true // the probe's deadline, or its samples, decide in update
	}
	return l.win.n.Load() >= l.winN.Load() || (!l.warm.Load() && l.win.n.Load() > 0)
}

// unit returns the measured seconds per cost unit at the limit, or 0.
func (l *limiter) unit() float64 { return l.recent }

// update moves the limit at now. Callers serialize it.
func (l *limiter) update(now time.Time) {
	if !l.warm.Load() {
		// The first completions: a first estimate of the service time, for
		// the gate's wait estimates; the limit moves on full windows.
		if per, _ := l.win.take(); per > 0 {
			l.recent = per
			l.warm.Store(true)
			l.windowStart = now
		}
		return
	}
	if l.cfg.Fixed {
		if per, _ := l.win.take(); per > 0 {
			l.recent = smooth(l.recent, per)
		}
		return
	}
	if l.probing {
		l.endProbe(now)
		return
	}
	if l.windowStart.IsZero() {
		l.windowStart = now
	}
	if l.win.n.Load() < l.winN.Load() || now.Sub(l.windowStart) < time.Duration(windowRTTs*l.recent*float64(time.Second)) {
		l.due.Store(now.Add(time.Millisecond).UnixNano())
		return
	}
	per, _ := l.win.take()
	full, peak := l.full.Swap(false), float64(l.peak.Swap(0))/1e6
	done, el := l.completed.Load(), now.Sub(l.windowStart).Seconds()
	l.windowStart = now
	if per <= 0 {
		return
	}
	if l.settle {
		l.settle = false // the work in flight was still coming back from half
		l.winDone = done
		return
	}
	l.recent = smooth(l.recent, per)
	l.last = per
	if el > 0 && l.winDone > 0 {
		l.lastX = float64(done-l.winDone) / 1e6 / el
	}
	l.winDone = done
	l.windows++
	if l.external {
		return
	}
	if l.base <= 0 || l.reprobe {
		// No baseline yet, or a cold start that just halved: measure it
		// at half the limit once R(L) has been seen twice.
		if l.windows >= 2 {
			l.startProbe(now)
		}
		return
	}
	tol := l.cfg.Tolerance
	l.ratio = ratioOf(per, l.base)
	switch {
	case l.cold && l.ratio >= halving:
		// A cold start above the knee: latency about doubled since half
		// the limit, twice running, puts both past it — if the throughput
		// at half the limit was about as high as at the limit (see
		// endProbe); halve, and measure again after two windows. If it
		// was not, the baseline is stale: measure it again now.
		if l.highRun++; l.highRun >= 2 {
			l.highRun, l.kneeRun = 0, 0
			if l.probeX > 0 && l.lastX > 0 && l.probeX/l.lastX >= keptAbove {
				l.set(l.limit / 2)
				l.reprobe, l.windows = true, 0
			} else {
				l.startProbe(now)
			}
			return
		}
	case l.ratio > nearKnee:
		l.highRun = 0
		if l.kneeRun++; l.kneeRun >= 2 {
			l.cold = false // the knee is near, twice running: slow start is over
		}
	default:
		l.highRun, l.kneeRun = 0, 0
	}
	next := l.limit
	used := full || l.prevFull
	switch {
	case l.ratio > tol && used:
		// Work queues inside the app: move the queue to the gate, where
		// it is ordered by priority and bounded in time. Only while the
		// limit is in use: below it, a high ratio is as likely a stale
		// baseline (the work got dearer per cost unit — the dimmer turned
		// features back on — since the last probe, and probes wait for
		// the limit to be in use), and a real knee below the work in
		// flight fills the limit within a window or two anyway.
		next = l.limit * max(1-gain*(1-tol/l.ratio), 0.5)
	case full && l.ratio < flat && (l.cold || l.flatRun > 0):
		// Latency flat with the limit in use, at a cold start or two
		// windows running (capacity came back): far below the knee. Grow
		// by half, a slow start.
		next = l.limit * maxGrow
	case full:
		next = l.limit * min(1+gain*(tol/l.ratio-1), maxGrow)
	}
	if full && l.ratio < flat {
		l.flatRun++
	} else {
		l.flatRun = 0
	}
	l.set(next)
	if Trace != nil {
		Trace(now, fmt.Sprintf("window full=%v peak=%.1f", full, peak), l.limit, l.ratio, l.base, per)
	}
	// Probe early when the ratio jumps, or when the limit has left the
	// baseline's neighbourhood: downwards, or upwards near the knee (far
	// below it, latency is flat and a probe tells nothing new).
	jump := l.ratio > 2*tol || l.ratio < 1/tol || l.limit < l.baseAt/drift ||
		(l.limit > drift*l.baseAt && l.ratio > nearKnee)
	// Only while the limit is in use (this window or the one before): a
	// probe halves what the gate admits, which a load near capacity but
	// under the limit would feel as an overload, and with the limit
	// unused there is nothing to decide.
	l.prevFull = full
	// Nor, when the last probe cost throughput (it kept less than
	// keptAbove of it: half the limit is under the knee, as with two
	// workers), while critical requests wait and critical work is within
	// capacity, for up to probeDefer periods since the last probe: the
	// probe's cost would fall on critical requests the server can serve,
	// and a baseline a few probes old costs less than their refusal. Not
	// when critical work is over capacity: then the limit may be what is
	// wrong (the bottleneck lost workers), and a probe finds out.
	waitOut := l.critical && l.costly && !l.cold && now.Sub(l.lastProbe) < probeDefer*l.cfg.ProbeEvery
	if used && !waitOut && (!now.Before(l.nextProbe) || (jump && now.Sub(l.lastProbe) >= minTrigger && !now.Before(l.dutyUntil))) {
		l.startProbe(now)
	}
}

// set clamps and publishes the limit.
func (l *limiter) set(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	l.limit = min(max(v, l.cfg.Min), l.cfg.Max)
	lo := float64(windowMin)
	if l.cold {
		lo = coldMin // slow start: small windows, fast growth
	}
	l.winN.Store(int64(min(max(math.Round(2*l.limit), lo), windowMax)))
	if !l.probing {
		l.adm.Store(micro(l.limit))
	}
}

// startProbe admits half the limit until endProbe.
func (l *limiter) startProbe(now time.Time) {
	done := l.completed.Load()
	if el := now.Sub(l.lastProbe).Seconds(); !l.lastProbe.IsZero() && el > 0 {
		l.between = float64(done-l.doneAt) / 1e6 / el
	}
	l.doneAt = done
	l.probing, l.probeStart = true, now
	l.probe.take()
	l.cohort.Store(0)
	l.cohortT.Store(0)
	l.cohortFirst.Store(0)
	l.cohortC.Store(0)
	l.doneT.Store(0)
	lo := float64(cohortMin)
	if l.cold {
		lo = coldCohort // telling 1 from 2 takes fewer samples than telling 1.5 from 1.6
	}
	l.cohortSize.Store(int64(min(max(math.Round(l.limit), lo), cohortMax)))
	l.phase.Add(1) // odd: tickets admitted from now on are the probe's
	l.adm.Store(micro(max(l.limit/2, min(l.cfg.Min, l.limit))))
	l.due.Store(now.UnixNano())
}

// cohortLatency takes the probe's cohort: seconds per cost unit, counting
// the members still running at now with the time they have run so far —
// at the time limit, leaving them out would keep only the shortest jobs.
// whole reports that every member was done; when not, per is a lower
// bound of the cohort's latency.
func (l *limiter) cohortLatency(now time.Time) (per float64, n int64, whole bool) {
	admitted := min(l.cohort.Load(), l.cohortSize.Load())
	sumT, sumC, doneT := l.cohortT.Load(), l.cohortC.Load(), l.doneT.Load()
	done, lat, cost := l.probe.n.Swap(0), l.probe.lat.Swap(0), l.probe.cost.Swap(0)
	running := admitted - done
	if running > 0 {
		lat += running*now.UnixNano() - (sumT - doneT)
		cost = max(sumC, cost)
	}
	if admitted == 0 || cost <= 0 {
		return 0, 0, false
	}
	return float64(lat) / 1e9 / (float64(cost) / 1e6), admitted, running <= 0
}

// endProbe ends the probe when its cohort is done or its time is up, and
// takes the cohort's latency as the baseline. The cohort is the first
// cohortSize tickets admitted at half the limit, all of them waited for:
// the first completions alone would be the shortest jobs.
func (l *limiter) endProbe(now time.Time) {
	el := now.Sub(l.probeStart)
	n := l.probe.n.Load()
	limit := max(probeMax, time.Duration(probeMaxRTTs*max(l.recent, l.base)*float64(time.Second)))
	if n < l.cohortSize.Load() && el < limit && !l.hurts {
		l.due.Store(now.Add(time.Millisecond).UnixNano())
		return
	}
	// A probe that hurts (see Gate.probeHurts) ends at once, with the
	// part of its cohort it has: enough of it is a baseline like any
	// other, too little leaves the old one.
	// When to look again: after ProbeEvery, or sooner while the baseline
	// is not settled.
	soon := time.Duration(-1)
	l.reprobe = false
	// The share of the throughput that the probe kept: against the
	// higher of the last window's and the whole time since the last
	// probe's (the bar a halving must pass), and against the latter alone
	// (the less noisy measure of what a probe costs). 1 when not known.
	// The probe's throughput is its cohort's: the cohort's cost done over
	// the time since its first admission — not every completion during the
	// probe, which counts the work admitted at the full limit draining
	// out and reads a short probe's throughput as high as the limit's.
	done, kept, cost := l.completed.Load(), 1.0, 1.0
	if first := l.cohortFirst.Load(); first > 0 && now.UnixNano() > first {
		l.probeX = float64(l.probe.cost.Load()) / 1e6 / time.Duration(now.UnixNano()-first).Seconds()
		if ref := max(l.lastX, l.between); ref > 0 {
			kept = l.probeX / ref
		}
		if l.between > 0 {
			cost = l.probeX / l.between
		}
	}
	per, members, whole := l.cohortLatency(now)
	if !whole && l.base > 0 && !l.cold && per < l.base {
		// A cohort cut short — by a probe that hurt, or at its time
		// limit — counts its members still running with the time they
		// have run so far: a lower bound of its latency. Over the
		// baseline it may raise it; under it, it tells nothing, and the
		// baseline stays as it is (the next probe comes as after any
		// other). Taken as a measure, a probe that hurt a few
		// milliseconds after its last admissions read its cohort at a
		// third of the service time; the baseline moved half way there,
		// every window at the limit read a ratio of 2–3 against it, and
		// the limit fell from 20 to 1 under eight workers within two
		// seconds. (The price: near the capacity, where probes hurt, the
		// baseline follows a faster service only through whole cohorts;
		// see docs/gate.md, "A probe cut short".)
		per = 0
	}
	if members >= probeMinimum && per > 0 {
		// At a cold start, compare with the last window at the limit:
		// latency about doubled between L/2 and L puts both past the
		// knee; somewhat higher puts the knee between them. Little's law
		// read the other way checks it: past the knee, halving what is
		// admitted keeps the throughput (X(L/2)/X(L) = ratio/2, about
		// 0.9); a probe that kept less than keptAbove of the throughput
		// between probes ran below the knee, whatever one cohort's
		// latency says (a cohort of 16 exponential jobs, or one whose
		// cost was estimated before the dimmer turned features off, read
		// ratios over 1.8 at the knee, and halvings took a limit from 16
		// to 1 under two workers within half a second).
		ratio := ratioOf(l.last, per)
		coldHalve := l.cold && !l.external && l.last > 0 && ratio >= halving && kept >= keptAbove
		if l.cold && !coldHalve && l.last > 0 && ratio > nearKnee {
			l.cold = false
		}
		// Otherwise the baseline moves halfway in log space: one noisy
		// cohort moves it by at most the square root of its error, and a
		// new regime (the service got slower or faster) is followed
		// within two probes.
		if l.base <= 0 || l.cold || coldHalve {
			l.base, soon = per, minTrigger // a first look: confirm it soon
		} else {
			if per > 1.25*l.base || per < l.base/1.25 {
				soon = minTrigger
			}
			l.base = math.Sqrt(l.base * per)
		}
		l.cap.Store(int64(capRTTs * l.base * 1e9))
		l.baseAt = l.limit
		if coldHalve {
			// A cold start above the knee: halve, and measure again at
			// once (after two windows at the new limit).
			l.set(l.limit / 2)
			l.reprobe = true
		}
	}
	if Trace != nil {
		Trace(now, fmt.Sprintf("probe end n=%d el=%v kept=%.2f cost=%.2f px=%.0f lx=%.0f btw=%.0f", n, el, kept, cost, l.probeX, l.lastX, l.between), l.limit, l.ratio, l.base, l.recent)
	}
	l.probing = false
	l.phase.Add(1)
	l.adm.Store(micro(l.limit))
	l.win.take()
	l.full.Store(false)
	l.peak.Store(0)
	l.windowStart, l.lastProbe, l.settle, l.windows = now, now, true, 0
	// Every probe halves what the gate admits: under a bottleneck of two
	// workers that halves the throughput, and whoever queues meanwhile —
	// critical work first — pays for it; under one worker it costs
	// nothing (the gate still admits one at a time). So a probe's cost is
	// the throughput it lost (lost: its time times the share it lost
	// against the time between probes), and past a cold start (which
	// refuses nothing) no probe starts before that cost has been paid
	// back probeDuty−1 times over: probes take at most 1/probeDuty of the
	// throughput, however often the ratio jumps. Scheduled probes come
	// every ProbeEvery (±25 %, so that they do not lock onto a period in
	// the load), or as the duty allows, or sooner while the baseline is
	// not settled.
	lost := time.Duration(max(1-cost, 0) * float64(el))
	l.costly = cost < keptAbove
	l.doneAt = done
	l.dutyUntil = now
	if !l.cold {
		l.dutyUntil = now.Add((probeDuty - 1) * lost)
	}
	l.rng ^= l.rng << 13
	l.rng ^= l.rng >> 7
	l.rng ^= l.rng << 17
	jitter := 0.75 + 0.5*float64(l.rng>>11)/(1<<53)
	every := max(time.Duration(float64(l.cfg.ProbeEvery)*jitter), min(probeDuty*lost, 4*l.cfg.ProbeEvery))
	if soon >= 0 {
		every = soon
	}
	l.nextProbe = now.Add(every)
	l.due.Store(now.UnixNano())
}

// Trace, when set, receives each decision of every limiter (lab
// debugging). Not for concurrent use.
var Trace func(now time.Time, what string, limit, ratio, base, recent float64)

// smooth is an EWMA of weight ½ that starts at the first value.
func smooth(old, v float64) float64 {
	if old <= 0 {
		return v
	}
	return old + 0.5*(v-old)
}
