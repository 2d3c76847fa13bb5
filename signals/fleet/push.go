package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	httpproblem "github.com/brownout/brownout/internal/problem"
	"github.com/brownout/brownout/signals"
)

// ErrNoInstances is wrapped by PushSource.Snapshot's error when no
// instance is live: the snapshot is empty, and the controller holds (then
// goes stale) as with any source that gives no signal.
var ErrNoInstances = errors.New("fleet: push: no live instance")

// ErrTooManyInstances is wrapped by Push's error when a push comes from a
// new instance and the source already keeps MaxInstances; ServeHTTP
// answers 429 with a Retry-After of when the longest-silent instance will
// be forgotten. Instances it knows still push.
var ErrTooManyInstances = errors.New("fleet: push: too many instances")

// ErrPushTooLarge is wrapped by Push's error for a push over the size
// the source keeps: more than 4096 histogram buckets in all (see
// PushConfig for what the source keeps). ServeHTTP answers 413, as for a
// body over MaxBody.
var ErrPushTooLarge = errors.New("fleet: push: too large")

// What the source keeps of each instance. A reading (an accepted push) is
// kept as decoded histograms, about 35 bytes a bucket (classic or
// native). A Recorder's push keeps two histograms, the latency and the
// classes' sojourn merged: 400–500 buckets under a varied load, at most
// 1 084 (each: 526 native buckets, all its 1024 log-linear buckets map to
// at NativeSchema, and 16 classic with the default bounds).
const (
	// maxReadings bounds the readings kept per instance: a Pusher at its
	// default 1 s over a 60 s Window needs 61. Beyond, or beyond
	// maxInstanceBuckets, readings are thinned (series.thin): the window's
	// base and the newest stay and the rest spread evenly, so rates stay
	// exact over a window a little longer than Window.
	maxReadings = 64
	// maxInstanceBuckets bounds the buckets kept per instance, about
	// 290 KB: at the default 10 s Window and 1 s pushes, the 11 readings of
	// a typical Recorder (≈ 5 000 buckets) fit, and 7 of the widest. With
	// MaxInstances it bounds the source: a hostile fleet of 1000 instances
	// keeps at most about 300 MB, twice what 1000 honest ones keep.
	maxInstanceBuckets = 8192
)

// DefaultMaxInstances is PushConfig.MaxInstances' default: a fleet of a
// thousand instances pushing to one daemon, each kept within about 300 KB.
const DefaultMaxInstances = 1000

// DefaultMaxPushBody is PushConfig.MaxBody's default, 256 KiB: the
// largest push the source keeps, maxPushBuckets (4 096) buckets each
// written at its widest (maxBucketJSON, 43 bytes: 176 KB), with the
// push's other fields (under 2 KB), fits with 45 % to spare for encoders
// that add spaces; a Recorder's largest push is 48 KB. Decoding is what a
// push costs (encoding/json reads buckets at about 10 MB/s): a body at
// this cap costs about 30 ms of CPU, against about 100 ms for 0.9 MB of
// buckets under the former cap of 1 MiB.
const DefaultMaxPushBody = 256 << 10

// maxBucketJSON is the longest a bucket is written in JSON: "[", the
// longest float64 (24 characters: -1.2345678901234567e-308), ",", the
// longest count (16 digits: 2^53), "]" and the comma after it.
const maxBucketJSON = 1 + 24 + 1 + 16 + 1 + 1

// PushConfig configures a PushSource. The zero value is usable.
type PushConfig struct {
	// Window is how far back deltas look: quantiles and rates describe the
	// last Window, as ScrapeConfig.Window. Default 10 s.
	Window time.Duration
	// Expire drops an instance from the fleet when it has not pushed for
	// this long (a crashed or partitioned instance stops counting). Set it
	// to about 3 × the interval the instances push at; the default, 15 s,
	// is generous for the Pusher's 1 s and tolerates pauses of a few
	// pushes. An expired instance is still listed by Health, not OK, for
	// 10 × Expire, then forgotten.
	Expire time.Duration
	// MaxBody bounds a push's size; a larger one gets 413. Default
	// DefaultMaxPushBody, 256 KiB (a Recorder's push is a few KiB, 48 KB
	// at most).
	MaxBody int64
	// MaxInstances bounds how many instances the source keeps (live ones
	// and expired ones still listed); a push from a new instance beyond it
	// is refused (ErrTooManyInstances, 429). Default DefaultMaxInstances
	// (1000). Each instance
	// keeps at most 64 readings and 8192 histogram buckets (about 290 KB;
	// a Recorder's pushes over the default Window keep about 170 KB), so
	// the source's memory is bounded by about MaxInstances × 300 KB.
	MaxInstances int
	// Now returns the current time, used as a push's arrival time.
	// Default time.Now.
	Now func() time.Time
}

func (c PushConfig) withDefaults() PushConfig {
	if c.Window <= 0 {
		c.Window = 10 * time.Second
	}
	if c.Expire <= 0 {
		c.Expire = 15 * time.Second
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxPushBody
	}
	if c.MaxInstances <= 0 {
		c.MaxInstances = DefaultMaxInstances
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// PushSource receives the signals of a fleet from its instances, for apps
// that cannot be scraped: each instance POSTs its Recorder's cumulative
// state (a Pusher does it every second) to ServeHTTP, and Snapshot merges
// the live instances exactly as ScrapeSource merges its targets — the same
// code: sums across instances, quantiles from the merged histograms (not
// averaged p99s), rates over the Window, counter resets as in Prometheus.
//
// A push is checked whole before it is applied: a refused one (4xx, with
// an application/problem+json body saying what is wrong) changes no
// signal. Every push carries its "time", and pushes of one run of an
// instance (same "start") are ordered by it: a late or repeated one is
// refused with 409, and so is a push from a run that started before the
// one pushing now (two processes sharing an instance id); a push whose
// time or start is more than MaxClockAhead ahead of the source's clock is
// refused with 400, so that it cannot shut its instance out. What the source
// keeps is bounded: MaxInstances instances, each at most 64 readings and
// 8192 histogram buckets (older readings are thinned, see PushConfig), a
// push at most 4096 buckets. ServeHTTP does no authentication; mount it
// behind your own.
//
// A PushSource must be made with NewPushSource. It is safe for concurrent
// use.
type PushSource struct {
	cfg PushConfig

	mu struct {
		sync.Mutex
		instances map[string]*pushInstance
		health    health
	}
}

// pushInstance is what the source knows of one instance.
type pushInstance struct {
	reads      series    // nil while expired
	seen       time.Time // arrival of the last accepted push
	run, clock time.Time // its start and time
	lastError  string    // the instance's last refused push
	// tallies are the cumulative feature tallies of its previous and its
	// latest push (kept apart from reads: only the last interval is
	// reported, and thinning must not choose its base); tallyBase is
	// false while the previous is unknown (the first push of a live
	// spell), true with a zero base after a restart.
	tallies   [2][]signals.Tally
	tallyBase bool
	// work is the same for the work of every tallied request; the
	// second is zero when the latest push did not carry it.
	work    [2]signals.Moments
	hasWork [2]bool
}

var _ http.Handler = (*PushSource)(nil)

// NewPushSource returns a source with no instance.
func NewPushSource(cfg PushConfig) *PushSource {
	s := &PushSource{cfg: cfg.withDefaults()}
	s.mu.instances = map[string]*pushInstance{}
	return s
}

// Name describes the source for messages.
func (s *PushSource) Name() string { return "push" }

// ServeHTTP takes one push: POST, Content-Type application/json (or
// none), a version-1 body. It answers 204 when the push was applied, 405
// (with Allow) for other methods, 413 over MaxBody or 4096 buckets, 415
// for another media type, 400 for a body that is malformed or invalid
// (without "time", or a time or start more than MaxClockAhead ahead of the
// source's clock, among them), 409 for a late push or a duplicate
// instance id, 408 for a body that stopped arriving before the server's
// read deadline (package server's BodyTimeout), and 429 (with
// Retry-After) when MaxInstances is reached; every refusal has an
// application/problem+json body.
func (s *PushSource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeProblem(w, &pushProblem{http.StatusMethodNotAllowed, "method", r.Method + " is not allowed: push with POST"})
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			p := &pushProblem{http.StatusUnsupportedMediaType, "media-type", fmt.Sprintf("Content-Type %q: want application/json", truncate(ct))}
			s.refuse("", p)
			writeProblem(w, p)
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		p := &pushProblem{http.StatusBadRequest, "malformed", "reading the body: " + err.Error()}
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			p = &pushProblem{http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf("the body is over %d bytes", s.cfg.MaxBody)}
		} else if errors.Is(err, os.ErrDeadlineExceeded) { // the server's body deadline
			p = &pushProblem{http.StatusRequestTimeout, "timeout", "the body did not arrive in time"}
		}
		s.refuse("", p)
		writeProblem(w, p)
		return
	}
	if err := s.Push(body); err != nil {
		p, ok := errors.AsType[*pushProblem](err)
		if !ok { // cannot happen: every refusal is a problem
			p = &pushProblem{http.StatusBadRequest, "invalid", err.Error()}
		}
		if errors.Is(err, ErrTooManyInstances) {
			w.Header().Set("Retry-After", strconv.Itoa(int(s.forgetIn().Round(time.Second)/time.Second)))
		}
		writeProblem(w, p)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Push applies one push body (the bytes ServeHTTP reads) at the source's
// Now, for a transport other than HTTP. Its error says why the push was
// refused and wraps ErrTooManyInstances or ErrPushTooLarge when that is
// why; a refused push changes no signal.
func (s *PushSource) Push(body []byte) error {
	p, err := decodePush(body)
	if err != nil {
		s.refuse(p.instance, err)
		return err
	}
	now := s.cfg.Now()
	if err := p.ahead(now); err != nil {
		s.refuse(p.instance, err)
		return err
	}
	if err := s.apply(now, p); err != nil {
		s.refuse(p.instance, err)
		return err
	}
	return nil
}

// MaxClockAhead is how far ahead of the source's clock a push's "time"
// or "start" may be. An instance's pushes are ordered by them, so that
// one far ahead would have every later push of the instance refused (409)
// until their clock caught up with it or the instance expired. Clocks kept
// by NTP agree within milliseconds and one left alone drifts by seconds a
// day, so that beyond 10 s a clock is wrong (or the push hostile); and
// one push within it shuts its instance's honest pushes out for at most
// 10 s, less than Expire's default (15 s): the instance never expires for
// it.
const MaxClockAhead = 10 * time.Second

// ahead refuses a push whose time or start is more than MaxClockAhead
// ahead of now.
func (p pushed) ahead(now time.Time) error {
	for _, t := range []struct {
		name string
		at   time.Time
	}{{"time", p.clock}, {"start", p.run}} {
		if d := t.at.Sub(now); d > MaxClockAhead {
			return invalid("%q %s is %s ahead of this server's clock (%s): at most %s; is the instance's clock set (NTP)?",
				t.name, t.at.Format(time.RFC3339Nano), d.Round(time.Millisecond), now.Format(time.RFC3339Nano), MaxClockAhead)
		}
	}
	return nil
}

// refuse records a refused push in the source's health, and in the
// instance's when the source knows it. Nothing else changes.
func (s *PushSource) refuse(instance string, err error) {
	now := s.cfg.Now()
	msg := err.Error()
	if instance != "" {
		msg = fmt.Sprintf("%s (instance %q)", msg, instance)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.health.fail(now, msg)
	if in, ok := s.mu.instances[instance]; ok {
		in.lastError = err.Error()
	}
}

// apply adds a checked push that arrived at now.
func (s *PushSource) apply(now time.Time, p pushed) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.mu.instances[p.instance]
	if in == nil {
		if len(s.mu.instances) >= s.cfg.MaxInstances {
			s.expire(now)
		}
		if len(s.mu.instances) >= s.cfg.MaxInstances {
			return &pushProblem{http.StatusTooManyRequests, "too-many-instances", fmt.Sprintf(
				"instance %q is new and the source already keeps %d instances; silent ones are forgotten %s after their last push",
				p.instance, len(s.mu.instances), 10*s.cfg.Expire)}
		}
		in = &pushInstance{}
		s.mu.instances[p.instance] = in
	} else if now.Sub(in.seen) >= s.cfg.Expire {
		in.reads = nil
	}
	if in.reads != nil { // live: check the order
		switch {
		case !p.run.IsZero() && !in.run.IsZero() && p.run.Before(in.run):
			return &pushProblem{http.StatusConflict, "duplicate-instance", fmt.Sprintf(
				"instance %q: a run that started later (%s) is pushing under this id, and this one started %s: give each process its own instance id",
				p.instance, in.run.Format(time.RFC3339Nano), p.run.Format(time.RFC3339Nano))}
		case p.run.Equal(in.run) && !p.clock.After(in.clock):
			return &pushProblem{http.StatusConflict, "stale", fmt.Sprintf(
				"instance %q: time %s is not after the last accepted push's %s: a late or repeated push",
				p.instance, p.clock.Format(time.RFC3339Nano), in.clock.Format(time.RFC3339Nano))}
		}
	}
	if in.reads != nil && p.run.Equal(in.run) {
		if err := checkTallyGrowth(in.tallies[1], p.st.tallies, in.work[1], p.st.work, in.hasWork[1] && p.st.hasWork); err != nil {
			return err
		}
	}
	switch {
	case in.reads == nil: // new, or back after expiring: no base
		in.tallies, in.tallyBase = [2][]signals.Tally{nil, p.st.tallies}, false
		in.work, in.hasWork = [2]signals.Moments{{}, p.st.work}, [2]bool{false, p.st.hasWork}
	case !p.run.Equal(in.run): // restarted: its counts are the increase
		in.tallies, in.tallyBase = [2][]signals.Tally{nil, p.st.tallies}, true
		in.work, in.hasWork = [2]signals.Moments{{}, p.st.work}, [2]bool{true, p.st.hasWork}
	default:
		in.tallies, in.tallyBase = [2][]signals.Tally{in.tallies[1], p.st.tallies}, true
		in.work, in.hasWork = [2]signals.Moments{in.work[1], p.st.work}, [2]bool{in.hasWork[1], p.st.hasWork}
	}
	p.st.tallies, p.st.work, p.st.hasWork = nil, signals.Moments{}, false
	in.reads.add(reading{at: now, clock: p.clock, run: p.run, st: p.st}, s.cfg.Window)
	in.reads.thin(maxReadings, maxInstanceBuckets)
	in.seen, in.run, in.clock, in.lastError = now, p.run, p.clock, ""
	s.mu.health.lastSuccess = now
	return nil
}

// forgetIn returns how long until the source forgets its longest-silent
// instance (10 × Expire after its last push), at least a second: when a
// new instance may try again after ErrTooManyInstances.
func (s *PushSource) forgetIn() time.Duration {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	wait := 10 * s.cfg.Expire
	for _, in := range s.mu.instances {
		wait = min(wait, in.seen.Add(10*s.cfg.Expire).Sub(now))
	}
	return max(wait, time.Second)
}

// expire drops the history of the instances silent for Expire and forgets
// those silent for 10 × Expire. Callers hold s.mu.
func (s *PushSource) expire(now time.Time) {
	for id, in := range s.mu.instances {
		switch silent := now.Sub(in.seen); {
		case silent >= 10*s.cfg.Expire:
			delete(s.mu.instances, id)
		case silent >= s.cfg.Expire:
			in.reads = nil
		}
	}
}

// Snapshot merges the signals of the instances live at now (see
// ScrapeSource for the computation). Its Tallies sum, by feature (sorted
// by name), and its Work sums each live instance's increase over its
// latest push interval (between its last two pushes, about a Pusher's
// Interval; an instance's first push gives none, a restarted one's
// counts are its increase; Work is zero while an instance whose tallies
// count pushes without it, as an older Pusher does), and so does its
// Recent, the class counts of that interval (RecentSpan its length,
// averaged over the instances): two snapshots taken between the same two
// pushes report the same interval. With none, the snapshot is empty and
// the error wraps ErrNoInstances.
func (s *PushSource) Snapshot(_ context.Context, now time.Time) (signals.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := signals.Snapshot{Time: now, Window: s.cfg.Window, Source: s.Name()}
	s.expire(now)
	live := s.live()
	if len(live) == 0 {
		return snap, fmt.Errorf("%w: none pushed in the last %s", ErrNoInstances, s.cfg.Expire)
	}
	f := aggregate{snap: &snap}
	var tallies map[string]*signals.Tally
	partial := false // an instance's tallies are summed without its work
	for _, id := range live {
		in := s.mu.instances[id]
		f.add("push "+id, in.reads)
		if in.tallyBase {
			tallies = addTallyDelta(tallies, in.tallies[1], in.tallies[0])
		}
		switch {
		case in.hasWork[0] && in.hasWork[1]:
			snap.Work.Merge(momentsDelta(in.work[1], in.work[0]))
		case in.tallyBase && len(in.tallies[1]) > 0:
			partial = true
		}
	}
	f.finish()
	snap.Tallies = sortedTallies(tallies)
	if partial {
		// Some of the fleet's requests are in the tallies but not in the
		// work (an older Pusher during a rolling upgrade): a work of the
		// others would read a feature's share of it too high. None, as
		// from a source without it.
		snap.Work = signals.Moments{}
	}
	return snap, errors.Join(f.errs...)
}

// live returns the ids of the live instances, sorted so that sums are
// computed in the same order every time. Callers hold s.mu and have
// called expire.
func (s *PushSource) live() []string {
	var ids []string
	for id, in := range s.mu.instances {
		if in.reads != nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Health reports the instances at the source's Now: OK when at least one
// is live; each instance with its last accepted push.
func (s *PushSource) Health() signals.SourceHealth {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	h := s.mu.health.report(s.Name())
	h.OK = false
	ids := make([]string, 0, len(s.mu.instances))
	for id := range s.mu.instances {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		in := s.mu.instances[id]
		live := in.reads != nil
		h.OK = h.OK || live
		h.Instances = append(h.Instances, signals.InstanceHealth{Name: id, OK: live, LastSeen: in.seen, LastError: in.lastError})
	}
	return h
}

// writeProblem is the source's one error writer: an
// application/problem+json body (RFC 9457).
func writeProblem(w http.ResponseWriter, p *pushProblem) {
	httpproblem.Write(w, httpproblem.Problem{Type: httpproblem.Type("push", p.kind), Title: pushTitles[p.kind], Status: p.status, Detail: p.detail})
}

// checkTallyGrowth checks an instance's cumulative tallies and work, cur,
// against its last accepted push's, prev, in the same run: no count goes
// down (a process that restarted gives a new start). (How much a feature
// may tally between two pushes is bounded by each push's own work — see
// checkTalliedWork — and no tighter: a Recorder reads its tallies before
// its work, so a request that ends between the two reads is in one
// push's work and only the next one's tallies; bounding a feature's
// increase by the work's refused honest pushes, and every one after
// them until the instance expired.)
func checkTallyGrowth(prev, cur []signals.Tally, prevW, curW signals.Moments, withWork bool) error {
	if withWork && (curW.N < prevW.N || curW.Sum < prevW.Sum*(1-momentsSlack(curW.N))) {
		return invalid("work: %d requests and %g s, fewer than the last push's %d and %g s in the same run: counts are cumulative (a restarted process gives a new start)", curW.N, curW.Sum, prevW.N, prevW.Sum)
	}
	for _, c := range cur {
		i := slices.IndexFunc(prev, func(t signals.Tally) bool { return t.Feature == c.Feature })
		if i < 0 {
			continue
		}
		if b := prev[i]; c.On.N < b.On.N || c.Off.N < b.Off.N || c.Unattributed < b.Unattributed {
			return invalid("%s: counts lower than the last push's in the same run: counts are cumulative (a restarted process gives a new start)", keyed("features", c.Feature))
		}
	}
	return nil
}

// addTallyDelta adds cur − base (cumulative tallies of one instance,
// matched by feature; a feature whose counts went down was reset, and its
// counts are the increase) into sum, by feature, and returns sum.
func addTallyDelta(sum map[string]*signals.Tally, cur, base []signals.Tally) map[string]*signals.Tally {
	for _, c := range cur {
		d := c
		if i := slices.IndexFunc(base, func(b signals.Tally) bool { return b.Feature == c.Feature }); i >= 0 {
			b := base[i]
			if c.On.N >= b.On.N && c.Off.N >= b.Off.N && c.Unattributed >= b.Unattributed &&
				c.On.Sum >= b.On.Sum && c.Off.Sum >= b.Off.Sum {
				d = signals.Tally{Feature: c.Feature, On: c.On.Sub(b.On), Off: c.Off.Sub(b.Off), Unattributed: c.Unattributed - b.Unattributed}
			}
		}
		if sum == nil {
			sum = map[string]*signals.Tally{}
		}
		t := sum[c.Feature]
		if t == nil {
			t = &signals.Tally{Feature: c.Feature}
			sum[c.Feature] = t
		}
		t.Merge(d)
	}
	return sum
}

// momentsDelta is cur − base for cumulative moments of one instance;
// counts that went down were reset, and the increase is cur.
func momentsDelta(cur, base signals.Moments) signals.Moments {
	if cur.N >= base.N && cur.Sum >= base.Sum {
		return cur.Sub(base)
	}
	return cur
}

// sortedTallies returns the tallies of m sorted by feature.
func sortedTallies(m map[string]*signals.Tally) []signals.Tally {
	if len(m) == 0 {
		return nil
	}
	out := make([]signals.Tally, 0, len(m))
	for _, t := range m {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b signals.Tally) int { return strings.Compare(a.Feature, b.Feature) })
	return out
}
