package shed

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/gate"
	httpproblem "github.com/brownout/brownout/internal/problem"
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
	// Classify returns a request's class. Default: Default. A Routes
	// table provides one. The X-Priority header may lower the class it
	// returns, never raise it (signals.LowerClass), unless TrustPriority:
	// any client can send the header, and critical is never shed.
	Classify func(*http.Request) signals.Class
	// TrustPriority makes the X-Priority header, when it names a class,
	// the request's class, raising it above what Classify says as well as
	// lowering it: for a service whose callers are your own services,
	// which forward the class of the request that made the call
	// (Propagate), so that a dependency sheds what its caller would. Never
	// on a server that clients reach directly. Default false.
	TrustPriority bool
	// Cost returns a request's estimated cost in units (1 = an average
	// request). Default 1. A Routes table provides one.
	Cost func(*http.Request) float64
	// Recorder receives the signals (arrivals, sojourn by class, in flight,
	// latency, outcomes, refusals by class and reason), and the Shedder
	// registers its gate with it (gate.utilization, gate.queued,
	// gate.limit; signals.Recorder.SetGate). Default: a new one, see
	// Recorder.
	Recorder *signals.Recorder
	// ShedLevel returns the brownout controller's cascade level
	// (dimmer.State.Shed); requests of the classes it covers are refused
	// at the door, critical never. Default: no cascade.
	ShedLevel func() float64
	// ShedSeed returns the seed of the hash that picks, by client key,
	// which clients the cascade sheds (the same ones while the level
	// holds): with a seed it cannot know, a client cannot choose a key
	// that is shed last. Instances that share a seed shed the same
	// clients: in fleet mode give the daemon's, provider.Remote.ShedSeed.
	// Default, or while it returns false: a seed drawn at random when the
	// Shedder is made, right for an app that runs its own controller.
	ShedSeed func() (dimmer.ShedSeed, bool)
	// RateLimit limits each client; nil means no per-client limit.
	RateLimit *RateLimitConfig
	// ClientKey, when set, returns a request's client key, the one key of
	// both the rate limits and the cascade's sticky shedding (which keep
	// only a hash of it, see RateLimitStore and ShedSeed); an empty
	// string falls back to the default key: the authenticated user id
	// header (RateLimitConfig.KeyHeader, default X-User-ID), else the
	// client's address (see TrustedProxies).
	// Shedder.ClientKey returns the key the middleware uses, for
	// Request.Key when HTTP requests go through Acquire.
	ClientKey func(*http.Request) string
	// TrustedProxies are the load balancers and reverse proxies in front of
	// the server (ParseProxies reads "10.0.0.0/8,127.0.0.1"). Only when a
	// request's connection (RemoteAddr) comes from one of them is the
	// client's address read from ProxyHeader: its list is walked from the
	// right, skipping addresses that are themselves trusted proxies, and
	// the first untrusted one is the client; an entry that is not an
	// address (garbage, "unknown", an obfuscated "_hidden") stops the walk
	// at the last trusted hop. A list of trusted proxies only gives its
	// leftmost. Requests from any other peer are keyed by the peer's own
	// address, their headers ignored, so a client cannot choose its key.
	// Empty (the default): the connection's address, no header is read.
	TrustedProxies []netip.Prefix
	// ProxyHeader is the header the trusted proxies append the address of
	// their peer to: "X-Forwarded-For" (the default; "client, proxy1",
	// IPv6 bare or "[2001:db8::1]:4711", with or without a port) or
	// "Forwarded" (RFC 7239's for= parameter: for=192.0.2.60,
	// for="[2001:db8::1]:4711"). Name the header your outermost proxy
	// overwrites or appends to: a client can send the other one, and
	// proxies pass it on untouched. Several header lines are one list, in
	// order (a quote cannot run from one line into the next). Any header
	// holding a comma-separated list of addresses works, among them one a
	// proxy sets to a single address.
	ProxyHeader string
	// RetryAfter is the Retry-After sent with 503s. Default 1 s.
	RetryAfter time.Duration
	// Failed reports whether an admitted request's status is a failure.
	// Default: status ≥ 500.
	Failed func(status int) bool
	// Now returns the time. Default time.Now.
	Now func() time.Time
}

// GateConfig configures the gate: per-class waits bounded in time, CoDel,
// and the adaptive concurrency limit. See the fields' documentation for the
// defaults.
type GateConfig = gate.Config

// LimitConfig configures the adaptive concurrency limit; see its
// documentation for the model. The zero value is adaptive.
type LimitConfig = gate.LimitConfig

// Shedder is admission control for a server: net/http middleware (and an
// Acquire API for other transports) around a gate. See the package
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
	shedSeed  func() (dimmer.ShedSeed, bool)
	ownSeed   hashKey // when shedSeed has none
	limits    *rateLimits
	keys      keyer
	replies   [signals.NumReasons]reply
	tickets   sync.Pool

	mu   sync.Mutex // guards gate; never held while calling out
	gate *gate.Gate
}

// New returns a Shedder.
func New(cfg Config) (*Shedder, error) {
	s := &Shedder{cfg: cfg, rec: cfg.Recorder, now: cfg.Now, cost: cfg.Cost, failed: cfg.Failed,
		classify:  signals.PriorityClassifier(cfg.Classify, cfg.TrustPriority),
		shedLevel: cfg.ShedLevel, shedSeed: cfg.ShedSeed, ownSeed: randomHashKey(), gate: gate.New(cfg.Gate)}
	if s.rec == nil {
		s.rec = signals.NewRecorder(signals.Config{})
	}
	if s.now == nil {
		s.now = time.Now
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
	var err error
	if s.keys, err = newKeyer(&cfg); err != nil {
		return nil, err
	}
	if cfg.RateLimit != nil {
		rl, err := newRateLimits(*cfg.RateLimit)
		if err != nil {
			return nil, err
		}
		s.limits = rl
	}
	s.replies = buildReplies(retry)
	s.tickets.New = func() any { return new(ticket) }
	s.rec.SetGate(func() signals.GateReading {
		st := s.Stats()
		return signals.GateReading{Limit: st.Limit, InFlight: st.InFlight, Queued: st.Queued[0] + st.Queued[1] + st.Queued[2], Standing: st.Standing}
	})
	return s, nil
}

// ClientKey returns r's client key, the one the middleware's rate limits
// and cascade use: Config.ClientKey's, else "u:" and the user id header,
// else "ip:" and the client's address (behind Config.TrustedProxies, the
// address they forwarded). Give it to Acquire as Request.Key so that a
// client is shed alike on every path.
func (s *Shedder) ClientKey(r *http.Request) string { return s.keys.key(r) }

// ClientAddr returns r's client address: the connection's, or, when it
// comes from one of Config.TrustedProxies, the address they forwarded (the
// zero Addr when RemoteAddr does not parse). With a RateLimiter keyed on
// it, limits hold per address as well as per user.
func (s *Shedder) ClientAddr(r *http.Request) netip.Addr { return s.keys.addr(r) }

// Recorder returns the recorder the Shedder writes its signals to.
func (s *Shedder) Recorder() *signals.Recorder { return s.rec }

// GateStats is the gate at one moment.
type GateStats struct {
	// Limit is the adaptive concurrency limit in cost units; Admitting is
	// what admissions see now (half the limit while a probe measures the
	// baseline).
	Limit, Admitting float64
	// InFlight is the cost admitted and not done.
	InFlight float64
	// Queued is how many requests of each class wait, and Standing whether
	// the class's queue is standing (CoDel: served newest first, waits cut
	// to the target) — the decision brownout_queue_standing reports.
	Queued   [signals.NumClasses]int
	Standing [signals.NumClasses]bool
	// Ratio is the last latency ratio R(L)/R(L/2) the limit measured (0
	// before the first) and Baseline the latency per cost unit at half the
	// limit (0 before the first probe).
	Ratio    float64
	Baseline time.Duration
}

// Stats returns the gate's limit, the cost in flight and the queues.
func (s *Shedder) Stats() GateStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st GateStats
	now := s.now()
	for c := range st.Queued {
		st.Queued[c] = s.gate.Queued(signals.Class(c))
		st.Standing[c] = s.gate.Standing(signals.Class(c), now)
	}
	ratio, base := s.gate.Ratio()
	st.Limit, st.Admitting, st.InFlight, st.Ratio = s.gate.Limit(), s.gate.Admitting(), s.gate.InFlight(), ratio
	st.Baseline = time.Duration(base * float64(time.Second))
	return st
}

// ticket is a gate ticket with a generation, so that a Permit released
// twice, or after its ticket went back to the pool, is a no-op.
type ticket struct {
	gate.Ticket
	gen atomic.Uint64
}

// Permit is an admitted request, for Release. The zero Permit releases
// nothing.
type Permit struct {
	t   *ticket
	gen uint64
}

// wake is a batch of gate results to act on after the lock is released.
type wake struct {
	n     int
	items [8]*gate.Ticket
	more  []*gate.Ticket
}

func (w *wake) add(t *gate.Ticket) {
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
		close(t.Ready)
	}
	for _, t := range w.more {
		close(t.Ready)
	}
}

func (s *Shedder) dropper(w *wake) func(*gate.Ticket, signals.Reason) {
	return func(t *gate.Ticket, why signals.Reason) {
		t.Refused, t.Why = true, why
		s.rec.Reject(t.Class, why)
		if t.Ready != nil {
			w.add(t)
		}
	}
}

func (s *Shedder) newTicket(c signals.Class, cost float64, now, deadline time.Time) *ticket {
	t := s.tickets.Get().(*ticket)
	t.Ticket = gate.Ticket{Class: c % signals.NumClasses, Cost: cost, Arrival: now, Deadline: deadline}
	if t.Cost <= 0 {
		t.Cost = 1
	}
	return t
}

// putTicket returns t to the pool; its generation moves on, so that any
// Permit still holding it releases nothing.
func (s *Shedder) putTicket(t *ticket) {
	t.gen.Add(1)
	t.Ticket = gate.Ticket{}
	s.tickets.Put(t)
}

// TryAcquire admits a request of class c and cost at now if it can start
// at once, without queueing: the fast path, lock-free (a compare-and-swap
// on the cost in flight). Release the Permit when the work ends. It applies
// neither the cascade nor rate limits; Acquire does.
func (s *Shedder) TryAcquire(now time.Time, c signals.Class, cost float64) (Permit, bool) {
	t := s.newTicket(c, cost, now, time.Time{})
	if s.gate.TryAdmit(&t.Ticket, now) {
		return Permit{t: t, gen: t.gen.Load()}, true
	}
	s.putTicket(t)
	return Permit{}, false
}

// Release ends an admitted request's work at now and starts queued ones.
// The cost is returned lock-free; the lock is taken only when requests
// wait (to start them) or the adaptive limit is due an update (a few times
// a second). Releasing a Permit a second time does nothing.
func (s *Shedder) Release(now time.Time, p Permit) {
	if p.t == nil || !p.t.gen.CompareAndSwap(p.gen, p.gen+1) {
		return
	}
	s.release(now, &p.t.Ticket)
	p.t.Ticket = gate.Ticket{}
	s.tickets.Put(p.t)
}

// release returns t's cost and starts queued requests.
func (s *Shedder) release(now time.Time, t *gate.Ticket) {
	waiting, due := s.gate.Release(now, t)
	if !waiting && !due {
		return
	}
	if !waiting && !s.mu.TryLock() {
		return // someone else holds the lock: the update waits for the next release
	} else if waiting {
		s.mu.Lock()
	}
	var w wake
	s.gate.Update(now)
	s.dispatch(now, &w)
	s.mu.Unlock()
	w.fire()
}

// dispatch admits queued requests while there is room. Callers hold s.mu.
//
// No wake-up is lost to the lock-free release: a releaser subtracts its
// cost before it reads the queued count, and a waiter adds itself to the
// count before it looks for room (here, under the lock); with sequentially
// consistent atomics, either the releaser sees the waiter and dispatches,
// or the waiter sees the room.
func (s *Shedder) dispatch(now time.Time, w *wake) {
	if !s.gate.Waiting() {
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

// Request is one unit of work for Acquire.
type Request struct {
	// Class is the request's class, as the caller decides: Acquire reads
	// no header. From a client's own say (a header, a message field), give
	// it no more than signals.LowerClass would.
	Class signals.Class
	// Cost in units (1 = an average request). Default 1.
	Cost float64
	// Deadline, when not zero, is when the client stops waiting: it
	// bounds the wait, and a deadline already passed is refused at once.
	Deadline time.Time
	// Key identifies the client, for the cascade's sticky shedding (the
	// same clients are refused while the shed level holds) and nothing
	// else. Empty: each request draws at random, so that a shed level of
	// 0.05 still refuses about 5 % of them. For an HTTP request,
	// Shedder.ClientKey is the key the middleware would use.
	Key string
}

// Acquire waits until a request may start, or refuses it (a *RefusedError
// wrapping ErrShed). It is the transport-neutral form of the middleware:
// the cascade, then the gate (rate limits are per HTTP client and stay in
// the middleware). Call release(failed) when the work ends; a second call
// does nothing. ctx bounds the wait.
func (s *Shedder) Acquire(ctx context.Context, r Request) (release func(failed bool), err error) {
	now := s.now()
	c := r.Class % signals.NumClasses
	s.rec.Arrive(c)
	if err := s.door(c, r.Key); err != nil {
		return nil, err
	}
	t, err := s.wait(ctx, c, r.Cost, now, r.Deadline)
	if err != nil {
		return nil, err
	}
	// The ticket stays out of the pool: the release function may outlive
	// any use of it.
	var done atomic.Bool
	arrival, deadline := t.Arrival, r.Deadline
	return func(failed bool) {
		if done.Swap(true) {
			return
		}
		end := s.now()
		s.release(end, &t.Ticket)
		s.rec.Done(c, arrival, end, failed, deadline) // (the latency its client sees: the wait included)
	}, nil
}

// door applies the cascade's shed level: a share of the class's clients,
// sticky per client key, is refused.
func (s *Shedder) door(c signals.Class, key string) error {
	if s.shedLevel == nil {
		return nil
	}
	share := dimmer.ShedShare(s.shedLevel(), c)
	if share <= 0 || (share < 1 && s.keyFraction(key) >= share) {
		return nil
	}
	s.rec.Reject(c, signals.ReasonShedLevel)
	return &RefusedError{Class: c, Reason: signals.ReasonShedLevel}
}

// keyFraction maps a client key to [0, 1) by SipHash under the shed seed
// (keyhash.go): the same clients are shed while the level holds, and which
// ones cannot be told without the seed. An empty key draws at random.
func (s *Shedder) keyFraction(key string) float64 {
	if key == "" {
		return rand.Float64()
	}
	k := s.ownSeed
	if s.shedSeed != nil {
		if seed, ok := s.shedSeed(); ok {
			k = hashKeyOf(seed)
		}
	}
	return k.fraction(key)
}

// wait takes a request through the gate, blocking while it is queued.
func (s *Shedder) wait(ctx context.Context, c signals.Class, cost float64, now, deadline time.Time) (*ticket, error) {
	t := s.newTicket(c, cost, now, deadline)
	c = t.Class
	// The fast path: nothing waits and there is room — no lock. (With
	// requests queued, sweeps and the time bound need the lock.)
	if (deadline.IsZero() || now.Before(deadline)) && s.gate.TryAdmit(&t.Ticket, now) {
		s.rec.Queued(c, 0, now)
		s.rec.Start(now)
		return t, nil
	}
	var w wake
	s.mu.Lock()
	d, why := s.gate.Arrive(now, &t.Ticket, s.dropper(&w))
	if d == gate.Queued {
		t.Ready = make(chan struct{})
		s.dispatch(now, &w) // room freed by a lock-free release meanwhile
	}
	s.mu.Unlock()
	w.fire()
	switch d {
	case gate.Admitted:
		s.rec.Queued(c, 0, now)
		s.rec.Start(now)
		return t, nil
	case gate.Refused:
		s.rec.Reject(c, why)
		s.putTicket(t)
		return nil, &RefusedError{Class: c, Reason: why}
	}

	// Queued: wait for a slot, the class's max wait, the deadline or the
	// client, whichever comes first.
	limit := s.gate.Config().MaxWait[c]
	if !deadline.IsZero() {
		limit = min(limit, deadline.Sub(now))
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-t.Ready:
	case <-timer.C:
		s.cancel(&t.Ticket, signals.ReasonMaxWait)
	case <-ctx.Done():
		s.cancel(&t.Ticket, signals.ReasonCanceled)
	}
	<-t.Ready // closed by whoever decided: admitted or refused
	if t.Refused {
		why := t.Why
		s.putTicket(t)
		return nil, &RefusedError{Class: c, Reason: why}
	}
	start := t.Start
	s.rec.Queued(c, start.Sub(now), start)
	s.rec.Start(start)
	return t, nil
}

// cancel takes a waiting ticket out of the gate, unless the gate already
// decided for it.
func (s *Shedder) cancel(t *gate.Ticket, why signals.Reason) {
	s.mu.Lock()
	ok := s.gate.Cancel(s.now(), t)
	s.mu.Unlock()
	if ok {
		t.Refused, t.Why = true, why
		s.rec.Reject(t.Class, why)
		close(t.Ready)
	}
}

type ctxKey struct{}

// ClassFrom returns the class the middleware gave the request in ctx.
// (The class travels as a plain value: a small integer in an interface
// costs no allocation.)
func ClassFrom(ctx context.Context) (signals.Class, bool) {
	c, ok := ctx.Value(ctxKey{}).(signals.Class)
	if !ok {
		return signals.Default, false
	}
	return c, true
}

// tallyCtx is the context value of an admitted request while features
// are registered: its class and its tally.
type tallyCtx struct {
	signals.RequestTally
	class signals.Class
}

// Value answers ClassFrom's key, and the tally's and the parent's.
func (c *tallyCtx) Value(key any) any {
	if key == (ctxKey{}) {
		return c.class
	}
	return c.RequestTally.Value(key)
}

// Middleware returns the Shedder as net/http middleware. Refused requests
// get 503 (overload) or 429 (rate limit) with Retry-After, Cache-Control:
// no-store and an application/problem+json body, before the handler runs.
// Admitted requests carry their class (ClassFrom) and their deadline (the
// context's) to the handler, so that outbound calls made with Propagate
// pass both on; and, while the Recorder has features registered
// (signals.Recorder.Features), a tally (signals.RequestTally): at
// completion, the time since admission (the wait at the gate left out)
// counts as each marked feature's On or Off service time.
func (s *Shedder) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := s.now()
		c := s.classify(r) % signals.NumClasses
		s.rec.Arrive(c)
		deadline, hasDeadline, _ := signals.DeadlineOf(r, now)
		key := ""
		if s.limits != nil || s.shedLevel != nil {
			key = s.keys.key(r)
		}
		if s.limits != nil {
			if ok := s.limits.allowContext(r.Context(), w.Header(), key, now); !ok {
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
		var ctx context.Context
		var tally *signals.RequestTally
		if s.rec.Tallying() {
			// The class and the tally in one context value, allocated
			// where WithValue would allocate one.
			rc := &tallyCtx{class: c}
			if s.rec.BeginTally(&rc.RequestTally, r.Context()) {
				ctx, tally = rc, &rc.RequestTally
			}
		}
		if ctx == nil {
			ctx = context.WithValue(r.Context(), ctxKey{}, c)
		}
		if hasDeadline {
			if d, ok := ctx.Deadline(); !ok || deadline.Before(d) {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, deadline)
				defer cancel()
			}
		}
		sw := signals.StatusWriter{ResponseWriter: w}
		start, arrival := t.Start, t.Arrival
		defer func() {
			p := recover()
			end := s.now()
			s.release(end, &t.Ticket)
			s.putTicket(t)
			// The latency its client sees, its wait at the gate
			// included; the tally's work, from admission.
			s.rec.Done(c, arrival, end, p != nil || s.failed(sw.Status()), deadline)
			if tally != nil {
				s.rec.EndTally(tally, end.Sub(start)) // from admission: the wait left out
			}
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
		// Built once: the same body httpproblem.Write would write, without
		// an encoder on the refusal path.
		body := fmt.Sprintf(`{"type":%q,"title":%q,"status":%d,"detail":%q,"reason":%q}`,
			httpproblem.Type("shed", why.String()), title, status, reasonDetail[i], why.String())
		out[i] = reply{status: status, body: []byte(body), retry: secs, length: []string{strconv.Itoa(len(body))}}
	}
	return out
}
