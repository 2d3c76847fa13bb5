package signals

import (
	"math"
	"sync/atomic"
	"time"
)

// The CoDel defaults, one source for the whole module: package shed's gate
// decides on them whether a queue is standing, and a Sojourn tracker
// reports standing and sojourn.min on them. CoDel's 5 ms / 100 ms suit
// network packets; web requests whose work takes ~10 ms with variable
// service times are better served by 100 ms of acceptable standing wait,
// over an interval of about one worst-case request.
const (
	DefaultCoDelTarget   = 100 * time.Millisecond
	DefaultCoDelInterval = 500 * time.Millisecond
)

// SojournConfig shapes a Sojourn tracker. The zero value means a 10 × 1 s
// window and the CoDel defaults (target 100 ms, interval 500 ms).
type SojournConfig struct {
	// Window shapes the histogram of sojourn times (for p99 and max);
	// in a Recorder, without Slices and Width it takes the latency
	// window's, and its Shards unless set.
	Window WindowConfig
	// Target is the acceptable standing sojourn. Default
	// DefaultCoDelTarget.
	Target time.Duration
	// Interval is how long the sojourn must stay above Target before the
	// queue counts as standing, and the span sojourn.min is taken over.
	// Default DefaultCoDelInterval.
	Interval time.Duration
}

func (c SojournConfig) withDefaults() SojournConfig {
	if c.Target <= 0 {
		c.Target = DefaultCoDelTarget
	}
	if c.Interval <= 0 {
		c.Interval = DefaultCoDelInterval
	}
	return c
}

// Sojourn tracks how long requests waited in a queue before their work
// started.
//
// Besides a windowed histogram it keeps CoDel's two standing-queue facts
// (RFC 8289): the minimum sojourn over the last complete interval — a queue
// whose *minimum* stays above target for an interval is standing, not a
// burst passing through — and the time since which every sojourn has been
// above target ("above target since", CoDel's first_above_time). Both are
// maintained by writers, which know the time because they just computed the
// sojourn, with a few atomic loads and rare stores.
//
// A Sojourn must be made with NewSojourn. It is safe for concurrent use.
type Sojourn struct {
	cfg SojournConfig
	w   *Window

	aboveSince atomic.Int64  // unix ns of the first sample above target in the current run; 0 if below
	lastSeen   atomic.Int64  // unix ns of the newest sample
	epoch      atomic.Int64  // index of the current interval: unix ns / Interval
	curMin     atomic.Uint64 // minimum in the current interval
	prevMin    atomic.Uint64 // minimum of the previous interval; MaxUint64 if it had none
}

// NewSojourn returns an empty tracker.
func NewSojourn(cfg SojournConfig) *Sojourn {
	cfg = cfg.withDefaults()
	s := &Sojourn{cfg: cfg, w: NewWindow(cfg.Window)}
	s.curMin.Store(math.MaxUint64)
	s.prevMin.Store(math.MaxUint64)
	return s
}

// Config returns the tracker's settings with defaults filled in.
func (s *Sojourn) Config() SojournConfig { return s.cfg }

// Window returns the histogram of sojourn times.
func (s *Sojourn) Window() *Window { return s.w }

// Record adds the sojourn d of a request whose work starts at now.
func (s *Sojourn) Record(d time.Duration, now time.Time) {
	s.w.Record(d)
	ns := now.UnixNano()
	// Millisecond precision is enough to tell an idle queue, and writing
	// this shared word on every request would bounce it between cores.
	if s.lastSeen.Load() < ns-int64(time.Millisecond) {
		s.lastSeen.Store(ns)
	}
	if d < s.cfg.Target {
		if s.aboveSince.Load() != 0 {
			s.aboveSince.Store(0)
		}
	} else if s.aboveSince.Load() == 0 {
		s.aboveSince.CompareAndSwap(0, ns)
	}

	e := ns / int64(s.cfg.Interval)
	if old := s.epoch.Load(); e > old && s.epoch.CompareAndSwap(old, e) {
		m := s.curMin.Swap(math.MaxUint64)
		if e != old+1 {
			m = math.MaxUint64 // a whole interval passed without samples
		}
		s.prevMin.Store(m)
	}
	v, _ := clampValue(d)
	if v < s.curMin.Load() {
		storeMin(&s.curMin, v)
	}
}

// SojournStats is what a Sojourn says at one moment.
type SojournStats struct {
	Summary
	// Min is the minimum sojourn over the last complete interval; MinOK is
	// false if that interval saw no request.
	Min   time.Duration
	MinOK bool
	// AboveSince is when the sojourn last rose above Target and stayed
	// there; zero while it is below, or when the queue went idle.
	AboveSince time.Time
	// Standing reports a standing queue: above target for an interval.
	Standing bool
}

// Stats reads the tracker at now.
func (s *Sojourn) Stats(now time.Time) SojournStats {
	st := SojournStats{Summary: s.w.Summary(now)}
	ns := now.UnixNano()
	e := ns / int64(s.cfg.Interval)
	switch cur := s.epoch.Load(); {
	case e == cur+1: // the current interval has just completed
		if m := s.curMin.Load(); m != math.MaxUint64 {
			st.Min, st.MinOK = time.Duration(m), true
		}
	case e == cur:
		if m := s.prevMin.Load(); m != math.MaxUint64 {
			st.Min, st.MinOK = time.Duration(m), true
		}
	}
	// No sample for an interval means no queue: it cannot be standing.
	if last := s.lastSeen.Load(); last != 0 && ns-last <= int64(s.cfg.Interval) {
		if a := s.aboveSince.Load(); a != 0 {
			st.AboveSince = time.Unix(0, a)
			st.Standing = ns-a >= int64(s.cfg.Interval)
		}
	}
	return st
}
