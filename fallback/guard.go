package fallback

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"

	"github.com/brownout/brownout/signals"
)

// Errors a Guard returns instead of calling the dependency. Callers branch
// on them to pick the fallback.
var (
	// ErrOpen: the circuit breaker is open.
	ErrOpen = circuitbreaker.ErrOpen
	// ErrFull: the bulkhead is full.
	ErrFull = bulkhead.ErrFull
	// ErrTimeout: the call took longer than the guard's timeout.
	ErrTimeout = errors.New("fallback: dependency timed out")
)

// StatusError is a dependency's HTTP answer that is not a success, for
// Retryable to judge. RetryAfter is the server's Retry-After, if any.
type StatusError struct {
	Status     int
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	return "fallback: dependency answered " + strconv.Itoa(e.Status)
}

// maxRetryAfter caps a server's Retry-After: a longer wait is an outage
// the breaker and the fallbacks handle, not a retry's backoff.
const maxRetryAfter = time.Minute

// CheckResponse turns a non-2xx response into a *StatusError (reading
// Retry-After, at most a minute), and returns nil for 2xx.
func CheckResponse(resp *http.Response) error {
	if resp.StatusCode/100 == 2 {
		return nil
	}
	e := &StatusError{Status: resp.StatusCode}
	if v := resp.Header.Get("Retry-After"); v != "" {
		// Seconds; a number too long for a uint64 (ParseUint returns its
		// largest) is still the longest wait, not none.
		if n, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			e.RetryAfter = time.Duration(min(n, uint64(maxRetryAfter/time.Second))) * time.Second
		} else if t, err := http.ParseTime(v); err == nil {
			e.RetryAfter = min(max(time.Until(t), 0), maxRetryAfter)
		}
	}
	return e
}

// Retryable reports whether an error is worth another attempt: timeouts,
// connection resets and refusals, 429, 502, 503 and 504. Never 400, 401, 403,
// 404 or other client errors, and never the guard's own refusals.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, ErrOpen) || errors.Is(err, ErrFull) || errors.Is(err, context.Canceled) {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		switch se.Status {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	if errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isFailure reports whether the breaker counts err, an attempt's error
// whose caller had not gone away, as a failure of the dependency: every
// error but an answer that refuses the request — a *StatusError below 500
// other than 429 (a 400, a 404). Such an answer is the dependency working:
// it took the request and answered it in time, and counting it as a
// failure would let bad input from a few clients open the breaker for
// everybody. Any other error is a failure, whether or not it is worth a
// retry: a broken answer (io.ErrUnexpectedEOF), a timeout, a 5xx, or an
// error the guard cannot read (errors.New("provider: internal error")).
func isFailure(err error) bool {
	if err == nil {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status >= 500 || se.Status == http.StatusTooManyRequests
	}
	return true
}

// Backoff selects the wait between attempts.
type Backoff uint8

const (
	// FullJitter waits a uniform random time in [0, min(Cap, Base·2^(n−1)))
	// before retry n.
	FullJitter Backoff = iota
	// SourcesSchedule is the sources' schedule: before retry n (n = 1..5)
	// wait 2^(n−1) s plus a fresh random 0–1000 ms, capped at Cap.
	SourcesSchedule
)

// Config configures a Guard. The zero value takes the defaults below.
type Config struct {
	// Name of the dependency, for metrics and errors ("sms", "payment").
	Name string
	// Timeout, when set, fixes the per-attempt timeout. Default: the
	// dependency's measured p99 × TimeoutFactor, at least MinTimeout and
	// at most MaxTimeout, and never beyond the caller's remaining deadline.
	Timeout time.Duration
	// TimeoutFactor multiplies the measured p99. Default 1.5.
	TimeoutFactor float64
	// MinTimeout and MaxTimeout bound the measured timeout; MaxTimeout is
	// also the timeout before any measurement. Defaults 50 ms and 1 s.
	MinTimeout, MaxTimeout time.Duration
	// MaxConcurrent is the bulkhead: calls beyond it fail at once with
	// ErrFull. Default 20.
	MaxConcurrent uint
	// BreakerWindow and BreakerFailures: the breaker opens when at least
	// BreakerFailures of the last BreakerWindow attempts it recorded failed
	// (failures and timeouts; see Guard for what it records). Defaults 20
	// and 10 (50 %).
	BreakerWindow, BreakerFailures uint
	// BreakerDelay is how long the breaker stays open. Default 30 s.
	BreakerDelay time.Duration
	// BreakerTrials attempts are let through half-open; if they all
	// succeed the breaker closes, at the first failure it opens again. A
	// trial that is not recorded (its caller went away) gives its place
	// to the next. Default 3.
	BreakerTrials uint
	// MaxAttempts bounds the attempts per call, the first included.
	// Default 3; 1 disables retries.
	MaxAttempts int
	// Backoff is the wait schedule; Base and Cap shape it. Defaults
	// FullJitter, 100 ms, 2 s. A server's Retry-After wins when longer,
	// up to Cap.
	Backoff   Backoff
	Base, Cap time.Duration
	// Budget is shared by the guards whose retries it limits. Default: a
	// budget of its own with the default ratio.
	Budget *RetryBudget
	// Now returns the time, for the latency window. Default time.Now.
	Now func() time.Time
}

// Guard protects the calls to one dependency: a per-attempt timeout from
// the measured p99, a bulkhead, a circuit breaker and retries with backoff
// and jitter under a retry budget. The bulkhead and retry policies are
// failsafe-go's; the guard composes them with its own breaker (retry
// outside the breaker, outside the bulkhead) and adds the adaptive
// timeout, the ratio budget, the sources' backoff schedule, Retry-After,
// and metrics.
//
// The breaker records each attempt's outcome. A failure: a timeout, a
// 5xx or 429, or any other error but an answer (io.ErrUnexpectedEOF, an
// error it cannot read). A success: a result, or an answer that refuses
// the request (a *StatusError below 500 but 429, e.g. 400 or 404) — the
// dependency took the request and answered in time. Not recorded, because
// they say nothing of the dependency: a bulkhead refusal, and an attempt
// whose caller's context was cancelled or whose caller's deadline came
// before the guard's timeout (not counted in Status.Timeouts either). A
// half-open trial of that kind gives its place back.
//
// A Guard must be made with New. It is safe for concurrent use.
type Guard struct {
	cfg Config
	// exec is the retry policy; nil when MaxAttempts is 1.
	exec     failsafe.Executor[any]
	breaker  *breaker
	bulkhead bulkhead.Bulkhead[any]
	budget   *RetryBudget
	// latency holds successful attempts only: the timeout is computed from
	// it. timedOut holds the attempts that timed out (each as the timeout
	// that ended it): they are counted apart, as the timeout rate, because
	// a timed-out attempt's duration is the timeout, not the dependency's
	// latency (see attempt).
	latency, timedOut *signals.Window

	calls, ok, failed, timeouts, rejectedOpen, rejectedFull, rejectedBudget, retries atomic.Uint64

	// The measured timeout, refreshed at most once a second: a p99 is a
	// merge of histogram buckets, too dear for every call.
	timeout     atomic.Int64  // ns; 0 until computed
	timeoutAt   atomic.Int64  // unix ns of the computation
	timeoutRate atomic.Uint64 // float64 bits, computed with the timeout
	// answered is the last timeout measured from successes (ns; 0 while
	// none was): how long the dependency is known to take to answer at
	// most, kept while no success is in the window (see answerBound).
	answered atomic.Int64

	mu          sync.Mutex
	transitions []Transition // the last keptTransitions
	// transitionTotals counts every transition by [from, to], for the
	// Collector's counter: the list above forgets.
	transitionTotals map[[2]string]uint64
	onChange         []func(Transition)
}

// Transition is a change of the breaker's state.
type Transition struct {
	Dependency string
	From, To   string // "closed", "open", "half-open"
	At         time.Time
}

// New returns a guard.
func New(cfg Config) (*Guard, error) {
	if cfg.Name == "" {
		return nil, errors.New("fallback: a guard needs a dependency name")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if cfg.TimeoutFactor <= 0 {
		cfg.TimeoutFactor = 1.5
	}
	def(&cfg.MinTimeout, 50*time.Millisecond)
	def(&cfg.MaxTimeout, time.Second)
	def(&cfg.BreakerDelay, 30*time.Second)
	def(&cfg.Base, 100*time.Millisecond)
	def(&cfg.Cap, 2*time.Second)
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = 20
	}
	if cfg.BreakerWindow == 0 {
		cfg.BreakerWindow = 20
	}
	if cfg.BreakerFailures == 0 {
		cfg.BreakerFailures = (cfg.BreakerWindow + 1) / 2
	}
	if cfg.BreakerTrials == 0 {
		cfg.BreakerTrials = 3
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.BreakerFailures > cfg.BreakerWindow:
		return nil, fmt.Errorf("fallback: %s: breaker failures %d exceed its window %d", cfg.Name, cfg.BreakerFailures, cfg.BreakerWindow)
	case cfg.MinTimeout > cfg.MaxTimeout:
		return nil, fmt.Errorf("fallback: %s: min timeout %s exceeds max %s", cfg.Name, cfg.MinTimeout, cfg.MaxTimeout)
	case cfg.MaxAttempts < 1:
		return nil, fmt.Errorf("fallback: %s: max attempts %d: want at least 1", cfg.Name, cfg.MaxAttempts)
	}
	window := signals.WindowConfig{Slices: 10, Width: 3 * time.Second}
	g := &Guard{cfg: cfg, budget: cfg.Budget, latency: signals.NewWindow(window), timedOut: signals.NewWindow(window)}
	if g.budget == nil {
		g.budget = NewRetryBudget(0, 0)
	}
	g.breaker = newBreaker(cfg.BreakerWindow, cfg.BreakerFailures, cfg.BreakerTrials, cfg.BreakerDelay, g.transition)
	g.bulkhead = bulkhead.NewBuilder[any](cfg.MaxConcurrent).WithMaxWaitTime(0).Build()
	if cfg.MaxAttempts > 1 {
		rp := retrypolicy.NewBuilder[any]().
			HandleIf(func(_ any, err error) bool { return Retryable(err) }).
			// The budget vetoes a retry by aborting; a token taken for a
			// retry that then does not happen is refunded.
			AbortIf(func(_ any, err error) bool {
				if !Retryable(err) {
					return false
				}
				if !g.budget.Withdraw() {
					g.rejectedBudget.Add(1)
					return true
				}
				return false
			}).
			OnRetriesExceeded(func(failsafe.ExecutionEvent[any]) { g.budget.Refund() }).
			OnRetry(func(failsafe.ExecutionEvent[any]) { g.retries.Add(1) }).
			WithMaxAttempts(cfg.MaxAttempts).
			WithDelayFunc(g.delay).
			ReturnLastFailure().
			Build()
		g.exec = failsafe.With[any](rp)
	}
	return g, nil
}

// Name returns the dependency's name.
func (g *Guard) Name() string { return g.cfg.Name }

// OnTransition registers fn to hear breaker transitions (e.g. to wake an
// outbox drain, or tell the controller). fn runs on the calling goroutine of
// the call that caused the change, just after it; it must not block.
func (g *Guard) OnTransition(fn func(Transition)) {
	g.mu.Lock()
	g.onChange = append(g.onChange, fn)
	g.mu.Unlock()
}

// transition records a breaker transition; the breaker calls it under its
// lock, so the record keeps the transitions' order.
func (g *Guard) transition(from, to string) Transition {
	t := Transition{Dependency: g.cfg.Name, From: from, To: to, At: g.cfg.Now()}
	g.mu.Lock()
	g.transitions = append(g.transitions, t)
	if len(g.transitions) > keptTransitions {
		g.transitions = g.transitions[len(g.transitions)-keptTransitions:]
	}
	if g.transitionTotals == nil {
		g.transitionTotals = map[[2]string]uint64{}
	}
	g.transitionTotals[[2]string{from, to}]++
	g.mu.Unlock()
	return t
}

// keptTransitions is how many transitions Status lists: enough to read a
// flapping breaker's recent history, few enough to copy at every scrape.
const keptTransitions = 100

// notify tells the listeners of transitions, outside the breaker's lock
// (a listener may ask the guard its Status).
func (g *Guard) notify(ts []Transition) {
	if len(ts) == 0 {
		return
	}
	g.mu.Lock()
	fns := append([]func(Transition){}, g.onChange...)
	g.mu.Unlock()
	for _, t := range ts {
		for _, fn := range fns {
			fn(t)
		}
	}
}

// delay is the wait before the next attempt.
func (g *Guard) delay(exec failsafe.ExecutionAttempt[any]) time.Duration {
	n := exec.Attempts() // attempts so far: the next is retry n
	var d time.Duration
	switch g.cfg.Backoff {
	case SourcesSchedule:
		d = time.Duration(1<<min(n-1, 4))*time.Second + time.Duration(rand.Int64N(int64(time.Second)))
	default:
		ceil := float64(g.cfg.Base) * math.Pow(2, float64(n-1))
		d = time.Duration(rand.Float64() * min(ceil, float64(g.cfg.Cap)))
	}
	var se *StatusError
	if errors.As(exec.LastError(), &se) && se.RetryAfter > d {
		d = se.RetryAfter // the server knows best
	}
	return min(d, g.cfg.Cap)
}

// Timeout returns the per-attempt timeout the guard uses now: the p99 of
// the successful attempts of the last 30 s × TimeoutFactor, between
// MinTimeout and MaxTimeout (MaxTimeout while there is no success in the
// window, so a dependency whose normal latency has moved past the timeout
// gets a longer one after 30 s), or Config.Timeout when that is set.
func (g *Guard) Timeout() time.Duration {
	if g.cfg.Timeout > 0 {
		return g.cfg.Timeout
	}
	t, _ := g.measure()
	return t
}

// measure returns the adaptive timeout and the timeout rate, recomputed
// at most once a second.
func (g *Guard) measure() (time.Duration, float64) {
	now := g.cfg.Now()
	if t := g.timeout.Load(); t != 0 && now.UnixNano()-g.timeoutAt.Load() < int64(time.Second) {
		return time.Duration(t), math.Float64frombits(g.timeoutRate.Load())
	}
	t := g.cfg.MaxTimeout
	succ := g.latency.Summary(now)
	if succ.Count > 0 {
		t = min(max(time.Duration(float64(succ.P99)*g.cfg.TimeoutFactor), g.cfg.MinTimeout), g.cfg.MaxTimeout)
		g.answered.Store(int64(t))
	}
	var rate float64
	if n := g.timedOut.Summary(now).Count; n > 0 {
		rate = float64(n) / float64(n+succ.Count)
	}
	g.timeout.Store(int64(t))
	g.timeoutRate.Store(math.Float64bits(rate))
	g.timeoutAt.Store(now.UnixNano())
	return t, rate
}

// Call runs fn under the guard. fn gets a context bounded by the attempt's
// timeout (and by ctx). It returns fn's result, or ErrOpen, ErrFull,
// ErrTimeout or fn's last error — the cue for a fallback. A retry the
// budget refused ends the call with the last error; it is counted in
// Status().Rejected["budget"].
func Call[T any](ctx context.Context, g *Guard, fn func(ctx context.Context) (T, error)) (T, error) {
	g.calls.Add(1)
	g.budget.Deposit()
	try := func() (any, error) {
		return g.attempt(ctx, func(ctx context.Context) (any, error) { return fn(ctx) })
	}
	var v any
	var err error
	if g.exec != nil {
		v, err = g.exec.WithContext(ctx).Get(try)
	} else {
		v, err = try()
	}
	g.count(err)
	var zero T
	if err != nil {
		return zero, fmt.Errorf("fallback: %s: %w", g.cfg.Name, err)
	}
	t, _ := v.(T)
	return t, nil
}

// attempt runs one try through the breaker and the bulkhead, and tells the
// breaker what it learnt of the dependency. A bulkhead refusal is not a
// call of the dependency, nor is an attempt whose caller went away — its
// context cancelled, or its deadline over before the dependency was due
// to answer (answerBound): the breaker does not record them. One whose
// caller's deadline came after that is a dependency that did not answer
// in its time: a failure, as a timeout of the guard's own is.
func (g *Guard) attempt(ctx context.Context, fn func(ctx context.Context) (any, error)) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= 0 {
		return nil, context.DeadlineExceeded // no time left: don't start
	}
	t, ok, tr := g.breaker.acquire()
	if !ok {
		g.notify(tr)
		return nil, ErrOpen
	}
	// Whatever ends the attempt — a refusal, fn's panic, a listener's —
	// gives its place (a trial's) back, recorded as what was learnt.
	o, held := unknown, false
	defer func() {
		if held {
			g.bulkhead.ReleasePermit()
		}
		g.notify(g.breaker.record(t, o))
	}()
	g.notify(tr)
	if !g.bulkhead.TryAcquirePermit() {
		return nil, ErrFull
	}
	held = true
	start := g.cfg.Now()
	v, err := g.try(ctx, fn)
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && g.cfg.Now().Sub(start) >= g.answerBound():
		o = failed // the caller waited longer than the dependency takes
	case err != nil && ctx.Err() != nil:
		o = unknown // the caller went away: nothing learnt
	case isFailure(err):
		o = failed
	default:
		o = answered
	}
	return v, err
}

// answerBound is how long the dependency is known to take to answer at
// most: the fixed Timeout, else the last timeout measured from its
// successes (kept while none is in the window, where the timeout itself
// goes back to MaxTimeout), else MaxTimeout — with nothing measured, a
// caller that gives up sooner may only be impatient. (Without it, callers
// whose deadlines were all under MaxTimeout never opened the breaker of a
// dependency that hung: each attempt ended with its caller's deadline,
// and none was recorded.)
func (g *Guard) answerBound() time.Duration {
	if g.cfg.Timeout > 0 {
		return g.cfg.Timeout
	}
	if b := g.answered.Load(); b > 0 {
		return time.Duration(b)
	}
	return g.cfg.MaxTimeout
}

// try runs fn with the adaptive timeout.
func (g *Guard) try(ctx context.Context, fn func(ctx context.Context) (any, error)) (any, error) {
	timeout := g.Timeout()
	// When the caller's deadline comes first, it alone ends the attempt:
	// a timer of the guard's set for the same instant could fire first and
	// make the caller's deadline look like the dependency's timeout.
	var actx context.Context
	var cancel context.CancelFunc
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= timeout {
		actx, cancel = context.WithCancel(ctx)
	} else {
		actx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	start := g.cfg.Now()
	v, err := fn(actx)
	took := g.cfg.Now().Sub(start)
	switch {
	case errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		// The guard's timeout — an answer too, if it came after it: fn
		// did not heed its deadline, and the dependency did not answer in
		// its time (a trial that returned nil an hour late closed a
		// half-open breaker).
		g.timedOut.Record(timeout)
		g.timeouts.Add(1)
		return nil, fmt.Errorf("%w after %s", ErrTimeout, timeout.Round(time.Millisecond))
	case err == nil:
		// Only successes feed the timeout. A timed-out attempt says only
		// "more than the timeout": recorded as a latency, 1 % of them
		// would make the p99 the timeout itself and the timeout climb by
		// TimeoutFactor a second up to MaxTimeout. A failure's latency
		// (a fast 503) is not the latency of an answer either.
		g.latency.Record(took)
	}
	return v, err
}

func (g *Guard) count(err error) {
	switch {
	case err == nil:
		g.ok.Add(1)
	case errors.Is(err, ErrOpen):
		g.rejectedOpen.Add(1)
	case errors.Is(err, ErrFull):
		g.rejectedFull.Add(1)
	default:
		g.failed.Add(1)
	}
}

// Allows reports whether the breaker lets calls through now: closed,
// half-open, or open with its delay over (the next call is a trial; the
// breaker moves to half-open only when a call tries it, so a drain that
// asked IsOpen alone would wait for ever once nothing else calls).
func (g *Guard) Allows() bool {
	state, rest := g.breaker.current()
	return state != openState || rest <= 0
}

// Status is a guard's counters and breaker state.
type Status struct {
	Dependency string
	State      string // closed, open, half-open
	Timeout    time.Duration
	// TimeoutRate is the share of the last 30 s's attempts that timed
	// out, of those that succeeded or timed out: the signal of a slow
	// dependency, kept apart from the latency the timeout is computed from.
	TimeoutRate float64
	Calls, OK   uint64
	Failed      uint64 // calls that ended in an error from the dependency
	Timeouts    uint64 // attempts that timed out
	Retries     uint64
	Rejected    map[string]uint64 // by "breaker", "bulkhead", "budget"
	Transitions []Transition      // the last 100
	// TransitionTotals counts all the breaker's transitions since the
	// guard was made, by [from, to] state.
	TransitionTotals map[[2]string]uint64
}

// Status returns the guard's counters.
func (g *Guard) Status() Status {
	g.mu.Lock()
	tr := append([]Transition(nil), g.transitions...)
	totals := make(map[[2]string]uint64, len(g.transitionTotals))
	for k, v := range g.transitionTotals {
		totals[k] = v
	}
	g.mu.Unlock()
	state, _ := g.breaker.current()
	timeout, rate := g.measure()
	if g.cfg.Timeout > 0 {
		timeout = g.cfg.Timeout
	}
	return Status{
		Dependency: g.cfg.Name, State: state, Timeout: timeout, TimeoutRate: rate,
		Calls: g.calls.Load(), OK: g.ok.Load(), Failed: g.failed.Load(), Timeouts: g.timeouts.Load(), Retries: g.retries.Load(),
		Rejected:    map[string]uint64{"breaker": g.rejectedOpen.Load(), "bulkhead": g.rejectedFull.Load(), "budget": g.rejectedBudget.Load()},
		Transitions: tr, TransitionTotals: totals,
	}
}

// RetryBudget limits retries to a share of original calls, shared by every
// guard that holds it: a token bucket that gains Ratio per original call and
// loses 1 per retry, holding at most Burst. With the default ratio 0.1,
// retries stay under 10 % of calls however many guards retry — so a failing
// dependency sees at most 1.1 × its normal load, not 3 × (the retry storm
// of the sources). It is safe for concurrent use.
type RetryBudget struct {
	ratio, burst float64
	mu           sync.Mutex
	tokens       float64
}

// NewRetryBudget returns a full budget. Zero values mean ratio 0.1 and
// burst 10.
func NewRetryBudget(ratio, burst float64) *RetryBudget {
	if ratio <= 0 {
		ratio = 0.1
	}
	if burst <= 0 {
		burst = 10
	}
	return &RetryBudget{ratio: ratio, burst: burst, tokens: burst}
}

// Deposit credits one original call.
func (b *RetryBudget) Deposit() {
	b.mu.Lock()
	b.tokens = min(b.burst, b.tokens+b.ratio)
	b.mu.Unlock()
}

// Withdraw takes a token for a retry, if there is one.
func (b *RetryBudget) Withdraw() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Refund returns a token taken for a retry that did not happen.
func (b *RetryBudget) Refund() {
	b.mu.Lock()
	b.tokens = min(b.burst, b.tokens+1)
	b.mu.Unlock()
}

// Tokens returns the retries available now.
func (b *RetryBudget) Tokens() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens
}
