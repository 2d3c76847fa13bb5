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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	httpproblem "github.com/brownout/brownout/internal/problem"
	"github.com/brownout/brownout/internal/replica"
	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/signals"
)

// PusherConfig configures a Pusher. URL (or URLs) and Instance are
// required.
type PusherConfig struct {
	// URL is the PushSource's endpoint, e.g.
	// http://brownoutd:8080/v1/signals. Set URL or URLs.
	URL string
	// URLs are the endpoints of one daemon's replicas (brownoutd in HA,
	// where every replica takes every instance's pushes, so that its
	// windows are warm when it comes to lead): every push goes to each,
	// the same body, each URL with its own backoff and health, so that a
	// replica that fails or answers slowly never delays the pushes to
	// the others. At most 16, no replica twice; one URL is the same as
	// URL.
	URLs []string
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
// daemon cannot scrape. Every Interval — a round — it reads the
// Recorder's cumulative state — the numbers signals.Collector exports —
// and POSTs it with a Timeout to each URL; the request path is never
// involved (the Recorder's writers do not wait for readers).
//
// After a failed push to a URL it waits Interval × 2^failures, capped at
// MaxBackoff, jittered between half and all of it (so that a fleet does
// not retry in step), and at least the server's Retry-After (within
// MaxBackoff), then pushes at the next round; a success returns to every
// round. A push still under way at a round (a slow replica, up to
// Timeout) skips it. Each URL keeps its own failures, backoff and
// health: a replica down never delays the others, and every push of a
// round carries the same body. Nothing is lost while pushes fail: the
// state is cumulative, so the next push that arrives carries everything.
//
// Each push carries the Pusher's start and a time that, within one
// Pusher, never goes back (it follows the monotonic clock), so that the
// source can order pushes and time the counts of one run.
//
// How the pushes fare is in Health (per URL in HealthByURL, and counted
// in Stats); the Logger is told when that changes, for each URL.
//
// A Pusher must be made with NewPusher. It is safe for concurrent use; run
// one Run per Pusher.
type Pusher struct {
	rec   *signals.Recorder
	cfg   PusherConfig
	urls  []string // checked: one at least
	start time.Time

	mu struct {
		sync.Mutex
		targets []target // by URL, in urls' order
	}
}

// target is the pushes to one URL.
type target struct {
	health health
	pushed uint64
	// said is the outcome the log last told, and inARow the failures
	// since the last accepted push.
	said   outcome
	inARow uint64
	// busy: a push of Run's is under way; next: the earliest round Run
	// pushes at again (after a failure).
	busy bool
	next time.Time
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
	urls := cfg.URLs
	switch {
	case cfg.URL != "" && len(cfg.URLs) > 0:
		return nil, errors.New("fleet: pusher: URL and URLs both set: set URLs alone for several replicas")
	case cfg.URL != "":
		urls = []string{cfg.URL}
	}
	urls, err := replica.Check(urls, false)
	if err != nil {
		return nil, fmt.Errorf("fleet: pusher: %w", err)
	}
	cfg.URL, cfg.URLs = urls[0], urls
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
	p := &Pusher{rec: rec, cfg: cfg, urls: urls, start: time.Now()}
	p.mu.targets = make([]target, len(urls))
	return p, nil
}

// round is one reading of the Recorder, pushed to each URL.
type round struct {
	at   time.Time
	body []byte
	err  error // encoding failed
}

// Run pushes now and then every Interval (backing off after failures)
// until ctx is done, and returns ctx's error. Its goroutines — its own,
// which reads the Recorder once a round, and one per URL, which posts —
// all end before it returns.
func (p *Pusher) Run(ctx context.Context) error {
	boxes := make([]chan round, len(p.urls))
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range boxes {
		boxes[i] = make(chan round, 1)
		wg.Go(func() { p.send(ctx, i, boxes[i]) })
	}
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		p.round(time.Now(), boxes)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// round reads the Recorder at now, once, and hands the body to each
// URL's sender that is idle and not backing off. A box is empty while
// its sender is idle, so handing never blocks.
func (p *Pusher) round(now time.Time, boxes []chan round) {
	p.mu.Lock()
	var ready []int
	for i := range p.mu.targets {
		if t := &p.mu.targets[i]; !t.busy && !now.Before(t.next) {
			t.busy = true
			ready = append(ready, i)
		}
	}
	p.mu.Unlock()
	if len(ready) == 0 {
		return
	}
	body, err := p.encode(now)
	for _, i := range ready {
		boxes[i] <- round{at: now, body: body, err: err}
	}
}

// send posts the rounds handed to URL i until ctx is done.
func (p *Pusher) send(ctx context.Context, i int, box <-chan round) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-box:
			err := r.err
			if err == nil {
				err = p.post(ctx, p.urls[i], r.body)
			}
			fails := p.note(ctx, i, err)
			p.mu.Lock()
			t := &p.mu.targets[i]
			t.busy = false
			if err != nil {
				// From the round's time, so that a wait of n Intervals
				// comes back at the nth round.
				t.next = r.at.Add(p.backoff(int(fails), err))
			}
			p.mu.Unlock()
		}
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

// Push sends the Recorder's state once, now, to every URL at once — the
// same body — and notes how each went in the health (telling the Logger
// when that changed). It returns nil when every URL accepted the push,
// else the failures (errors.Join; with one URL, its error).
func (p *Pusher) Push(ctx context.Context) error {
	body, err := p.encode(time.Now())
	errs := make([]error, len(p.urls))
	var wg sync.WaitGroup
	for i, u := range p.urls {
		wg.Go(func() {
			errs[i] = err
			if err == nil {
				errs[i] = p.post(ctx, u, body)
			}
			p.note(ctx, i, errs[i])
		})
	}
	wg.Wait()
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// note records how a push to URL i went in its health (telling the
// Logger when that changed), and returns the failures in a row since its
// last accepted push.
func (p *Pusher) note(ctx context.Context, i int, err error) uint64 {
	now := time.Now()
	o := outcomeOf(err)
	p.mu.Lock()
	t := &p.mu.targets[i]
	t.health.record(now, err)
	if err == nil {
		t.pushed++
	}
	said, fails := t.said, t.inARow
	if err != nil {
		t.inARow++
	} else {
		t.inARow = 0
	}
	tell := o != said && ctx.Err() == nil // a push cut short by the end of ctx says nothing
	if tell {
		t.said = o
	}
	inARow := t.inARow
	p.mu.Unlock()
	if tell {
		p.tell(p.urls[i], o, err, fails)
	}
	return inARow
}

// tell logs a change of outcome of the pushes to url; fails is the
// failures in a row before this push.
func (p *Pusher) tell(url string, o outcome, err error, fails uint64) {
	switch o {
	case unauthorized:
		p.cfg.Logger.Warn("fleet: the daemon refuses this app's pushes: check the push token", "url", url, "err", err)
	case failed:
		p.cfg.Logger.Warn("fleet: push failed; backing off", "url", url, "err", err)
	case accepted:
		p.cfg.Logger.Info("fleet: push recovered", "url", url, "failures", fails)
	}
}

// encode reads the Recorder at now into a push's body.
func (p *Pusher) encode(now time.Time) ([]byte, error) {
	b := pushOf(p.rec, now, p.cfg.Buckets)
	b.V, b.Instance = pushVersion, p.cfg.Instance
	b.Start = p.start.UTC().Format(time.RFC3339Nano)
	// start plus the monotonic time since: never back within this Pusher,
	// whatever the wall clock does.
	b.Time = p.start.Add(now.Sub(p.start)).UTC().Format(time.RFC3339Nano)
	body, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("fleet: push: encode: %w", err)
	}
	return body, nil
}

// post sends one push's body to url.
func (p *Pusher) post(ctx context.Context, url string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("fleet: push to %s: %w", url, err)
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
		return fmt.Errorf("fleet: push to %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer)) // reuse the connection
		return nil
	}
	se := &pushStatusError{Refusal: httpproblem.ReadRefusal(resp, maxAnswer, httpproblem.Refusal{
		Where:        "fleet: push to " + url,
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

// Stats returns the Pusher's counts, over every URL: a push is one POST
// to one URL.
func (p *Pusher) Stats() PusherStats {
	h, pushed := p.all()
	return PusherStats{Pushed: pushed, Failed: h.errors, LastSuccess: h.lastSuccess, LastErrorAt: h.lastErrorAt, LastError: h.lastError}
}

// all sums the URLs' health: OK if any is, the latest success and
// failure, every error; and the pushes accepted.
func (p *Pusher) all() (health, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var h health
	var pushed uint64
	for _, t := range p.mu.targets {
		pushed += t.pushed
		h.ok = h.ok || t.health.ok
		h.errors += t.health.errors
		if t.health.lastSuccess.After(h.lastSuccess) {
			h.lastSuccess = t.health.lastSuccess
		}
		if t.health.lastErrorAt.After(h.lastErrorAt) {
			h.lastErrorAt, h.lastError = t.health.lastErrorAt, t.health.lastError
		}
	}
	return h, pushed
}

// Health reports how the pushes fare, for a status page (the root
// package's GET /v1/state in fleet mode): OK while the last push (to one
// URL at least) was accepted; LastError says why the last one failed —
// for a daemon that refused the token, "…: unauthorized (401) — check
// the push token …" — and stays after recovery (compare LastErrorAt with
// LastSuccess); Errors counts the failed pushes. Its Name is "push " and
// the URL (the URLs, separated by ", "). Before the first push it is not
// OK and says nothing else.
func (p *Pusher) Health() signals.SourceHealth {
	h, _ := p.all()
	return h.report("push " + strings.Join(p.urls, ", "))
}

// HealthByURL reports how the pushes to each URL fare, in the order of
// the URLs, as Health does for one; each Name is "push " and its URL.
// With one URL it is Health alone.
func (p *Pusher) HealthByURL() []signals.SourceHealth {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]signals.SourceHealth, len(p.urls))
	for i, t := range p.mu.targets {
		out[i] = t.health.report("push " + p.urls[i])
	}
	return out
}

// URLs returns the endpoints pushed to, as checked.
func (p *Pusher) URLs() []string { return slices.Clone(p.urls) }
