package signals

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// WindowConfig shapes a Window. The zero value means 10 slices of 1 s.
type WindowConfig struct {
	// Slices is the number of time slices the window keeps. Default 10.
	Slices int
	// Width is the duration of one slice. Default 1 s.
	Width time.Duration
	// Shards is how many copies of its counters the window keeps, so
	// that writers on different cores do not share a cache line; a read
	// adds them all up. 0: four a processor (GOMAXPROCS), at most
	// maxShards; else rounded up to a power of two, at most maxShards. A
	// window that one goroutine writes at a time (a simulation's) needs
	// one, and its reads then cost an eighth of the default's on a
	// two-core machine.
	Shards int
}

func (c WindowConfig) withDefaults() WindowConfig {
	if c.Slices <= 0 {
		c.Slices = 10
	}
	if c.Width <= 0 {
		c.Width = time.Second
	}
	return c
}

// Span is the time the window covers: Slices × Width.
func (c WindowConfig) Span() time.Duration {
	c = c.withDefaults()
	return time.Duration(c.Slices) * c.Width
}

// Window is a sliding-window latency histogram with log-linear buckets (see
// buckets.go).
//
// Model. Writers add to one cumulative histogram that is never reset: 1024
// atomic counters, one copy per shard (four per processor by default; see shard.go) so that
// writers on different cores do not bounce cache lines. Record does one
// atomic add and two loads; there is no
// shared running sum, so the mean and the exported _sum are computed from
// bucket midpoints and are within 1/64 (1.6 %) of the exact values. Writers
// never look at the clock.
//
// The window is a ring of Slices time slots. At each slot boundary the reader
// copies the cumulative counts into the slot's snapshot; the counts of the
// window are then "cumulative now − snapshot at the start of the oldest
// slot". Each slot also keeps the largest sample recorded while it was live,
// which gives the window's maximum. The window keeps the smallest and largest
// sample ever recorded, which bound the buckets a reader has to scan; a
// writer widens them before its count lands, so a count can never sit
// outside the range for good (a writer held up between its steps while the
// ring turns is read on the next read, not lost). Readers (Summary, Quantile, Cumulative) take the time as an
// argument and rotate the ring first, so the window moves when it is read;
// read it at least once per slice Width (the controller's tick does), or
// samples of several slices are credited to the newest one.
//
// A Window must be made with NewWindow. It is safe for concurrent use.
type Window struct {
	shards  []*[NumBuckets]atomic.Uint64
	mask    int
	cur     atomic.Pointer[extremes]
	touched extremes // smallest and largest sample ever; bounds the buckets readers scan
	clamped atomic.Uint64

	mu struct {
		sync.Mutex
		cfg    WindowConfig
		ext    []*extremes           // per slot; ext[head] is live
		snaps  []*[NumBuckets]uint64 // snaps[k]: cumulative counts when slot k began
		head   int                   // the live slot
		start  time.Time             // start of the live slot; zero until first read
		merged counts                // scratch for queries
	}
}

// extremes are the smallest and largest of a set of samples (a slot's max;
// every sample's range for Window.touched).
type extremes struct {
	min atomic.Uint64
	max atomic.Uint64
}

func (e *extremes) reset() {
	e.max.Store(0)
	e.min.Store(math.MaxUint64)
}

// span returns the bucket range of the slot's samples; lo > hi if none.
func (e *extremes) span() (lo, hi int) {
	mn, mx := e.min.Load(), e.max.Load()
	if mn > mx {
		return NumBuckets, -1
	}
	return bucketIndex(mn), bucketIndex(mx)
}

// counts is a plain (reader-side) histogram; lo..hi bounds the buckets that
// may be non-zero.
type counts struct {
	n      [NumBuckets]uint64
	cnt    uint64
	max    uint64
	lo, hi int
}

// NewWindow returns an empty window.
func NewWindow(cfg WindowConfig) *Window {
	cfg = cfg.withDefaults()
	w := &Window{}
	w.shards = make([]*[NumBuckets]atomic.Uint64, shardsFor(cfg.Shards))
	for i := range w.shards {
		w.shards[i] = new([NumBuckets]atomic.Uint64)
	}
	w.mask = len(w.shards) - 1
	m := &w.mu
	m.cfg = cfg
	m.ext = make([]*extremes, cfg.Slices)
	m.snaps = make([]*[NumBuckets]uint64, cfg.Slices)
	for i := range m.ext {
		m.ext[i] = &extremes{}
		m.ext[i].reset()
		m.snaps[i] = new([NumBuckets]uint64)
	}
	w.touched.reset()
	w.cur.Store(m.ext[0])
	return w
}

// Config returns the window's shape with defaults filled in.
func (w *Window) Config() WindowConfig { return w.mu.cfg }

// Record adds one duration. It does not allocate and takes no lock. A
// duration that is not positive is recorded as 0 and one larger than
// MaxValue as MaxValue; both are counted (see Clamped).
func (w *Window) Record(d time.Duration) {
	v := uint64(d)
	if d <= 0 || d > MaxValue {
		v = w.clampSlow(d)
	}
	w.widen(v)
	w.shards[shardHint()&w.mask][bucketIndex(v)].Add(1)
	w.markSlot(v)
}

// widen makes the range readers scan cover v. Record calls it before the
// count lands: readers never look outside the range, so a count there would
// be missed until some later sample widened the range past it — for ever if
// v stayed the extreme. (The range only ever grows, so it is one load each
// way once the extremes have been seen.)
func (w *Window) widen(v uint64) {
	if v > w.touched.max.Load() {
		storeMax(&w.touched.max, v)
	}
	if v < w.touched.min.Load() {
		storeMin(&w.touched.min, v)
	}
}

// markSlot raises the live slot's maximum to v. A writer held up since it
// loaded the slot may mark one the ring has since left or reset: a maximum
// may then show a slot late or early, never a count.
func (w *Window) markSlot(v uint64) {
	if e := w.cur.Load(); v > e.max.Load() {
		storeMax(&e.max, v)
	}
}

func (w *Window) clampSlow(d time.Duration) uint64 {
	v, _ := clampValue(d)
	w.clamped.Add(1)
	return v
}

func storeMax(m *atomic.Uint64, v uint64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

func storeMin(m *atomic.Uint64, v uint64) {
	for {
		old := m.Load()
		if v >= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

// Clamped returns how many recorded durations were out of range.
func (w *Window) Clamped() uint64 { return w.clamped.Load() }

// load returns the cumulative count of bucket i over all shards.
func (w *Window) load(i int) uint64 {
	var c uint64
	for _, s := range w.shards {
		c += s[i].Load()
	}
	return c
}

// rotate moves the ring forward to now. Callers hold w.mu.
func (w *Window) rotate(now time.Time) {
	m := &w.mu
	if m.start.IsZero() {
		m.start = now
		return
	}
	steps := int64(now.Sub(m.start) / m.cfg.Width)
	if steps <= 0 {
		return
	}
	if n := int64(len(m.ext)); steps > n {
		// Every slot has expired; skip the empty ones in one go.
		m.start = m.start.Add(time.Duration(steps-n) * m.cfg.Width)
		steps = n
	}
	lo, hi := w.touched.span()
	for ; steps > 0; steps-- {
		m.head = (m.head + 1) % len(m.ext)
		snap := m.snaps[m.head]
		for i := lo; i <= hi; i++ {
			snap[i] = w.load(i)
		}
		m.ext[m.head].reset()
		w.cur.Store(m.ext[m.head])
		m.start = m.start.Add(m.cfg.Width)
	}
}

// merge fills m.merged with the window's counts. Callers hold w.mu.
func (w *Window) merge() *counts {
	m := &w.mu
	lo, hi := w.touched.span()
	out := &m.merged
	out.lo, out.hi, out.cnt, out.max = lo, hi, 0, 0
	base := m.snaps[(m.head+1)%len(m.snaps)]
	for i := lo; i <= hi; i++ {
		c := w.load(i) - base[i]
		out.n[i] = c
		out.cnt += c
	}
	for _, e := range m.ext {
		out.max = max(out.max, e.max.Load())
	}
	return out
}

// Summary describes the samples of a window. Durations are zero when Count
// is zero. Mean is computed from bucket midpoints (within 1.6 %).
type Summary struct {
	Count uint64
	Mean  time.Duration
	Max   time.Duration
	P50   time.Duration
	P90   time.Duration
	P99   time.Duration
	P999  time.Duration
}

// Summary rotates the window to now and summarizes it.
func (w *Window) Summary(now time.Time) Summary {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rotate(now)
	m := w.merge()
	s := Summary{Count: m.cnt, Max: time.Duration(m.max)}
	if s.Count == 0 {
		return s
	}
	s.Mean = time.Duration(m.midSum() / float64(m.cnt))
	qs := [...]float64{0.5, 0.9, 0.99, 0.999}
	var out [len(qs)]time.Duration
	m.quantiles(qs[:], out[:])
	s.P50, s.P90, s.P99, s.P999 = out[0], out[1], out[2], out[3]
	return s
}

// Quantile rotates the window to now and returns its q-quantile (nearest
// rank), or 0 and false if the window is empty.
func (w *Window) Quantile(now time.Time, q float64) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rotate(now)
	m := w.merge()
	if m.cnt == 0 {
		return 0, false
	}
	var out [1]time.Duration
	m.quantiles([]float64{q}, out[:])
	return out[0], true
}

// midSum estimates the sum of the samples from bucket midpoints.
func (c *counts) midSum() float64 {
	var sum float64
	for i := c.lo; i <= c.hi; i++ {
		if c.n[i] != 0 {
			sum += float64(c.n[i]) * bucketMid(i)
		}
	}
	return sum
}

// quantiles computes ascending quantiles qs in one pass over the buckets.
func (c *counts) quantiles(qs []float64, out []time.Duration) {
	var seen uint64
	j := 0
	for i := c.lo; i <= c.hi && j < len(qs); i++ {
		seen += c.n[i]
		for j < len(qs) && seen >= rankFor(qs[j], c.cnt) {
			v := bucketMid(i)
			if v > float64(c.max) {
				v = float64(c.max) // the top bucket's midpoint may pass the true max
			}
			out[j] = time.Duration(v)
			j++
		}
	}
}

// Cumulative calls fn with the counts of every sample recorded since the
// window was made, indexed by bucket, with their estimated sum in
// nanoseconds and their count. fn must not retain counts. It is called
// without the window's lock held.
func (w *Window) Cumulative(now time.Time, fn func(counts *[NumBuckets]uint64, sum float64, count uint64)) {
	snap := &counts{}
	w.mu.Lock()
	w.rotate(now)
	w.mu.Unlock()
	snap.lo, snap.hi = w.touched.span()
	for i := snap.lo; i <= snap.hi; i++ {
		c := w.load(i)
		snap.n[i] = c
		snap.cnt += c
	}
	fn(&snap.n, snap.midSum(), snap.cnt)
}
