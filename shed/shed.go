package shed

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

// ErrShed is wrapped by the errors of Acquire when a request is refused.
var ErrShed = errors.New("shed: request refused")

// RefusedError says why Acquire refused a request.
type RefusedError struct {
	Class  signals.Class
	Reason signals.Reason
}

func (e *RefusedError) Error() string {
	return "shed: " + e.Class.String() + " request refused: " + e.Reason.String()
}

func (e *RefusedError) Unwrap() error { return ErrShed }

// Config configures a Shedder. The zero value is usable.
type Config struct {
	Gate GateConfig
	// Classify returns a request's class. Default signals.ClassOf (the
	// X-Priority header; unknown or absent is default). A Routes table
	// provides one.
	Classify func(*http.Request) signals.Class
	// Cost returns a request's estimated cost in units (1 = an average
	// request). Default 1. A Routes table provides one.
	Cost func(*http.Request) float64
	// Recorder receives the signals (arrivals, sojourn by class, in flight,
	// latency, outcomes, refusals by class and reason). Default: a new
	// one, see Recorder.
	Recorder *signals.Recorder
	// ShedLevel returns the brownout controller's cascade level
	// (dimmer.State.Shed); requests of the classes it covers are refused
	// at the door, critical never. Default: no cascade.
	ShedLevel func() float64
	// RateLimit limits each client; nil means no per-client limit.
	RateLimit *RateLimitConfig
	// RetryAfter is the Retry-After sent with 503s. Default 1 s.
	RetryAfter time.Duration
	// Failed reports whether an admitted request's status is a failure.
	// Default: status ≥ 500.
	Failed func(status int) bool
	// Now returns the time. Default time.Now.
	Now func() time.Time
}

// Shedder is admission control for a server: net/http middleware (and an
// Acquire API for other transports) around a Gate. See the package
// documentation.
//
// A Shedder must be made with New. It is safe for concurrent use.
type Shedder struct {
	cfg       Config
	rec       *signals.Recorder
	now       func() time.Time
	classify  func(*http.Request) signals.Class
	cost      func(*http.Request) float64
	failed    func(int) bool
	shedLevel func() float64
	limits    *rateLimits
	replies   [signals.NumReasons]reply
	tickets   sync.Pool

	mu   sync.Mutex // guards gate; never held while calling out
	gate *Gate
}

// New returns a Shedder.
func New(cfg Config) (*Shedder, error) {
	s := &Shedder{cfg: cfg, rec: cfg.Recorder, now: cfg.Now, classify: cfg.Classify, cost: cfg.Cost,
		failed: cfg.Failed, shedLevel: cfg.ShedLevel, gate: NewGate(cfg.Gate)}
	if s.rec == nil {
		s.rec = signals.NewRecorder(signals.Config{})
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.classify == nil {
		s.classify = signals.ClassOf
	}
	if s.cost == nil {
		s.cost = func(*http.Request) float64 { return 1 }
	}
	if s.failed == nil {
		s.failed = func(status int) bool { return status >= 500 }
	}
	retry := cfg.RetryAfter
	if retry <= 0 {
		retry = time.Second
	}
	if cfg.RateLimit != nil {
		rl, err := newRateLimits(*cfg.RateLimit)
		if err != nil {
			return nil, err
		}
		s.limits = rl
	}
	s.replies = buildReplies(retry)
	s.tickets.New = func() any { return new(Ticket) }
	return s, nil
}

// Recorder returns the recorder the Shedder writes its signals to.
func (s *Shedder) Recorder() *signals.Recorder { return s.rec }

// Stats returns the gate's limit, the cost in flight and the queue lengths.
func (s *Shedder) Stats() (limit, inflight float64, queued [signals.NumClasses]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range queued {
		queued[c] = s.gate.Queued(signals.Class(c))
	}
	return s.gate.Limit(), s.gate.InFlight(), queued
}

// wake is a batch of gate results to act on after the lock is released.
type wake struct {
	n     int
	items [8]*Ticket
	more  []*Ticket
}

func (w *wake) add(t *Ticket) {
	if w.n < len(w.items) {
		w.items[w.n] = t
		w.n++
		return
	}
	w.more = append(w.more, t)
}

// fire closes the wake-up channels: admitted tickets start, refused ones
// answer.
func (w *wake) fire() {
	for _, t := range w.items[:w.n] {
		close(t.ready)
	}
	for _, t := range w.more {
		close(t.ready)
	}
}

func (s *Shedder) dropper(w *wake) func(*Ticket, signals.Reason) {
	return func(t *Ticket, why signals.Reason) {
		t.refused, t.why = true, why
		s.rec.Reject(t.Class, why)
		if t.ready != nil {
			w.add(t)
		}
	}
}

// TryAcquire admits a request of class c and cost at now if it can start
// at once, without queueing: the fast path, lock-free (a compare-and-swap
// on the cost in flight). Release the ticket when the work ends.
func (s *Shedder) TryAcquire(now time.Time, c signals.Class, cost float64) (*Ticket, bool) {
	if cost <= 0 {
		cost = 1
	}
	t := s.tickets.Get().(*Ticket)
	*t = Ticket{Class: c % signals.NumClasses, Cost: cost, Arrival: now}
	if s.gate.queued.Load() == 0 && s.gate.tryAdmit(t, now) {
		return t, true
	}
	s.tickets.Put(t)
	return nil, false
}

// Release ends an admitted request's work at now and starts queued ones.
// The cost is returned lock-free. The lock is taken when requests wait (to
// start them), and otherwise for one release in sampleEvery, to feed the
// adaptive limit — an EWMA needs samples, not every sample, and a lock per
// release would make every core queue on it. Call it once per ticket.
func (s *Shedder) Release(now time.Time, t *Ticket) {
	waiting := s.gate.release(t)
	var w wake
	if waiting || rand.Uint32()%sampleEvery == 0 {
		s.mu.Lock()
		s.gate.sample(now, t)
		s.dispatch(now, &w)
		s.mu.Unlock()
	}
	w.fire()
	s.tickets.Put(t)
}

// sampleEvery: one uncontended release in this many feeds the limit.
const sampleEvery = 8

// dispatch admits queued requests while there is room. Callers hold s.mu.
//
// No wake-up is lost to the lock-free release: a releaser subtracts its
// cost before it reads the queued count, and a waiter adds itself to the
// count before it looks for room (here, under the lock); with sequentially
// consistent atomics, either the releaser sees the waiter and dispatches,
// or the waiter sees the room.
func (s *Shedder) dispatch(now time.Time, w *wake) {
	if s.gate.queued.Load() == 0 {
		return
	}
	drop := s.dropper(w)
	for {
		n := s.gate.Next(now, drop)
		if n == nil {
			return
		}
		w.add(n)
	}
}

// Acquire waits until a request of class c and cost may start, or refuses
// it (a *RefusedError wrapping ErrShed). It is the transport-neutral form of
// the middleware: call release(failed) when the work ends. The deadline,
// when not zero, bounds the wait; so does ctx.
func (s *Shedder) Acquire(ctx context.Context, c signals.Class, cost float64, deadline time.Time) (release func(failed bool), err error) {
	now := s.now()
	c %= signals.NumClasses
	s.rec.Arrive(c)
	if err := s.door(c, ""); err != nil {
		return nil, err
	}
	t, err := s.wait(ctx, c, cost, now, deadline)
	if err != nil {
		return nil, err
	}
	start := t.Start
	return func(failed bool) {
		end := s.now()
		s.Release(end, t)
		s.rec.Done(c, start, end, failed, deadline)
	}, nil
}

// door applies the cascade's shed level: a share of the class's clients,
// sticky per client key, is refused.
func (s *Shedder) door(c signals.Class, key string) error {
	if s.shedLevel == nil {
		return nil
	}
	share := dimmer.ShedShare(s.shedLevel(), c)
	if share <= 0 || (share < 1 && keyFraction(key) >= share) {
		return nil
	}
	s.rec.Reject(c, signals.ReasonShedLevel)
	return &RefusedError{Class: c, Reason: signals.ReasonShedLevel}
}

// keyFraction maps a client key to [0, 1) (FNV-1a): the same clients are
// shed while the level holds. An empty key is 0: always within the share.
func keyFraction(key string) float64 {
	if key == "" {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return float64(h) / (1 << 32)
}

// wait takes a request through the gate, blocking while it is queued.
func (s *Shedder) wait(ctx context.Context, c signals.Class, cost float64, now, deadline time.Time) (*Ticket, error) {
	c %= signals.NumClasses // a custom classifier's stray value
	t := s.tickets.Get().(*Ticket)
	*t = Ticket{Class: c, Cost: cost, Arrival: now, Deadline: deadline}
	if t.Cost <= 0 {
		t.Cost = 1
	}
	// The fast path: nothing waits and there is room — no lock. (With
	// requests queued, sweeps and the time bound need the lock.)
	if (deadline.IsZero() || now.Before(deadline)) && s.gate.queued.Load() == 0 && s.gate.tryAdmit(t, now) {
		s.rec.Queued(c, 0, now)
		s.rec.Start(now)
		return t, nil
	}
	var w wake
	s.mu.Lock()
	d, why := s.gate.Arrive(now, t, s.dropper(&w))
	if d == Queued {
		t.ready = make(chan struct{})
		s.dispatch(now, &w) // room freed by a lock-free release meanwhile
	}
	s.mu.Unlock()
	w.fire()
	switch d {
	case Admitted:
		s.rec.Queued(c, 0, now)
		s.rec.Start(now)
		return t, nil
	case Refused:
		s.rec.Reject(c, why)
		s.tickets.Put(t)
		return nil, &RefusedError{Class: c, Reason: why}
	}

	// Queued: wait for a slot, the class's max wait, the deadline or the
	// client, whichever comes first.
	limit := s.gate.cfg.MaxWait[c]
	if !deadline.IsZero() {
		limit = min(limit, deadline.Sub(now))
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-t.ready:
	case <-timer.C:
		s.cancel(t, signals.ReasonMaxWait)
	case <-ctx.Done():
		s.cancel(t, signals.ReasonCanceled)
	}
	<-t.ready // closed by whoever decided: admitted or refused
	if t.refused {
		why := t.why
		s.tickets.Put(t)
		return nil, &RefusedError{Class: c, Reason: why}
	}
	start := t.Start
	s.rec.Queued(c, start.Sub(now), start)
	s.rec.Start(start)
	return t, nil
}

// cancel takes a waiting ticket out of the gate, unless the gate already
// decided for it.
func (s *Shedder) cancel(t *Ticket, why signals.Reason) {
	s.mu.Lock()
	ok := s.gate.Cancel(s.now(), t)
	s.mu.Unlock()
	if ok {
		t.refused, t.why = true, why
		s.rec.Reject(t.Class, why)
		close(t.ready)
	}
}

type ctxKey struct{}

// requestInfo travels in the request context for Propagate.
type requestInfo struct {
	class signals.Class
}

// ClassFrom returns the class the middleware gave the request in ctx.
func ClassFrom(ctx context.Context) (signals.Class, bool) {
	ri, ok := ctx.Value(ctxKey{}).(*requestInfo)
	if !ok {
		return signals.Default, false
	}
	return ri.class, true
}

// Middleware returns the Shedder as net/http middleware. Refused requests
// get 503 (overload) or 429 (rate limit) with Retry-After, Cache-Control:
// no-store and an application/problem+json body, before the handler runs.
// Admitted requests carry their class (ClassFrom) and their deadline (the
// context's) to the handler, so that outbound calls made with Propagate
// pass both on.
func (s *Shedder) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := s.now()
		c := s.classify(r) % signals.NumClasses
		s.rec.Arrive(c)
		deadline, hasDeadline, _ := signals.DeadlineOf(r, now)
		key := ""
		if s.limits != nil || s.shedLevel != nil {
			key = clientKey(r, s.cfg.RateLimit)
		}
		if s.limits != nil {
			if ok := s.limits.allow(w.Header(), key, now); !ok {
				s.rec.Reject(c, signals.ReasonRateLimit)
				s.replies[signals.ReasonRateLimit].write(w, false)
				return
			}
		}
		if err := s.door(c, key); err != nil {
			s.replies[signals.ReasonShedLevel].write(w, true)
			return
		}
		if !hasDeadline {
			deadline = time.Time{}
		}
		t, err := s.wait(r.Context(), c, s.cost(r), now, deadline)
		if err != nil {
			var re *RefusedError
			if errors.As(err, &re) && re.Reason != signals.ReasonCanceled {
				s.replies[re.Reason].write(w, true)
			}
			return
		}
		ctx := context.WithValue(r.Context(), ctxKey{}, &requestInfo{class: c})
		if hasDeadline {
			if d, ok := ctx.Deadline(); !ok || deadline.Before(d) {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, deadline)
				defer cancel()
			}
		}
		sw := signals.StatusWriter{ResponseWriter: w}
		start := t.Start
		defer func() {
			p := recover()
			end := s.now()
			s.Release(end, t)
			s.rec.Done(c, start, end, p != nil || s.failed(sw.Status()), deadline)
			if p != nil {
				panic(p)
			}
		}()
		next.ServeHTTP(&sw, r.WithContext(ctx))
	})
}

// reply is a pre-built refusal.
type reply struct {
	status int
	body   []byte
	retry  []string
	length []string
}

var (
	problemType = []string{"application/problem+json"}
	noStore     = []string{"no-store"}
)

func (rp reply) write(w http.ResponseWriter, withRetry bool) {
	h := w.Header()
	h["Content-Type"] = problemType
	h["Cache-Control"] = noStore
	if withRetry {
		h["Retry-After"] = rp.retry
	}
	h["Content-Length"] = rp.length
	w.WriteHeader(rp.status)
	w.Write(rp.body)
}

var reasonDetail = [signals.NumReasons]string{
	signals.ReasonMaxWait:     "The request would have waited longer than its class allows.",
	signals.ReasonCoDel:       "The queue has been standing; stale requests are dropped so that fresh ones succeed.",
	signals.ReasonDeadline:    "The request's deadline passed before its work could start.",
	signals.ReasonConcurrency: "The server is at its concurrency limit.",
	signals.ReasonRateLimit:   "Too many requests from this client.",
	signals.ReasonShedLevel:   "The server is shedding this class of requests to protect critical ones.",
	signals.ReasonCanceled:    "The client went away while the request waited.",
}

func buildReplies(retry time.Duration) [signals.NumReasons]reply {
	var out [signals.NumReasons]reply
	secs := []string{strconv.Itoa(int(max(retry.Round(time.Second), time.Second) / time.Second))}
	for i := range out {
		why := signals.Reason(i)
		status, title := http.StatusServiceUnavailable, "Service overloaded"
		if why == signals.ReasonRateLimit {
			status, title = http.StatusTooManyRequests, "Too many requests"
		}
		body := fmt.Sprintf(`{"type":"urn:brownout:shed:%s","title":%q,"status":%d,"detail":%q,"reason":%q}`,
			why, title, status, reasonDetail[i], why.String())
		out[i] = reply{status: status, body: []byte(body), retry: secs, length: []string{strconv.Itoa(len(body))}}
	}
	return out
}
