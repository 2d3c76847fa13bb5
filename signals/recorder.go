package signals

import (
	"sync"
	"sync/atomic"
	"time"
)

// Config shapes a Recorder. The zero value is usable: 10 × 1 s windows,
// sojourn target 50 ms / interval 100 ms, and no latency objective.
type Config struct {
	// Latency shapes the latency window and the window over which counts
	// become rates.
	Latency WindowConfig
	// Sojourn configures the per-class queue trackers.
	Sojourn SojournConfig
	// GoodWithin, when positive, is a latency objective: a completion
	// slower than this is not counted as good even when the request carried
	// no deadline.
	GoodWithin time.Duration
}

// Recorder holds the live signals of one process: request latency, queue
// sojourn by class, in-flight and outcome counters. Request paths write to it
// without locks; the controller (or a Prometheus scrape) reads it with
// Snapshot.
//
// A Recorder must be made with NewRecorder. It is safe for concurrent use.
type Recorder struct {
	cfg      Config
	latency  *Window
	sojourn  [NumClasses]*Sojourn
	counters *Counters

	gate atomic.Pointer[func() GateReading]
	feat features

	mu struct {
		sync.Mutex
		snaps  [][NumClasses]ClassCounts // cumulative counts at each slot start
		starts []time.Time               // when each slot started (on the slots' grid)
		taken  []time.Time               // when its counts were taken (the snapshot that opened it)
		head   int
		last   ClassCounts // all classes, at the previous Snapshot (gate.busy, Recent)
		lastAt time.Time
		lastOK bool
	}
}

// GateReading is an admission gate at one moment: its concurrency limit
// and the cost in flight (in cost units), the requests queued, and whether
// each class's queue is standing by the gate's own CoDel decision. While a
// gate is registered, its Standing is what snapshots and the Collector
// report (the gate decides; the sojourn trackers only estimate).
type GateReading struct {
	Limit, InFlight float64
	Queued          int
	Standing        [NumClasses]bool
}

// SetGate registers the admission gate whose reading snapshots and the
// Collector report (gate.utilization, gate.queued, gate.limit); package
// shed registers its own. nil unregisters.
func (r *Recorder) SetGate(read func() GateReading) {
	if read == nil {
		r.gate.Store(nil)
		return
	}
	r.gate.Store(&read)
}

// Gate returns the registered gate's reading, and false when none is
// registered.
func (r *Recorder) Gate() (GateReading, bool) {
	f := r.gate.Load()
	if f == nil {
		return GateReading{}, false
	}
	return (*f)(), true
}

// NewRecorder returns a Recorder with empty signals.
func NewRecorder(cfg Config) *Recorder {
	cfg.Latency = cfg.Latency.withDefaults()
	cfg.Sojourn = cfg.Sojourn.withDefaults()
	if w := &cfg.Sojourn.Window; w.Slices == 0 && w.Width == 0 {
		// The latency window's slices, and its shards unless set.
		w.Slices, w.Width = cfg.Latency.Slices, cfg.Latency.Width
		if w.Shards == 0 {
			w.Shards = cfg.Latency.Shards
		}
	}
	r := &Recorder{cfg: cfg, latency: NewWindow(cfg.Latency), counters: NewCounters()}
	for i := range r.sojourn {
		r.sojourn[i] = NewSojourn(cfg.Sojourn)
	}
	r.mu.snaps = make([][NumClasses]ClassCounts, cfg.Latency.Slices)
	r.mu.starts = make([]time.Time, cfg.Latency.Slices)
	r.mu.taken = make([]time.Time, cfg.Latency.Slices)
	return r
}

// Config returns the recorder's settings with defaults filled in.
func (r *Recorder) Config() Config { return r.cfg }

// Latency returns the request latency window.
func (r *Recorder) Latency() *Window { return r.latency }

// Sojourn returns the queue tracker of class c.
func (r *Recorder) Sojourn(c Class) *Sojourn { return r.sojourn[c%NumClasses] }

// Counters returns the outcome counters.
func (r *Recorder) Counters() *Counters { return r.counters }

// Arrive counts an arriving request.
func (r *Recorder) Arrive(c Class) { r.counters.Arrive(c) }

// Reject counts a refused request.
func (r *Recorder) Reject(c Class, why Reason) { r.counters.Reject(c, why) }

// Queued records that a request of class c waited d before its work started
// at now.
func (r *Recorder) Queued(c Class, d time.Duration, now time.Time) {
	r.sojourn[c%NumClasses].Record(d, now)
	if d > 0 {
		r.counters.Wait(c)
	}
}

// Start marks the start of a request's work, after any wait at an
// admission gate (Queued records that wait), and returns now. Done takes
// the request's arrival, not this time, so that its latency is what its
// client saw; without a gate the two are one.
func (r *Recorder) Start(now time.Time) time.Time {
	r.counters.Start()
	return now
}

// Done records a request of class c from start to its end at now: its
// latency, which the targets read as its client sees it — so start is
// when the request arrived, before any wait at an admission gate (package
// shed's Shedder passes its arrival; the wait alone is Queued's). failed
// marks a 5xx or an error; deadline, when not zero, is the time by which
// the client needed the answer.
func (r *Recorder) Done(c Class, start, now time.Time, failed bool, deadline time.Time) {
	d := now.Sub(start)
	r.latency.Record(d)
	good := !failed && (deadline.IsZero() || !now.After(deadline)) &&
		(r.cfg.GoodWithin <= 0 || d <= r.cfg.GoodWithin)
	r.counters.Finish(c, failed, good)
}

// Snapshot reads every signal at now. Rates and counts cover the time since
// the start of the oldest slot of the window, at most Slices × Width.
// Tallies, one per registered feature (see Features), and Work cover the time
// since the previous Snapshot (since the Recorder was made, for the
// first), so that one reader, the controller's tick, should take them;
// the slice is reused by the next Snapshot.
func (r *Recorder) Snapshot(now time.Time) Snapshot {
	s := Snapshot{Time: now, Window: r.cfg.Latency.Span(), Source: "local"}
	lat := r.latency.Summary(now)
	if lat.Count > 0 {
		s.SetDuration(LatencyP50, lat.P50)
		s.SetDuration(LatencyP90, lat.P90)
		s.SetDuration(LatencyP99, lat.P99)
		s.SetDuration(LatencyP999, lat.P999)
		s.SetDuration(LatencyMean, lat.Mean)
		s.SetDuration(LatencyMax, lat.Max)
	}
	gr, gated := r.Gate()
	for cl, sj := range r.sojourn {
		st := sj.Stats(now)
		if gated {
			st.Standing = gr.Standing[cl]
		}
		s.Standing = s.Standing || st.Standing
		if st.MinOK {
			setMax(&s, SojournMin, st.Min.Seconds())
		}
		if st.Count > 0 {
			setMax(&s, SojournP99, st.P99.Seconds())
			setMax(&s, SojournMax, st.Max.Seconds())
		}
	}
	s.Set(InFlight, float64(r.counters.InFlight()))

	if g := gr; gated {
		s.Set(GateLimit, g.Limit)
		s.Set(GateQueued, float64(g.Queued))
		if g.Limit > 0 {
			s.Set(GateUtilization, g.InFlight/g.Limit)
		}
	}
	cur := r.counters.Load()
	base, since, last, lastAt, lastOK := r.rotate(now, cur)
	r.mu.Lock()
	r.snapshotTallies(&s)
	r.mu.Unlock()
	var all ClassCounts
	for c := range cur {
		s.Classes[c] = cur[c].Sub(base[c])
		all.Merge(s.Classes[c])
	}
	s.ClassesOK = true
	if el := now.Sub(since).Seconds(); el > 0 {
		s.Set(ArrivalRate, float64(all.Arrived)/el)
		s.Set(Throughput, float64(all.Completed)/el)
		s.Set(Goodput, float64(all.Good)/el)
		s.Set(RejectRate, float64(all.RejectedTotal())/el)
	}
	if all.Completed > 0 {
		s.Set(ErrorRatio, float64(all.Failed)/float64(all.Completed))
	}
	if all.Arrived > 0 {
		s.Set(RejectRatio, float64(all.Overload())/float64(all.Arrived))
	}
	if lastOK {
		// Since the previous snapshot, not over the window: the controller
		// needs to know that the gate has room now, not five seconds ago.
		var total ClassCounts
		for c := range cur {
			total.Merge(cur[c])
		}
		d := total.Sub(last)
		if span := now.Sub(lastAt); span > 0 {
			s.Recent, s.RecentSpan, s.RecentAt = d, span, now
		}
		if at := d.AtGate(); at > 0 && gated {
			// (Only with a gate: behind another limiter, or none, the
			// refusals the middleware counts are no gate's room.)
			s.Set(GateBusy, min(float64(d.NoRoom())/float64(at), 1))
		}
	}
	return s
}

func setMax(s *Snapshot, k Key, v float64) {
	if old, ok := s.Get(k); !ok || v > old {
		s.Set(k, v)
	}
}

// rotate keeps a copy of the cumulative counts at each slot start and
// returns the copy at the start of the oldest slot in the window, and when
// that copy was taken; and the counts of all classes at the previous call.
func (r *Recorder) rotate(now time.Time, cur [NumClasses]ClassCounts) (base [NumClasses]ClassCounts, since time.Time, last ClassCounts, lastAt time.Time, lastOK bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := &r.mu
	last, lastAt, lastOK = m.last, m.lastAt, m.lastOK
	m.last, m.lastAt, m.lastOK = ClassCounts{}, now, true
	for c := range cur {
		m.last.Merge(cur[c])
	}
	n, w := len(m.snaps), r.cfg.Latency.Width
	switch steps := int(now.Sub(m.starts[m.head]) / w); {
	case m.starts[m.head].IsZero():
		// First read: the window starts now and holds everything so far.
		m.starts[m.head], m.taken[m.head] = now, now
	case steps >= n:
		// Everything expired while nobody looked: start over, aligned.
		start := now.Add(-(now.Sub(m.starts[m.head]) % w))
		clear(m.starts)
		clear(m.taken)
		m.head = 0
		m.starts[0], m.snaps[0], m.taken[0] = start, cur, now
	default:
		for range steps {
			next := m.starts[m.head].Add(w)
			m.head = (m.head + 1) % n
			m.starts[m.head], m.snaps[m.head], m.taken[m.head] = next, cur, now
		}
	}
	oldest := (m.head + 1) % n
	for m.starts[oldest].IsZero() { // the ring has not filled yet
		oldest = (oldest + 1) % n
	}
	// The counts of a slot were taken when the snapshot that opened it
	// ran, which may be up to a slot after its start on the grid: rates
	// are over the time since then.
	return m.snaps[oldest], m.taken[oldest], last, lastAt, lastOK
}
