package api

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

// Point is one control tick in /v1/history.
type Point struct {
	Time     time.Time          `json:"t"`
	Pressure *float64           `json:"pressure"`
	Readings map[string]float64 `json:"readings"`
	// LatencyP99 and SojournP99 are the snapshot's, whether or not they
	// are targets (the dial charts both).
	LatencyP99 *float64           `json:"latency_p99"`
	SojournP99 *float64           `json:"sojourn_p99"`
	Levels     map[string]float64 `json:"levels"`
	Shed       float64            `json:"shed"`
	ShedRate   *float64           `json:"shed_rate"`
	Goodput    *float64           `json:"goodput"`
	Throughput *float64           `json:"throughput"`
	Mode       string             `json:"mode"`
	Generation uint64             `json:"generation"`
}

// history is a ring of ticks, and the tick lag's recent values. A tick
// is kept compactly (slot): its numbers, and its readings and levels as
// values by a name table shared by the ring, so that the ring's memory is
// what it holds from its first round on (900 ticks of 15 minutes: a few
// hundred bytes each, where a Point with its two maps took about 600) and
// a full ring reuses each slot's values instead of allocating.
type history struct {
	mu    sync.Mutex
	ring  []slot
	next  int
	full  bool
	names []name       // what slot.vals hold, in order
	index map[name]int // names' positions
	lags  []float64    // seconds, ring of the last 1000
	lagN  uint64
}

// name is a reading's or a level's name in the ring's table.
type name struct {
	key   string
	level bool
}

// slot is one tick of the ring: a Point without its maps and pointers
// (NaN: none).
type slot struct {
	t                                                 time.Time
	pressure, lat, soj, shedRate, goodput, tput, shed float64
	mode                                              string
	gen                                               uint64
	vals                                              []float64 // by history.names; NaN: absent
}

func newHistory(n int) *history {
	return &history{ring: make([]slot, n), index: map[name]int{}, lags: make([]float64, 0, 1000)}
}

// maxHistoryNames bounds the ring's name table: the readings a snapshot
// can carry and the features of the largest configuration, with room for
// a configuration's change. Names past it are not kept.
const maxHistoryNames = 4 * dimmer.MaxFeatures

// at returns the position of n in the table, adding it; -1 past the
// table's bound.
func (h *history) at(n name) int {
	if i, ok := h.index[n]; ok {
		return i
	}
	if len(h.names) >= maxHistoryNames {
		return -1
	}
	h.index[n] = len(h.names)
	h.names = append(h.names, n)
	return len(h.names) - 1
}

func (h *history) add(p Point, lag time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sl := &h.ring[h.next]
	vals := sl.vals[:0]
	put := func(key string, level bool, v float64) {
		i := h.at(name{key, level})
		if i < 0 {
			return
		}
		for len(vals) <= i {
			vals = append(vals, math.NaN())
		}
		vals[i] = v
	}
	for k, v := range p.Readings {
		put(k, false, v)
	}
	for k, v := range p.Levels {
		put(k, true, v)
	}
	*sl = slot{t: p.Time, pressure: nan(p.Pressure), lat: nan(p.LatencyP99), soj: nan(p.SojournP99),
		shedRate: nan(p.ShedRate), goodput: nan(p.Goodput), tput: nan(p.Throughput), shed: p.Shed,
		mode: p.Mode, gen: p.Generation, vals: vals}
	h.next++
	if h.next == len(h.ring) {
		h.next, h.full = 0, true
	}
	if len(h.lags) < cap(h.lags) {
		h.lags = append(h.lags, lag.Seconds())
	} else {
		h.lags[h.lagN%uint64(cap(h.lags))] = lag.Seconds()
	}
	h.lagN++
}

// nan is p's value, or NaN for none.
func nan(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// point makes sl a Point again.
func (h *history) point(sl *slot) Point {
	p := Point{Time: sl.t, Readings: map[string]float64{}, Levels: map[string]float64{},
		Pressure: num(sl.pressure, true), LatencyP99: num(sl.lat, true), SojournP99: num(sl.soj, true),
		ShedRate: num(sl.shedRate, true), Goodput: num(sl.goodput, true), Throughput: num(sl.tput, true),
		Shed: sl.shed, Mode: sl.mode, Generation: sl.gen}
	for i, v := range sl.vals {
		if math.IsNaN(v) {
			continue
		}
		if n := h.names[i]; n.level {
			p.Levels[n.key] = v
		} else {
			p.Readings[n.key] = v
		}
	}
	return p
}

// since returns the points after t, oldest first.
func (h *history) since(t time.Time) []Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Point
	n := h.next
	if h.full {
		n = len(h.ring)
	}
	for i := range n {
		j := i
		if h.full {
			j = (h.next + i) % len(h.ring)
		}
		if sl := &h.ring[j]; sl.t.After(t) {
			out = append(out, h.point(sl))
		}
	}
	return out
}

func (h *history) lagP99() float64 {
	h.mu.Lock()
	l := slices.Clone(h.lags)
	h.mu.Unlock()
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	return l[int(math.Ceil(0.99*float64(len(l))))-1]
}

func (h *history) ticks() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lagN
}

// Run is the control loop with its record: every Tick it takes a
// snapshot from src (bounded by the tick), steps the controller, and
// keeps the tick — readings, levels, shed level and rate, goodput,
// throughput — for /v1/history, the events of the state's changes for
// /v1/events, and how late the tick ran. It returns ctx's error when ctx
// ends. Use it instead of Controller.Run.
func (a *API) Run(ctx context.Context, src dimmer.Source) error {
	tick := a.ctl.Config().Tick
	t := time.NewTicker(tick)
	defer t.Stop()
	var failing sourceLog
	begun := time.Now()
	return a.loop(ctx, t.C, a.noteChange, func(sched time.Time) {
		start := time.Now()
		lag := start.Sub(sched)
		sctx, cancel := context.WithTimeout(ctx, tick)
		snap, err := src.Snapshot(sctx, sched)
		cancel()
		if failing.quiet.IsZero() {
			failing.quiet = begun.Add(startGrace(snap.Window, tick, a.ctl.Config().StaleAfter))
		}
		failing.note(a.log, sched, err)
		st := a.ctl.Step(sched, snap)
		a.record(sched, snap, st, lag)
	})
}

// loop sends the controller's published states to the streams (and
// note, when set, the pair of each change) and calls tick, when set, at
// every tick of ticks, until ctx ends.
func (a *API) loop(ctx context.Context, ticks <-chan time.Time, note func(prev, st *dimmer.State), tick func(sched time.Time)) error {
	sub, stop := a.ctl.Subscribe()
	defer stop()
	prev := a.ctl.State()
	// OFREP's refetch events: at most one per ofrepMinInterval.
	var lastRefetch time.Time
	var refetchDue <-chan time.Time
	refetch := func(now time.Time) {
		if refetchDue != nil {
			return // one is scheduled and will carry the newest generation
		}
		if wait := lastRefetch.Add(ofrepMinInterval).Sub(now); wait > 0 {
			refetchDue = time.After(wait)
			return
		}
		lastRefetch = now
		a.ofrepStreams.send(kindRefetch, a.refetchEvent(a.ctl.State().Generation, a.now()))
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case st := <-sub:
			if note != nil {
				note(prev, st)
			}
			prev = st
			a.published(st)
			refetch(time.Now())
		case <-refetchDue:
			refetchDue = nil
			refetch(time.Now())
		case sched := <-ticks:
			tick(sched)
		}
	}
}

// sourceLog limits what Run logs of a failing source to one line every
// sourceLogEvery (the first at once), with the number of times its error
// changed meanwhile, and each error to maxLoggedError bytes: a source's
// error can change on every tick and be long (a push source joins one
// error per refusing instance: 300 of them wrote 2 GB a day).
type sourceLog struct {
	quiet   time.Time // no warning before: the source's first window
	at      time.Time // the last warning; zero: none yet
	last    string    // the last error seen
	changes int       // how often it changed since the warning
	warned  bool      // a warning since the last "back"
}

// startGrace is how long after Run starts a failing source is not
// warned of: its window (a push source has had no time to hear from the
// fleet: "none pushed in the last 15s" a second after start says
// nothing), or, for a source without one, the ticks the law waits before
// it calls the signals stale.
func startGrace(window, tick time.Duration, staleAfter int) time.Duration {
	if window > 0 {
		return window
	}
	return time.Duration(max(staleAfter, 1)) * tick
}

// sourceLogEvery spaces the warnings of a failing source: the operator
// learns at once that it fails, then once a minute that it still does.
const sourceLogEvery = time.Minute

// maxLoggedError bounds the error text of one warning: a few of a joined
// error's parts, enough to tell what fails.
const maxLoggedError = 1 << 10

func (l *sourceLog) note(log *slog.Logger, now time.Time, err error) {
	if err == nil {
		if l.warned {
			log.Info("brownout: signals back")
			l.warned = false
		}
		l.last = ""
		return
	}
	text := err.Error()
	if now.Before(l.quiet) {
		return // the source's first window: nothing pushed yet is no failure
	}
	if text != l.last {
		l.changes++
		l.last = text
	}
	if !l.at.IsZero() && now.Sub(l.at) < sourceLogEvery {
		return
	}
	if len(text) > maxLoggedError {
		text = strings.ToValidUTF8(text[:maxLoggedError], "") + fmt.Sprintf("… (%d bytes)", len(text))
	}
	log.Warn("brownout: signals", "err", text, "changes", l.changes)
	l.at, l.changes, l.warned = now, 0, true
}

// Record keeps one tick for /v1/history (Run calls it; an embedding that
// steps the controller itself may call it after each Step).
func (a *API) Record(now time.Time, snap signals.Snapshot, st *dimmer.State, lag time.Duration) {
	a.record(now, snap, st, lag)
}

func (a *API) record(now time.Time, snap signals.Snapshot, st *dimmer.State, lag time.Duration) {
	p := NewPoint(now, snap, a.ctl.Status(), st)
	a.hist.add(p, lag)
	a.ticked(p)
}

// NewPoint is the history's point of the tick at now: the snapshot's
// figures, the readings and pressure of status (Controller.Status after
// the step), and the levels of st, the published state.
func NewPoint(now time.Time, snap signals.Snapshot, status, st *dimmer.State) Point {
	p := Point{Time: now, Readings: map[string]float64{}, Levels: map[string]float64{}, Shed: st.Shed,
		Mode: st.Mode.String(), Generation: st.Generation}
	p.Pressure = num(status.Pressure, status.PressureOK)
	for _, r := range status.Signals {
		if !r.Missing {
			p.Readings[r.Signal.String()] = r.Value
		}
	}
	for i := range st.NumFeatures() {
		p.Levels[st.FeatureName(i)] = st.LevelAt(i, -1)
	}
	get := func(k signals.Key) *float64 { v, ok := snap.Get(k); return num(v, ok) }
	p.ShedRate, p.Goodput, p.Throughput = get(signals.RejectRate), get(signals.Goodput), get(signals.Throughput)
	p.LatencyP99, p.SojournP99 = get(signals.LatencyP99), get(signals.SojournP99)
	return p
}

func (a *API) getHistory(w http.ResponseWriter, r *http.Request) {
	since, err := parseSince(r.URL.Query().Get("since"), a.now())
	if err != nil {
		problem(w, http.StatusBadRequest, "bad-since", err.Error())
		return
	}
	pts := a.hist.since(since)
	if pts == nil {
		pts = []Point{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"v": Version, "tick": a.ctl.Config().Tick.String(), "points": pts})
}

// parseSince reads ?since=: RFC 3339, Unix seconds or milliseconds (told
// apart by size), or a duration back from now ("5m"); empty is everything
// kept.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		if n < 1e11 { // before 1973 in milliseconds, 5138 in seconds: seconds
			return time.Unix(n, 0), nil
		}
		return time.UnixMilli(n), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, &sinceError{s}
}

type sinceError struct{ s string }

func (e *sinceError) Error() string {
	return "since " + strconv.Quote(e.s) + ": want RFC 3339 time, Unix seconds or milliseconds, or a duration back from now (5m)"
}
