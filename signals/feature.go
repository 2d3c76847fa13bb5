package signals

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxFeatures bounds the features a Recorder tallies: a request's tally is
// a 64-bit set, and a push carries at most this many.
const MaxFeatures = 64

// MaxFeatureLen bounds a feature name in bytes (a label value, a JSON key
// of a push): CheckFeature refuses a longer one.
const MaxFeatureLen = 128

// featureSet is the registered features of a Recorder at one moment,
// immutable: a request's tally holds the set it started with, so that its
// bits keep their meaning if features are added meanwhile.
type featureSet struct {
	names []string
	index map[string]int
}

func (fs *featureSet) lookup(name string) (int, bool) {
	if fs == nil {
		return 0, false
	}
	i, ok := fs.index[name]
	return i, ok
}

// tallyStore holds the cumulative per-feature counters, sharded like
// Counters (see shard.go).
type tallyStore struct {
	shards []*tallyShard
	mask   int
}

// tallyShard is one writer shard: every feature's counters. Shards are
// separate allocations (at least 3.5 KiB each), so they never share a
// cache line.
type tallyShard struct {
	f [MaxFeatures]featureCounters
	// work counts every tallied request, whether it marked a feature or
	// not (see Snapshot.Work).
	work momentCounters
}

type featureCounters struct {
	on, off      momentCounters
	unattributed atomic.Uint64
}

// momentCounters is Moments kept with atomics: the count is an atomic add,
// the sums are float64 bits updated by compare-and-swap (on a shard, the
// swap fails only when two writers of the same shard race).
type momentCounters struct {
	n          atomic.Uint64
	sum, sumSq atomic.Uint64
}

func addFloat(a *atomic.Uint64, x float64) {
	for {
		old := a.Load()
		if a.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+x)) {
			return
		}
	}
}

func (m *momentCounters) add(x float64) {
	m.n.Add(1)
	addFloat(&m.sumSq, x*x)
	addFloat(&m.sum, x)
}

// load reads the moments. The times are read before the count, which add
// writes first: a read that lands inside an add may count a request
// without its time, never a time without its request (a count of 0 with
// a sum, which the daemon's sources refuse whole: a push, or a scrape's
// tallies). The time missed is in the next read. And the sum is read
// before the sum of squares, which add writes first: a read never holds
// a time without its square, so the moments it returns always satisfy
// sum² ≤ n·sum_sq (Cauchy–Schwarz), which the daemon's push source checks.
func (m *momentCounters) load() Moments {
	sum, sq := math.Float64frombits(m.sum.Load()), math.Float64frombits(m.sumSq.Load())
	return Moments{N: int64(m.n.Load()), Sum: sum, SumSq: sq}
}

func newTallyStore() *tallyStore {
	s := &tallyStore{shards: make([]*tallyShard, shardCount())}
	for i := range s.shards {
		s.shards[i] = new(tallyShard)
	}
	s.mask = len(s.shards) - 1
	return s
}

func (s *tallyStore) shard() *tallyShard { return s.shards[shardHint()&s.mask] }

// features is a Recorder's registered features and their counters.
type features struct {
	set   atomic.Pointer[featureSet]
	store atomic.Pointer[tallyStore]
	mu    sync.Mutex // serializes registration

	// snapshot state, guarded by Recorder.mu
	last     []Tally // cumulative counts at the previous Snapshot, by index
	out      []Tally // the buffer Snapshot.Tallies shares
	lastWork Moments // Work at the previous Snapshot
}

// ErrTooManyFeatures is returned by Recorder.Features when registering
// would take a Recorder over MaxFeatures.
var ErrTooManyFeatures = fmt.Errorf("signals: more than %d features", MaxFeatures)

// CheckFeature says what is wrong with a feature name: empty, over 128
// bytes, not UTF-8, or holding space or control characters at its ends
// or control characters anywhere.
func CheckFeature(name string) error {
	switch {
	case name == "":
		return errors.New("signals: empty feature name")
	case len(name) > MaxFeatureLen:
		return fmt.Errorf("signals: feature name %q… is %d bytes long: at most %d", name[:32], len(name), MaxFeatureLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("signals: feature name %q is not valid UTF-8", name)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("signals: feature name %q has leading or trailing space", name)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("signals: feature name %q contains a control character", name)
	}
	return nil
}

// Features registers features by name for per-request tallies (see
// Tally): from then on, the middlewares give each request a tally in its
// context, the in-process provider marks the features it evaluates, and
// Snapshot, the Collector and package fleet's Pusher report each
// feature's counts.
// Names already registered are ignored; a feature cannot be unregistered.
// It fails, registering none of names, when a name is invalid (see
// CheckFeature) or when the Recorder would hold more than MaxFeatures
// (ErrTooManyFeatures). Register at start-up: requests already in flight
// do not tally features registered after they started.
func (r *Recorder) Features(names ...string) error {
	f := &r.feat
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.set.Load()
	var cur []string
	if old != nil {
		cur = old.names
	}
	next := slices.Clone(cur)
	for _, n := range names {
		if err := CheckFeature(n); err != nil {
			return err
		}
		if !slices.Contains(next, n) {
			next = append(next, n)
		}
	}
	if len(next) > MaxFeatures {
		return fmt.Errorf("%w: registering %d more would make %d", ErrTooManyFeatures, len(next)-len(cur), len(next))
	}
	if len(next) == len(cur) {
		return nil
	}
	if f.store.Load() == nil {
		f.store.Store(newTallyStore())
	}
	fs := &featureSet{names: next, index: make(map[string]int, len(next))}
	for i, n := range next {
		fs.index[n] = i
	}
	f.set.Store(fs)
	return nil
}

// FeatureNames returns the registered features, in registration order.
func (r *Recorder) FeatureNames() []string {
	if fs := r.feat.set.Load(); fs != nil {
		return slices.Clone(fs.names)
	}
	return nil
}

// Tallying reports whether any feature is registered: without one, the
// middlewares give requests no tally and pay nothing for it.
func (r *Recorder) Tallying() bool { return r.feat.set.Load() != nil }

// Unattributed counts an evaluation of feature that no request's tally
// saw (made outside the middlewares, or with a context that does not
// descend from the request's). An unregistered feature is ignored. The
// provider calls it; apps need not.
func (r *Recorder) Unattributed(feature string) {
	i, ok := r.feat.set.Load().lookup(feature)
	if !ok {
		return
	}
	r.feat.store.Load().shard().f[i].unattributed.Add(1)
}

// Tallies returns each registered feature's cumulative counts since the
// Recorder was made, in registration order: what the Collector and
// package fleet's Pusher export.
func (r *Recorder) Tallies() []Tally {
	fs := r.feat.set.Load()
	if fs == nil {
		return nil
	}
	out := make([]Tally, len(fs.names))
	r.loadTallies(fs, out)
	return out
}

// Work returns the cumulative Moments of every tallied request's service
// time since the Recorder was made — the requests that marked no feature
// too (a cart, a checkout): what Snapshot.Work reports by period, and the
// Collector and package fleet's Pusher export. Zero until a feature is
// registered.
func (r *Recorder) Work() Moments {
	st := r.feat.store.Load()
	if st == nil {
		return Moments{}
	}
	var m Moments
	for _, sh := range st.shards {
		m.Merge(sh.work.load())
	}
	return m
}

// loadTallies fills out (len(fs.names) long) with the cumulative counts.
func (r *Recorder) loadTallies(fs *featureSet, out []Tally) {
	st := r.feat.store.Load()
	for i := range out {
		out[i] = Tally{Feature: fs.names[i]}
	}
	for _, sh := range st.shards {
		for i := range out {
			c := &sh.f[i]
			out[i].On.Merge(c.on.load())
			out[i].Off.Merge(c.off.load())
			out[i].Unattributed += int64(c.unattributed.Load())
		}
	}
}

// snapshotTallies sets s.Tallies to the counts since the previous call.
// Callers hold r.mu.
func (r *Recorder) snapshotTallies(s *Snapshot) {
	fs := r.feat.set.Load()
	if fs == nil {
		return
	}
	f := &r.feat
	n := len(fs.names)
	if cap(f.out) < n {
		f.out = make([]Tally, n, MaxFeatures)
	}
	if len(f.last) < n {
		f.last = append(f.last, make([]Tally, n-len(f.last))...)
	}
	out := f.out[:n]
	r.loadTallies(fs, out)
	for i := range out {
		cur, last := out[i], f.last[i]
		f.last[i] = cur
		out[i] = Tally{Feature: cur.Feature, On: cur.On.Sub(last.On), Off: cur.Off.Sub(last.Off),
			Unattributed: cur.Unattributed - last.Unattributed}
	}
	s.Tallies = out
	w := r.Work()
	s.Work, f.lastWork = w.Sub(f.lastWork), w
}

// Sub returns m − o, for cumulative moments: o is an earlier reading of
// the same counters, never more than m (the sums' float noise is clamped
// at zero).
func (m Moments) Sub(o Moments) Moments {
	return Moments{N: m.N - o.N, Sum: max(m.Sum-o.Sum, 0), SumSq: max(m.SumSq-o.SumSq, 0)}
}

// RequestTally is one request's record of the features it rendered or
// skipped: a bit per registered feature, set by the provider (Evaluated)
// and by the app (Rendered, Skipped) through the request's context, read
// by the middleware when the request completes (EndTally).
//
// It is a context.Context itself, the request's context plus the tally,
// so that a middleware can embed it in a context value it allocates
// anyway and carry it at no extra allocation: package shed does. A
// middleware that has no context of its own to replace allocates one with
// BeginTally's context. The zero value marks nothing; BeginTally binds it
// to a Recorder. Its methods are safe for concurrent use (a handler's
// goroutines may evaluate flags with the request's context), and a mark
// made after EndTally is kept by nobody.
type RequestTally struct {
	context.Context
	set *featureSet
	// on holds the provider's marks, expOn the app's (Rendered, Skipped)
	// where explicit is set: apart, so that a provider's mark racing an
	// app's can never overwrite it (the two meet only when read: onBits).
	seen, on, explicit, expOn atomic.Uint64
	// held is the time the request held the service's bottleneck, as the
	// app reports it (Held); holds says it reported any.
	held  atomic.Int64
	holds atomic.Bool
}

// onBits is the features marked on: the app's marks where it made one,
// the provider's elsewhere. expOn is written before explicit, so a set
// explicit bit always reads its own value.
func (t *RequestTally) onBits() uint64 {
	exp := t.explicit.Load()
	return t.on.Load()&^exp | t.expOn.Load()&exp
}

type tallyKey struct{}

// Value returns the tally for the package's key, else the parent's value.
func (t *RequestTally) Value(key any) any {
	if key == (tallyKey{}) {
		return t
	}
	return t.Context.Value(key)
}

// String describes the context, as the context package's own do.
func (t *RequestTally) String() string { return "signals.RequestTally" }

// BeginTally makes t, which must not be in use, the tally of a request
// whose context is parent, for the features registered now; t is then a
// context to give the handler (or to embed in the handler's context). It
// returns false, leaving t unbound, when no feature is registered.
func (r *Recorder) BeginTally(t *RequestTally, parent context.Context) bool {
	fs := r.feat.set.Load()
	if fs == nil {
		return false
	}
	t.Context, t.set = parent, fs
	for _, b := range []*atomic.Uint64{&t.seen, &t.on, &t.explicit, &t.expOn} {
		if b.Load() != 0 { // a fresh t is zero: spare the atomic stores
			b.Store(0)
		}
	}
	if t.holds.Load() {
		t.held.Store(0)
		t.holds.Store(false)
	}
	return true
}

// EndTally adds the request's service time (admission to completion; a
// negative one counts as 0) to the work of every tallied request
// (Snapshot.Work) and to the On or Off moments of each feature its tally
// marked. A feature the request never marked is not counted: the
// contrast is between requests that asked for the feature. Call it once,
// when the request completes; a refused request has no service time and
// no tally.
func (r *Recorder) EndTally(t *RequestTally, service time.Duration) {
	if t.set == nil {
		return
	}
	x := max(service.Seconds(), 0)
	if t.holds.Load() {
		x = max(time.Duration(t.held.Load()).Seconds(), 0) // what it took from the bottleneck
	}
	sh := r.feat.store.Load().shard()
	sh.work.add(x)
	seen := t.seen.Load()
	if seen == 0 {
		return
	}
	on := t.onBits()
	for seen != 0 {
		i := bits.TrailingZeros64(seen)
		seen &= seen - 1
		if on&(1<<i) != 0 {
			sh.f[i].on.add(x)
		} else {
			sh.f[i].off.add(x)
		}
	}
}

// mark sets feature's bit to on; an explicit mark (Rendered, Skipped)
// overrides the provider's and is not overridden by it.
func (t *RequestTally) mark(feature string, on, explicit bool) bool {
	i, ok := t.set.lookup(feature)
	if !ok {
		return false
	}
	bit := uint64(1) << i
	switch {
	case explicit:
		if on {
			t.expOn.Or(bit)
		} else {
			t.expOn.And(^bit)
		}
		t.explicit.Or(bit)
	case on:
		t.on.Or(bit)
	default:
		t.on.And(^bit)
	}
	t.seen.Or(bit)
	return true
}

// state returns whether feature is marked, and whether on.
func (t *RequestTally) state(feature string) (on, marked bool) {
	i, ok := t.set.lookup(feature)
	if !ok {
		return false, false
	}
	bit := uint64(1) << i
	return t.onBits()&bit != 0, t.seen.Load()&bit != 0
}

func tallyOf(ctx context.Context) *RequestTally {
	if ctx == nil {
		return nil
	}
	t, _ := ctx.Value(tallyKey{}).(*RequestTally)
	return t
}

// Evaluated marks, in the tally of the request whose context is ctx,
// that feature was evaluated to on (rendered) or off. It is what the
// in-process provider calls for each boolean evaluation; an explicit mark
// (Rendered, Skipped) made for the same request wins over it whatever the
// order. It returns false when ctx carries no tally or the feature is not
// registered: then the caller counts the evaluation as unattributed
// (Recorder.Unattributed), never as off.
func Evaluated(ctx context.Context, feature string, on bool) bool {
	t := tallyOf(ctx)
	return t != nil && t.mark(feature, on, false)
}

// Rendered marks, in the tally of the request whose context is ctx, that
// the request rendered feature: its service time counts as the feature's
// On. Use it where the app decides to render without asking the provider,
// or to confirm what it asked. It overrides the provider's mark, and a
// later Skipped overrides it. It returns false when ctx carries no tally
// or the feature is not registered.
func Rendered(ctx context.Context, feature string) bool {
	t := tallyOf(ctx)
	return t != nil && t.mark(feature, true, true)
}

// Skipped marks, in the tally of the request whose context is ctx, that
// the request evaluated feature but did not render it (the flag said on,
// but the page had no room, the data was missing, a fallback answered):
// its service time counts as the feature's Off. It overrides the
// provider's mark, and a later Rendered overrides it. It returns false
// when ctx carries no tally or the feature is not registered.
func Skipped(ctx context.Context, feature string) bool {
	t := tallyOf(ctx)
	return t != nil && t.mark(feature, false, true)
}

// Held adds d to the time the request whose context is ctx held the
// service's bottleneck — a worker of its pool, a database connection —
// apart from the time it waited for it or for other services. A request
// that reports any counts that time in its tally instead of its service
// time: what a feature takes from the resource overload exhausts, not its
// wall time (a section that waits for a remote call costs the pool
// nothing). An app reports it for every request or for none. It returns
// false when ctx carries no tally.
func Held(ctx context.Context, d time.Duration) bool {
	t := tallyOf(ctx)
	if t == nil {
		return false
	}
	t.held.Add(int64(d))
	t.holds.Store(true)
	return true
}

// FeatureMarked reports how the tally of the request whose context is ctx
// marks feature: marked is false when it was neither evaluated nor marked
// (or ctx carries no tally), else on says rendered.
func FeatureMarked(ctx context.Context, feature string) (on, marked bool) {
	t := tallyOf(ctx)
	if t == nil {
		return false, false
	}
	return t.state(feature)
}
