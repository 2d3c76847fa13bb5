package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	httpproblem "github.com/brownout/brownout/internal/problem"
	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/signals"
)

// PusherConfig configures a Pusher. URL and Instance are required.
type PusherConfig struct {
	// URL is the PushSource's endpoint, e.g.
	// http://brownoutd:8080/v1/signals.
	URL string
	// Instance names this process in the fleet (its host or pod name):
	// unique, at most 128 bytes, no control characters.
	Instance string
	// Service, when set, names the service this app is on a daemon of
	// several (brownoutd's services:): every push says it in the
	// X-Brownout-Service header, and the daemon hands the push to that
	// service's source, behind that service's push tokens and instance
	// cap. A URL under the service's path
	// (http://brownoutd:8080/services/shop/v1/signals) says it too; the
	// two must then agree. A daemon of one service refuses a push that
	// names one (404). Lower-case letters, digits, '-', '_' and '.'.
	Service string
	// Interval is the time between pushes. Default 1 s.
	Interval time.Duration
	// Timeout bounds one push. Default 2 s.
	Timeout time.Duration
	// Token, when set, is sent as Authorization: Bearer <Token>.
	Token string
	// Client sends the pushes. Default: a client with no overall timeout
	// (each push is bounded by Timeout).
	Client *http.Client
	// Buckets are the classic bucket bounds in seconds, ascending, as
	// signals.CollectorOpts.Buckets; every instance of a fleet must use
	// the same. Default signals.DefaultBuckets.
	Buckets []float64
	// MaxBackoff caps the wait after failures. Default 30 s.
	MaxBackoff time.Duration
	// Logger receives a line when the pushes change state: a WARN when
	// they start failing, another when the daemon refuses the token
	// (ErrUnauthorized), an INFO when one is accepted again — never one
	// per push. Default: discard.
	Logger *slog.Logger
}

// ErrUnauthorized is wrapped by a push's error when the daemon refused it
// for its credentials: 401 (the token is missing or none of the daemon's
// push tokens) or 403 (the daemon takes no pushes from here, e.g. it has
// no push token and does not listen on loopback). A retry cannot fix it,
// the configuration can: the Pusher's Token or the daemon's push tokens.
// The Pusher still retries, backing off, so that it is accepted again
// without a restart once they agree.
var ErrUnauthorized = errors.New("fleet: push: the daemon refused the token")

// Pusher sends a signals.Recorder's signals to a PushSource, for apps the
// daemon cannot scrape. Every Interval it reads the Recorder's cumulative
// state — the numbers signals.Collector exports — and POSTs it with a
// Timeout; the request path is never involved (the Recorder's writers do
// not wait for readers).
//
// After a failed push it waits Interval × 2^failures, capped at
// MaxBackoff, jittered between half and all of it (so that a fleet does
// not retry in step), and at least the server's Retry-After (within
// MaxBackoff); a success returns to Interval. Nothing is lost while
// pushes fail: the state is cumulative, so the next push that arrives
// carries everything.
//
// Each push carries the Pusher's start and a time that, within one
// Pusher, never goes back (it follows the monotonic clock), so that the
// source can order pushes and time the counts of one run.
//
// How the pushes fare is in Health (and counted in Stats); the Logger is
// told when that changes.
//
// A Pusher must be made with NewPusher. It is safe for concurrent use; run
// one Run per Pusher.
type Pusher struct {
	rec   *signals.Recorder
	cfg   PusherConfig
	start time.Time

	mu struct {
		sync.Mutex
		health health
		pushed uint64
		// said is the outcome the log last told, and inARow the failures
		// since the last accepted push.
		said   outcome
		inARow uint64
	}
}

// outcome is what a push came to, as the log tells it: one line each time
// it changes.
type outcome uint8

const (
	// accepted is the zero value: a Pusher starts as if its pushes were
	// accepted, so that its first failure is said.
	accepted outcome = iota
	// unauthorized: the daemon refused the token (ErrUnauthorized).
	unauthorized
	// failed: any other failure — the daemon away, a timeout, another
	// status.
	failed
)

func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return accepted
	case errors.Is(err, ErrUnauthorized):
		return unauthorized
	}
	return failed
}

// PusherStats counts a Pusher's pushes; a plain value.
type PusherStats struct {
	// Pushed and Failed count the pushes accepted and failed.
	Pushed, Failed uint64
	// LastSuccess is when a push last succeeded; LastError and LastErrorAt
	// describe the last failure (kept after recovery).
	LastSuccess, LastErrorAt time.Time
	LastError                string
}

// NewPusher checks cfg and returns a Pusher of rec's signals.
func NewPusher(rec *signals.Recorder, cfg PusherConfig) (*Pusher, error) {
	if rec == nil {
		return nil, errors.New("fleet: pusher: no recorder")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("fleet: pusher: URL %q is not an http(s) URL", truncate(cfg.URL))
	}
	if err := checkInstance(cfg.Instance); err != nil {
		return nil, fmt.Errorf("fleet: pusher: %w", err)
	}
	if cfg.Service != "" {
		if err := service.Check(cfg.Service); err != nil {
			return nil, fmt.Errorf("fleet: pusher: %w", err)
		}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	cfg.Buckets = slices.Clone(cfg.Buckets)
	if len(cfg.Buckets) == 0 {
		cfg.Buckets = signals.DefaultBuckets()
	}
	if !slices.IsSorted(cfg.Buckets) {
		return nil, errors.New("fleet: pusher: buckets are not ascending")
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.Interval)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pusher{rec: rec, cfg: cfg, start: time.Now()}, nil
}

// Run pushes now and then every Interval (backing off after failures)
// until ctx is done, and returns ctx's error.
func (p *Pusher) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	fails := 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		began := time.Now()
		err := p.Push(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := p.cfg.Interval
		if err != nil {
			fails++
			wait = p.backoff(fails, err)
		} else {
			fails = 0
		}
		t.Reset(max(wait-time.Since(began), 0))
	}
}

// backoff returns the wait after the fails-th failure in a row.
func (p *Pusher) backoff(fails int, err error) time.Duration {
	d := p.cfg.MaxBackoff
	if fails < 30 {
		d = min(p.cfg.Interval<<fails, p.cfg.MaxBackoff)
	}
	d = d/2 + rand.N(d/2+1) // jitter: between half and all of it
	if se, ok := errors.AsType[*pushStatusError](err); ok && se.retryAfter > d {
		d = min(se.retryAfter, p.cfg.MaxBackoff)
	}
	return d
}

// pushStatusError is a push the server answered with a non-2xx status,
// and the wait it asked for (Retry-After).
type pushStatusError struct {
	*httpproblem.Refusal
	retryAfter time.Duration
}

// Push sends the Recorder's state once, now, and notes how it went in
// Health (telling the Logger when that changed).
func (p *Pusher) Push(ctx context.Context) error {
	err := p.push(ctx)
	now := time.Now()
	o := outcomeOf(err)
	p.mu.Lock()
	p.mu.health.record(now, err)
	if err == nil {
		p.mu.pushed++
	}
	said, fails := p.mu.said, p.mu.inARow
	if err != nil {
		p.mu.inARow++
	} else {
		p.mu.inARow = 0
	}
	tell := o != said && ctx.Err() == nil // a push cut short by the end of ctx says nothing
	if tell {
		p.mu.said = o
	}
	p.mu.Unlock()
	if tell {
		p.tell(o, err, fails)
	}
	return err
}

// tell logs a change of outcome; fails is the failures in a row before
// this push.
func (p *Pusher) tell(o outcome, err error, fails uint64) {
	switch o {
	case unauthorized:
		p.cfg.Logger.Warn("fleet: the daemon refuses this app's pushes: check the push token", "url", p.cfg.URL, "err", err)
	case failed:
		p.cfg.Logger.Warn("fleet: push failed; backing off", "url", p.cfg.URL, "err", err)
	case accepted:
		p.cfg.Logger.Info("fleet: push recovered", "url", p.cfg.URL, "failures", fails)
	}
}

func (p *Pusher) push(ctx context.Context) error {
	now := time.Now()
	b := pushOf(p.rec, now, p.cfg.Buckets)
	b.V, b.Instance = pushVersion, p.cfg.Instance
	b.Start = p.start.UTC().Format(time.RFC3339Nano)
	// start plus the monotonic time since: never back within this Pusher,
	// whatever the wall clock does.
	b.Time = p.start.Add(now.Sub(p.start)).UTC().Format(time.RFC3339Nano)
	body, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("fleet: push: encode: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("fleet: push to %s: %w", p.cfg.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if p.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+p.cfg.Token)
	}
	if p.cfg.Service != "" {
		req.Header.Set(service.Header, p.cfg.Service)
	}
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("fleet: push to %s: %w", p.cfg.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer)) // reuse the connection
		return nil
	}
	se := &pushStatusError{Refusal: httpproblem.ReadRefusal(resp, maxAnswer, httpproblem.Refusal{
		Where:        "fleet: push to " + p.cfg.URL,
		StatusPrefix: "HTTP ",
		Hint:         "check the push token (this app's, and the daemon's push tokens)",
		Unauthorized: ErrUnauthorized,
	})}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		se.retryAfter = time.Duration(s) * time.Second
	}
	return se
}

// maxAnswer bounds what a Pusher reads of an answer: a problem+json body
// whose detail says why a push was refused (PushSource's are under 1 KiB),
// or what is drained of a 2xx so that the connection is reused.
const maxAnswer = 4 << 10

// Stats returns the Pusher's counts.
func (p *Pusher) Stats() PusherStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.mu.health
	return PusherStats{Pushed: p.mu.pushed, Failed: h.errors, LastSuccess: h.lastSuccess, LastErrorAt: h.lastErrorAt, LastError: h.lastError}
}

// Health reports how the pushes fare, for a status page (the root
// package's GET /v1/state in fleet mode): OK while the last push was
// accepted; LastError says why the last one failed — for a daemon that
// refused the token, "…: unauthorized (401) — check the push token …" —
// and stays after recovery (compare LastErrorAt with LastSuccess). Its
// Name is "push " and the URL. Before the first push it is not OK and
// says nothing else.
func (p *Pusher) Health() signals.SourceHealth {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.health.report("push " + p.cfg.URL)
}
