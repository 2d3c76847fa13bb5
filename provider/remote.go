package provider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/dimmer"
	httpproblem "github.com/brownout/brownout/internal/problem"
	"github.com/brownout/brownout/internal/replica"
	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/signals"
)

// RemoteOptions configure a Remote.
type RemoteOptions struct {
	// URL is brownoutd's base URL, e.g. http://127.0.0.1:8080. Set URL
	// or URLs.
	URL string
	// URLs are the base URLs of one daemon's replicas (brownoutd in HA,
	// where every replica answers reads), followed one at a time: Run
	// starts at one of them at random, so that a fleet's streams spread
	// over the replicas, and moves to another when its stream fails,
	// ends, or lags (LagTimeout) — the next in the order given that has
	// not failed last, else simply the next. At most 16, no replica twice
	// (internal/replica's rules); one URL is the same as URL.
	URLs []string
	// Token, when set, is sent as Authorization: Bearer (the daemon's
	// evaluation or operator token).
	Token string
	// Service, when set, names the service to follow on a daemon of
	// several (brownoutd's services:), sent in the X-Brownout-Service
	// header; a URL under the service's path
	// (http://brownoutd:8080/services/shop) says it too. An app that
	// follows several services runs a Remote (and a Provider) for each,
	// registered under an OpenFeature domain each (the root package's
	// Options.Service), each with its own StateFile. A daemon of one
	// service refuses a stream that names one (404). Lower-case letters,
	// digits, '-', '_' and '.'.
	Service string
	// StaleTTL: after this long without the daemon, every feature falls
	// back to its default (until then the last-known levels hold, marked
	// stale). Default 1 minute.
	StaleTTL time.Duration
	// Defaults are the features' fallbacks: true fails open (the feature
	// on), false closed. They override the defaults the daemon publishes;
	// before the daemon was ever reached (and without StateFile) they
	// name the features. A feature in neither falls back to on.
	Defaults map[string]bool
	// Features name the features the app knows of before the daemon was
	// ever reached (and without StateFile): each at its Defaults entry,
	// else on — failing open, as the daemon does for a feature whose
	// configuration declares no default — so that a cold start with the
	// daemon down answers them with their defaults, not FLAG_NOT_FOUND.
	// Unlike Defaults they override nothing: once a state is heard (or
	// read from StateFile), the features are the daemon's, at its
	// published defaults. Each name obeys CheckFeatureName.
	Features []string
	// StateFile, when set, keeps the last-known state across restarts of
	// the app: written on every change, read at start (used while younger
	// than StaleTTL, else only for the feature names and defaults).
	StateFile string
	// ReadTimeout ends a connection on which nothing arrived (not even a
	// keep-alive) for this long. Default 45 s (three of the daemon's).
	ReadTimeout time.Duration
	// MinBackoff and MaxBackoff bound the reconnection delay (exponential,
	// full jitter). Defaults 100 ms and 10 s.
	MinBackoff, MaxBackoff time.Duration
	// LagTimeout: the replica followed is left for another when, for
	// this long, it gave no news: no state at least as new as the one
	// held (it lags behind a replica followed before), no tick event of
	// a generation at least that one (the leader's commits, relayed by
	// every replica), and no replica event saying it is current (each
	// replica sends one per tick: see api.ReplicaJSON). A replica that
	// no longer hears its leader, that says it is not current, or a
	// paused process whose connection stays open is so left.
	//
	// Default: the lease the replicas announce in their replica events
	// (3 s by default) — how long the cluster itself waits for a silent
	// leader, so that an app never waits for a paused replica longer than
	// its replicas wait for a paused leader; before any replica event,
	// and for daemons that send none, 10 s, at least three of the ticks'
	// interval as last observed. A change of leader moves no stream: the
	// replicas stay current, or say so again within a tick, until the
	// new leader commits. With one URL it applies once the daemon sends
	// replica events (a load balancer in front of replicas: the
	// reconnection reaches another); otherwise only ReadTimeout ends a
	// quiet stream.
	LagTimeout time.Duration
	// Client makes the connections. Default: a client without an overall
	// timeout (a stream lasts).
	Client *http.Client
	// Logger receives a line when the link to the daemon changes state: a
	// WARN when it is lost, another when the daemon refuses the token
	// (ErrUnauthorized), an INFO when a state arrives again — never one
	// per attempt. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Remote follows brownoutd's /v1/stream and holds the newest state, so
// that a Provider over it (New(remote, …)) evaluates locally with the
// in-process code — no network round trip per evaluation, and never a
// blocked one. While the daemon is away the last-known levels hold with
// mode stale (the provider emits PROVIDER_STALE); after StaleTTL every
// feature takes its default; on return the daemon's state (and
// PROVIDER_READY). A daemon that restarted (another boot epoch in the
// event ids) is followed even though its generation starts again.
//
// A state the daemon could not have published — not version 1, a level
// outside 0..1, an event over dimmer.MaxStateBytes, more features or
// segments than a configuration may declare (dimmer.MaxFeatures,
// dimmer.MaxSegments) — is a bad state: the connection ends, the levels
// held stay, and the next attempt waits a growing backoff.
//
// With several URLs (RemoteOptions.URLs, one daemon's replicas) it
// follows one replica at a time and moves to another when that one
// fails, ends its stream or lags; it never takes a state older than the
// one it holds (a lower generation of the same boot epoch).
//
// How the link to the daemon fares is in Health (and, per replica, in
// HealthByURL); the Logger is told when that changes.
//
// Run it with Run; it is safe for concurrent use.
type Remote struct {
	o     RemoteOptions
	urls  []string // the replicas' base URLs, checked: one at least
	first int      // the URL Run starts at: one of urls, at random
	log   *slog.Logger
	// charge holds RequestCost's float64 bits (0: none learned, 1).
	charge atomic.Uint64

	mu struct {
		sync.Mutex
		st        *dimmer.State
		seq       uint64
		subs      map[chan *dimmer.State]struct{}
		boot      int64
		gen       uint64
		last      *wireState       // the daemon's newest, for staleness
		lastAt    time.Time        // when the daemon was last heard
		seed      *dimmer.ShedSeed // the daemon's newest, kept while it is away
		connected bool
		defaults  map[string]bool
		names     []string
		link      link
		// peers are the links to each replica, in urls' order; at is the
		// one followed now (−1: none), tickEvery the interval between the
		// daemon's tick events as last observed.
		peers     []peer
		at        int
		tickEvery time.Duration
		// lease is the one the replicas announce (0: none yet); doubt,
		// when set, why the replica followed says it is not current: the
		// state held is then published stale.
		lease time.Duration
		doubt string
	}
}

// peer is the stream's link to one replica.
type peer struct {
	lastSuccess, lastErrorAt time.Time
	lastError                string
	errors                   uint64
	// failing: its last connection failed or was left for lagging; Run
	// tries the other replicas first.
	failing bool
}

// ErrUnauthorized is wrapped by the error of a connection the daemon
// refused for its credentials: 401 (the token is missing or none of the
// daemon's evaluation or operator tokens) or 403. A retry cannot fix it,
// the configuration can: RemoteOptions.Token or the daemon's tokens. The
// Remote still reconnects, backing off, so that it follows the daemon
// again without a restart once they agree.
var ErrUnauthorized = errors.New("provider: remote: brownoutd refused the token")

// link is how the stream to the daemon fares: what Health reports, and
// what the log last said of it.
type link struct {
	lastSuccess, lastErrorAt time.Time
	lastError                string
	errors                   uint64
	said                     linkState
}

// linkState is the link's state as the log tells it: one line each time
// it changes.
type linkState uint8

const (
	// following is the zero value: a Remote starts as if it followed, so
	// that its first failure is said.
	following linkState = iota
	// refused: the daemon refused the token (ErrUnauthorized).
	refused
	// lost: any other failure — the daemon away, a bad state, a stream
	// that ended.
	lost
)

func linkStateOf(err error) linkState {
	if errors.Is(err, ErrUnauthorized) {
		return refused
	}
	return lost
}

// Health reports the link to the daemon, for a status page (the root
// package's GET /v1/state in fleet mode): OK while the stream is up
// (Connected), from whichever replica; LastSuccess is when a state last
// arrived; LastError is why the stream last failed, ended or was left —
// for a daemon that refused the token, "…: unauthorized (401) — check
// the token …" — and stays after recovery (compare LastErrorAt with
// LastSuccess); Errors counts the failed, ended or left connections. Its
// Name is "stream " and the stream's URL (the replicas' URLs, separated
// by ", "). Times are by RemoteOptions.Now.
func (r *Remote) Health() signals.SourceHealth {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.mu.link
	names := make([]string, len(r.urls))
	for i, u := range r.urls {
		names[i] = u + "/v1/stream"
	}
	return signals.SourceHealth{Name: "stream " + strings.Join(names, ", "), OK: r.mu.connected, LastSuccess: l.lastSuccess,
		LastError: l.lastError, LastErrorAt: l.lastErrorAt, Errors: l.errors}
}

// HealthByURL reports the link to each replica, in the order of the
// URLs: OK for the one followed now; LastSuccess when a state last
// arrived from it; LastError why its stream last failed, ended or was
// left (lagging), kept after recovery; Errors counts those. Each Name is
// "stream " and the replica's stream URL. With one URL it is Health
// alone.
func (r *Remote) HealthByURL() []signals.SourceHealth {
	if len(r.urls) == 1 {
		return []signals.SourceHealth{r.Health()}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]signals.SourceHealth, len(r.urls))
	for i, p := range r.mu.peers {
		out[i] = signals.SourceHealth{Name: "stream " + r.urls[i] + "/v1/stream", OK: r.mu.connected && r.mu.at == i,
			LastSuccess: p.lastSuccess, LastError: p.lastError, LastErrorAt: p.lastErrorAt, Errors: p.errors}
	}
	return out
}

// Following returns the base URL of the replica whose stream the Remote
// follows now, "" while it follows none.
func (r *Remote) Following() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.mu.connected || r.mu.at < 0 {
		return ""
	}
	return r.urls[r.mu.at]
}

// URLs returns the replicas' base URLs, as checked (in the order given,
// trailing slashes trimmed).
func (r *Remote) URLs() []string { return slices.Clone(r.urls) }

var _ Source = (*Remote)(nil)

// wireState is the part of the daemon's state (api.StateJSON, "v": 1)
// that evaluation needs; other fields are ignored. Its lists and maps are
// bounded as a valid daemon's configuration is (dimmer.MaxFeatures,
// dimmer.MaxSegments), and decoding stops at the first element past a
// bound: a hostile daemon's state costs no more memory than its bytes.
type wireState struct {
	V            int            `json:"v"`
	Boot         int64          `json:"boot"`
	Generation   uint64         `json:"generation"`
	Time         time.Time      `json:"time"`
	Mode         string         `json:"mode"`
	Shed         float64        `json:"shed"`
	Reason       string         `json:"reason"`
	SegmentNames boundedStrings `json:"segment_names"`
	// RequestCost is the daemon's charge of a request (0: not given).
	RequestCost float64 `json:"request_cost"`
	// ShedSeed is in the stream's state events only (see dimmer.ShedSeed).
	ShedSeed *dimmer.ShedSeed `json:"shed_seed,omitempty"`
	Features wireFeatures     `json:"features"`
	// SavedAt is set in the state file only.
	SavedAt time.Time `json:"saved_at,omitzero"`
}

// wireFeature is one feature of wireState.
type wireFeature struct {
	Name     string        `json:"name"`
	Level    float64       `json:"level"`
	Computed float64       `json:"computed"`
	Floor    float64       `json:"floor"`
	Mode     string        `json:"mode"`
	Default  *bool         `json:"default"`
	Segments segmentLevels `json:"segments"`
	Override *struct {
		Level  float64   `json:"level"`
		Until  time.Time `json:"until"`
		Reason string    `json:"reason"`
	} `json:"override"`
	Cap *struct {
		Reason string `json:"reason"`
	} `json:"cap"`
}

// wireFeatures holds at most dimmer.MaxFeatures features.
type wireFeatures []wireFeature

func (l *wireFeatures) UnmarshalJSON(b []byte) error {
	v, err := decodeList[wireFeature](b, dimmer.MaxFeatures, "features")
	*l = v
	return err
}

// boundedStrings holds at most dimmer.MaxSegments names.
type boundedStrings []string

func (l *boundedStrings) UnmarshalJSON(b []byte) error {
	v, err := decodeList[string](b, dimmer.MaxSegments, "segment names")
	*l = v
	return err
}

// segmentLevels holds at most dimmer.MaxSegments levels by segment name.
type segmentLevels map[string]float64

func (m *segmentLevels) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		*m = nil
		return nil
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("segments: want an object")
	}
	out := segmentLevels{}
	for dec.More() {
		if len(out) == dimmer.MaxSegments {
			return fmt.Errorf("segments: more than %d", dimmer.MaxSegments)
		}
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var v float64
		if err := dec.Decode(&v); err != nil {
			return err
		}
		out[k.(string)] = v
	}
	*m = out
	return nil
}

// decodeList decodes a JSON array (or null) of at most limit elements,
// stopping at the first one past it.
func decodeList[T any](b []byte, limit int, what string) ([]T, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('[') {
		return nil, fmt.Errorf("%s: want an array", what)
	}
	out := []T{}
	for dec.More() {
		if len(out) == limit {
			return nil, fmt.Errorf("%s: more than %d", what, limit)
		}
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (w *wireState) check() error {
	if w.V != 1 {
		return fmt.Errorf("state version %d: want 1", w.V)
	}
	if !(w.RequestCost >= 0 && w.RequestCost <= 1) {
		return fmt.Errorf("request_cost %v outside 0..1", w.RequestCost)
	}
	seen := map[string]bool{}
	for i, f := range w.Features {
		if f.Name == "" || seen[f.Name] {
			return fmt.Errorf("features[%d]: missing or repeated name %q", i, f.Name)
		}
		seen[f.Name] = true
		if !(f.Level >= 0 && f.Level <= 1) {
			return fmt.Errorf("features[%d] (%s): level %v outside 0..1", i, f.Name, f.Level)
		}
	}
	return nil
}

// NewRemote returns a follower of the daemon at o.URL (or of its
// replicas at o.URLs), holding the state file's last-known state or the
// defaults until it connects. An empty list, a URL that is not an
// http(s) base URL and a replica listed twice are errors.
func NewRemote(o RemoteOptions) (*Remote, error) {
	urls := o.URLs
	switch {
	case o.URL != "" && len(o.URLs) > 0:
		return nil, errors.New("provider: remote: URL and URLs both set: set URLs alone for several replicas")
	case o.URL != "":
		urls = []string{o.URL}
	}
	urls, err := replica.Check(urls, true)
	if err != nil {
		return nil, fmt.Errorf("provider: remote: %w", err)
	}
	o.URL, o.URLs = urls[0], urls
	if o.Service != "" {
		if err := service.Check(o.Service); err != nil {
			return nil, fmt.Errorf("provider: remote: %w", err)
		}
	}
	if o.StaleTTL <= 0 {
		o.StaleTTL = time.Minute
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 45 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(10*time.Second, o.MinBackoff)
	}
	if o.LagTimeout < 0 {
		o.LagTimeout = 0
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Remote{o: o, urls: urls, first: rand.IntN(len(urls)), log: o.Logger}
	r.mu.subs = map[chan *dimmer.State]struct{}{}
	r.mu.peers = make([]peer, len(urls))
	r.mu.at = -1
	r.mu.defaults = map[string]bool{}
	// The features before the daemon is heard: those listed, in their
	// order, then the other names of Defaults, sorted.
	listed := map[string]bool{}
	for _, name := range o.Features {
		if err := CheckFeatureName(name); err != nil {
			return nil, fmt.Errorf("provider: remote: Features: %w", err)
		}
		if !listed[name] {
			listed[name] = true
			r.mu.names = append(r.mu.names, name)
		}
	}
	var more []string
	for name, d := range o.Defaults {
		r.mu.defaults[name] = d
		if !listed[name] {
			more = append(more, name)
		}
	}
	slices.Sort(more)
	r.mu.names = append(r.mu.names, more...)
	if o.StateFile != "" {
		if w, err := readStateFile(o.StateFile); err != nil {
			r.log.Warn("provider: remote: last-known state not used", "file", o.StateFile, "err", err)
		} else if w != nil {
			r.learn(w)
			if o.Now().Sub(w.SavedAt) < o.StaleTTL {
				r.mu.last, r.mu.lastAt = w, w.SavedAt
				// Held: a replica behind it (the same epoch, a lower
				// generation) is not followed.
				r.mu.boot, r.mu.gen = w.Boot, w.Generation
				r.publishLocked(r.stale(w, "last-known state from "+o.StateFile))
				return r, nil
			}
		}
	}
	r.publishLocked(r.fallback("not yet connected to " + strings.Join(urls, ", ")))
	return r, nil
}

// State returns the newest state (an atomic-cheap read under a mutex).
func (r *Remote) State() *dimmer.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.st
}

// Subscribe delivers the newest state after each change, coalesced.
func (r *Remote) Subscribe() (<-chan *dimmer.State, func()) {
	ch := make(chan *dimmer.State, 1)
	r.mu.Lock()
	r.mu.subs[ch] = struct{}{}
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		delete(r.mu.subs, ch)
		r.mu.Unlock()
	}
}

// Connected reports whether the stream is up.
func (r *Remote) Connected() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.connected
}

// publishLocked makes st the newest state, with the next local sequence
// number (the daemon's generation while it grows, so that instances
// agree; past it after a daemon restart, so that followers never see a
// generation go back). Callers hold r.mu (or own r alone).
func (r *Remote) publishLocked(build func(seq uint64) *dimmer.State) {
	r.mu.seq++
	st := build(r.mu.seq)
	r.mu.seq = st.Generation
	r.mu.st = st
	for ch := range r.mu.subs {
		select {
		case ch <- st:
		default:
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- st:
			default:
			}
		}
	}
}

// ShedSeed returns the shed seed the daemon published with its newest
// state (kept while the daemon is away, and across restarts in the
// StateFile), for shed.Config.ShedSeed: the instances following one
// daemon then shed the same clients. ok is false before the daemon was
// ever heard, or when it publishes none.
func (r *Remote) ShedSeed() (seed dimmer.ShedSeed, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.seed == nil {
		return seed, false
	}
	return *r.mu.seed, true
}

// learn takes feature names, published defaults and the shed seed from a
// state.
func (r *Remote) learn(w *wireState) {
	r.charge.Store(math.Float64bits(chargeOf(w.RequestCost)))
	if w.ShedSeed != nil {
		r.mu.seed = w.ShedSeed
	}
	names := make([]string, 0, len(w.Features))
	for _, f := range w.Features {
		names = append(names, f.Name)
		if _, set := r.o.Defaults[f.Name]; !set && f.Default != nil {
			r.mu.defaults[f.Name] = *f.Default
		}
	}
	r.mu.names = names
}

// fromWire builds the daemon's state, mode mapped, at sequence seq (or
// the daemon's generation when larger).
func fromWire(w *wireState, seq uint64, stale bool, reason string) *dimmer.State {
	gen := max(seq, w.Generation)
	mode, _ := dimmer.ParseMode(w.Mode)
	if stale {
		mode = dimmer.Stale
	}
	fs := make([]dimmer.PublishedFeature, len(w.Features))
	for i, f := range w.Features {
		m, _ := dimmer.ParseMode(f.Mode)
		if stale {
			m = dimmer.Stale
		}
		p := dimmer.PublishedFeature{Name: f.Name, Level: f.Level, Computed: f.Computed, Floor: f.Floor, Mode: m}
		for _, s := range w.SegmentNames {
			v, ok := f.Segments[s]
			if !ok {
				v = f.Level
			}
			p.Segments = append(p.Segments, v)
		}
		if f.Override != nil {
			p.Pin = &dimmer.Pin{Level: f.Override.Level, Until: f.Override.Until, Reason: f.Override.Reason}
		}
		if f.Cap != nil {
			p.CapReason = f.Cap.Reason
		}
		fs[i] = p
	}
	if reason == "" {
		reason = w.Reason
	}
	return dimmer.Published(gen, w.Time, mode, w.Shed, reason, w.SegmentNames, fs)
}

// stale holds w's levels, marked stale.
func (r *Remote) stale(w *wireState, why string) func(uint64) *dimmer.State {
	return held(w, "brownoutd unreachable, last-known levels held: "+why)
}

// held holds w's levels, marked stale for reason.
func held(w *wireState, reason string) func(uint64) *dimmer.State {
	return func(seq uint64) *dimmer.State { return fromWire(w, seq, true, reason) }
}

// RequestCost is what the daemon says a request is expected to take at
// the levels it publishes, as a share of one with every feature on
// (dimmer.Controller.RequestCost, the state's request_cost): what this
// instance's gate charges a request (brownout.New), so that it counts
// work in flight as the daemon's model law sets the levels in it. 1
// before a state was heard, from a daemon that does not say (an older
// one), and while the features are at their defaults; a state whose
// request_cost is outside 0..1 is refused, as one with a level outside
// it. Safe for concurrent use.
func (r *Remote) RequestCost() float64 {
	if w := math.Float64frombits(r.charge.Load()); w > 0 {
		return w
	}
	return 1
}

// minCharge is the least charge a daemon's request_cost is taken at
// (dimmer's minRequestCost): a request is never free.
const minCharge = 0.01

// chargeOf is the charge a daemon's request_cost v stands for (a state
// checked: within 0..1): at least minCharge, and 1 where none is given
// (0: a daemon from before it) — a full request, the gate's unit before
// the charge.
func chargeOf(v float64) float64 {
	if !(v > 0 && v <= 1) {
		return 1
	}
	return max(v, minCharge)
}

// fallback is every known feature at its default, marked stale.
func (r *Remote) fallback(why string) func(uint64) *dimmer.State {
	r.charge.Store(math.Float64bits(1)) // (no levels the daemon's charge was for)
	names := append([]string(nil), r.mu.names...)
	defaults := r.mu.defaults
	return func(seq uint64) *dimmer.State {
		fs := make([]dimmer.PublishedFeature, len(names))
		for i, n := range names {
			lvl := 1.0
			if d, ok := defaults[n]; ok && !d {
				lvl = 0
			}
			fs[i] = dimmer.PublishedFeature{Name: n, Level: lvl, Computed: lvl, Mode: dimmer.Stale}
		}
		return dimmer.Published(seq, time.Time{}, dimmer.Stale, 0, "brownoutd unreachable, features at their defaults: "+why, nil, fs)
	}
}

// Run follows the daemon until ctx ends: connect, read, and on any
// failure reconnect after an exponential backoff with full jitter; the
// staleness clock runs meanwhile. It returns ctx's error.
//
// With several URLs it starts at one at random and, after a failure,
// tries the next replica in the order given whose last connection did
// not fail (else the next): the same backoff before each attempt, reset
// by a connection that followed, so that leaving a dead replica costs at
// most 2 × MinBackoff, and replicas all down are tried in turn, the
// waits growing to MaxBackoff — never more than one attempt per wait.
func (r *Remote) Run(ctx context.Context) error {
	go r.expire(ctx)
	attempt, i := 0, r.first
	for {
		heard, err := r.connect(ctx, i)
		if ctx.Err() != nil {
			r.left()
			return ctx.Err()
		}
		r.disconnected(i, heard, err)
		if heard {
			attempt = 0
		}
		attempt++
		i = r.next(i)
		ceil := min(r.o.MaxBackoff, r.o.MinBackoff<<min(attempt, 20))
		t := time.NewTimer(time.Duration(rand.Int64N(int64(ceil) + 1)))
		select {
		case <-ctx.Done():
			t.Stop()
			r.left()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// left notes that Run has returned: nothing follows the daemon any more,
// so the link is down (Connected false) and the state it last had is
// stale from now on — not served as followed by a Run that ended.
func (r *Remote) left() {
	now := r.o.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.mu.connected
	r.mu.connected, r.mu.at, r.mu.doubt = false, -1, ""
	if was {
		r.mu.lastAt = now // the stale clock starts here
		if r.mu.last != nil {
			r.publishLocked(r.stale(r.mu.last, "not following brownoutd: Run returned"))
		}
	}
}

// next returns the replica to try after i: the next in the order given
// whose last connection did not fail, else the next.
func (r *Remote) next(i int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.urls)
	for k := 1; k < n; k++ {
		if j := (i + k) % n; !r.mu.peers[j].failing {
			return j
		}
	}
	return (i + 1) % n
}

// expire falls back to the defaults once the daemon has been away for
// StaleTTL.
func (r *Remote) expire(ctx context.Context) {
	t := time.NewTicker(min(max(r.o.StaleTTL/10, 10*time.Millisecond), time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		if !r.mu.connected && r.mu.last != nil && r.o.Now().Sub(r.mu.lastAt) >= r.o.StaleTTL {
			r.mu.last = nil
			r.publishLocked(r.fallback(fmt.Sprintf("no news for %v", r.o.StaleTTL)))
		}
		r.mu.Unlock()
	}
}

// errHeard: the connection delivered at least one state before it ended.
var errHeard = errors.New("provider: remote: stream ended")

// disconnected notes that the connection to replica i failed, ended or
// was left with err (heard: after it followed), and tells the log when
// the link's state changed.
func (r *Remote) disconnected(i int, heard bool, err error) {
	now := r.o.Now()
	st := linkStateOf(err)
	r.mu.Lock()
	was := r.mu.connected
	r.mu.connected, r.mu.at, r.mu.doubt = false, -1, ""
	p := &r.mu.peers[i]
	// A replica left for lagging is tried after the others.
	p.lastError, p.lastErrorAt, p.failing = errString(err), now, !heard || errors.Is(err, errLags)
	p.errors++
	if was {
		r.mu.lastAt = now // the daemon was there until now: the stale clock starts here
	}
	if was && r.mu.last != nil {
		r.publishLocked(r.stale(r.mu.last, errString(err)))
	}
	l := &r.mu.link
	l.lastError, l.lastErrorAt = errString(err), now
	l.errors++
	tell := st != l.said
	l.said = st
	r.mu.Unlock()
	if !tell {
		return
	}
	switch st {
	case refused:
		r.log.Warn("provider: remote: brownoutd refuses this app's token: check it", "url", r.urls[i], "err", err)
	default:
		r.log.Warn("provider: remote: disconnected from brownoutd", "url", r.urls[i], "err", err)
	}
}

// followed notes that a connection to replica i delivered its first
// state, and tells the log when that ends a failure it told.
func (r *Remote) followed(i int) {
	r.mu.Lock()
	tell := r.mu.link.said != following
	r.mu.link.said = following
	r.mu.Unlock()
	if tell {
		r.log.Info("provider: remote: following brownoutd again", "url", r.urls[i])
	}
}

func errString(err error) string {
	if err == nil || err == errHeard {
		return "the stream ended"
	}
	return err.Error()
}

// connect reads one connection's events from replica i until it fails,
// ends, or — with several replicas — lags; heard says whether it
// followed: it delivered a state, and was not left for lagging before
// any fresh tick.
func (r *Remote) connect(parent context.Context, i int) (heard bool, err error) {
	base := r.urls[i]
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/stream", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if r.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.o.Token)
	}
	if r.o.Service != "" {
		req.Header.Set(service.Header, r.o.Service)
	}
	r.mu.Lock()
	if r.mu.boot != 0 {
		// The same id at any replica: in HA the boot epoch is the
		// cluster's. Every stream starts with the full state anyway.
		req.Header.Set("Last-Event-ID", strconv.FormatInt(r.mu.boot, 10)+"-"+strconv.FormatUint(r.mu.gen, 10))
	}
	r.mu.Unlock()
	// watch: the lag timer runs — with several replicas, or once the
	// daemon says it is a replica.
	watch := len(r.urls) > 1
	w := watchdog{alive: make(chan struct{}, 1), lag: make(chan time.Duration, 1)}
	if watch {
		w.arm(r.lagAfter()) // a state at least as new as ours must come
	}
	go w.run(ctx, cancel, r.o.ReadTimeout, errStalled(base, r.o.ReadTimeout), errLags)
	fresh := false // a tick at least as new as the state held came
	// cut returns a connection's end, err, or why the watchdog cut it.
	cut := func(err error) (bool, error) {
		switch cause := context.Cause(ctx); {
		case parent.Err() != nil:
		case cause == errLags:
			// Left: it followed if it brought news before it went quiet.
			return heard && fresh, r.lagError(base, heard)
		case errors.Is(cause, errStalledBase):
			return heard, cause
		}
		return heard, err
	}
	resp, err := r.o.Client.Do(req)
	if err != nil {
		return cut(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, refusal(base+"/v1/stream", resp)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return false, fmt.Errorf("provider: remote: %s/v1/stream: content type %q", base, ct)
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var event, id string
	var data strings.Builder
	var lastTick time.Time
	for {
		// A line may hold what is left of the event's bound, and its
		// field name.
		line, err := readLine(br, maxEvent-data.Len()+len("data: "))
		if err != nil {
			if err == errEventTooLarge {
				return false, err // a bad state: the backoff grows
			}
			if ctx.Err() != nil {
				return cut(err)
			}
			if heard {
				return true, errHeard
			}
			if errors.Is(err, io.EOF) {
				return false, errors.New("provider: remote: the stream ended before a state")
			}
			return false, err
		}
		select {
		case w.alive <- struct{}{}:
		default:
		}
		switch {
		case line == "":
			switch event {
			case "state":
				adopted, err := r.apply(i, id, data.String())
				if err != nil {
					return false, fmt.Errorf("provider: remote: bad state event: %w", err)
				}
				if adopted && !heard {
					r.followed(i)
				}
				heard = heard || adopted
				if adopted && watch {
					w.arm(r.lagAfter()) // now its ticks must come
				}
			case "tick":
				if watch && heard && r.ticked(data.String(), &lastTick) {
					fresh = true
					w.arm(r.lagAfter())
				}
			case "replica":
				news, ok := r.replicaSaid(data.String())
				if !ok {
					break
				}
				if news || !watch {
					// News, or the first word of a replica followed
					// alone: its lease runs from here. A replica that
					// says it is not current gets no more time.
					w.arm(r.lagAfter())
				}
				watch = true
				fresh = fresh || news && heard
			}
			event, id = "", ""
			data.Reset()
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(line[6:])
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(line[5:], " "))
			if data.Len() > maxEvent {
				return false, errEventTooLarge
			}
		}
	}
}

// watchdog ends a connection on which nothing arrived for ReadTimeout,
// or whose lag timer (armed by the reader, with several replicas) ran
// out. Its goroutine is the connection's, and ends with it.
type watchdog struct {
	alive chan struct{}      // a line arrived
	lag   chan time.Duration // (re)arm the lag timer; 0 stops it
}

// arm sets the lag timer to d from now (0: stopped). Only the reader
// calls it, so it never blocks.
func (w watchdog) arm(d time.Duration) {
	select {
	case <-w.lag:
	default:
	}
	w.lag <- d
}

func (w watchdog) run(ctx context.Context, cancel context.CancelCauseFunc, readTimeout time.Duration, stalled, lags error) {
	read := time.NewTimer(readTimeout)
	defer read.Stop()
	lag := time.NewTimer(time.Hour)
	lag.Stop()
	defer lag.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.alive:
			read.Reset(readTimeout)
		case d := <-w.lag:
			lag.Stop()
			if d > 0 {
				lag.Reset(d)
			}
		case <-read.C:
			cancel(stalled)
			return
		case <-lag.C:
			cancel(lags)
			return
		}
	}
}

// errLags is the watchdog's cause for a replica that lags, and wrapped
// by lagError, which says how.
var errLags = errors.New("lags")

// errStalledBase is wrapped by the error of a stream on which nothing
// arrived for ReadTimeout.
var errStalledBase = errors.New("nothing arrived, not even a keep-alive")

func errStalled(base string, d time.Duration) error {
	return fmt.Errorf("provider: remote: %s/v1/stream: %w, for %v", base, errStalledBase, d)
}

// lagError says why a replica was left: it sent no state as new as the
// one held, or its ticks stopped.
func (r *Remote) lagError(base string, heard bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !heard && r.mu.boot == 0:
		return fmt.Errorf("provider: remote: %s %w: no state within %v; trying another replica", base, errLags, r.lagAfterLocked())
	case !heard:
		return fmt.Errorf("provider: remote: %s %w: no state as new as the one held (%d-%d) within %v; trying another replica",
			base, errLags, r.mu.boot, r.mu.gen, r.lagAfterLocked())
	}
	if r.mu.doubt != "" {
		return fmt.Errorf("provider: remote: %s %w: %s, for %v; trying another replica", base, errLags, r.mu.doubt, r.lagAfterLocked())
	}
	return fmt.Errorf("provider: remote: %s %w: no news of the control loop (tick events, current replica events) within %v; trying another replica",
		base, errLags, r.lagAfterLocked())
}

// defaultLagTimeout is LagTimeout's default for daemons that announce no
// lease.
const defaultLagTimeout = 10 * time.Second

// lagAfter is how long a replica may go without news before it is left:
// LagTimeout, else the lease the replicas announce, else 10 s; without a
// lease, at least three of the daemon's tick intervals.
func (r *Remote) lagAfter() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lagAfterLocked()
}

func (r *Remote) lagAfterLocked() time.Duration {
	switch {
	case r.o.LagTimeout > 0:
		return max(r.o.LagTimeout, 3*r.mu.tickEvery)
	case r.mu.lease > 0:
		return r.mu.lease
	}
	return max(defaultLagTimeout, 3*r.mu.tickEvery)
}

// replicaSaid takes a replica event (api.ReplicaJSON): the lease it
// announces, and whether the replica is current — it knows of a leader
// whose lease holds. While it says it is not, the state held is
// published stale; once it is again (or a tick shows a leader's commit),
// fresh. news is true for a current replica serving a generation at
// least the one held; ok is false for an event that does not parse.
func (r *Remote) replicaSaid(data string) (news, ok bool) {
	var e struct {
		Replica      string  `json:"replica"`
		Current      bool    `json:"current"`
		Generation   uint64  `json:"generation"`
		LeaseSeconds float64 `json:"lease_seconds"`
	}
	if json.Unmarshal([]byte(data), &e) != nil {
		return false, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := e.LeaseSeconds; s > 0 {
		r.mu.lease = time.Duration(min(max(s, minLease.Seconds()), r.o.ReadTimeout.Seconds()) * float64(time.Second))
	}
	if !e.Current {
		r.doubtLocked(fmt.Sprintf("replica %.64q says no leader's lease holds as it last knew (it waits for a new leader, or cannot reach its store)", e.Replica))
		return false, true
	}
	r.believeLocked()
	return e.Generation >= r.mu.gen, true
}

// minLease bounds the lease a replica may announce from below: brownoutd's
// is at least three ticks, and a tick at least 100 ms.
const minLease = 300 * time.Millisecond

// doubtLocked notes that the replica followed is not current, and
// publishes the state held as stale (once).
func (r *Remote) doubtLocked(why string) {
	if r.mu.doubt == why {
		return
	}
	was := r.mu.doubt
	r.mu.doubt = why
	if was == "" && r.mu.connected && r.mu.last != nil {
		r.publishLocked(held(r.mu.last, "brownoutd has no current leader, last-known levels held: "+why))
	}
}

// believeLocked notes that the replica followed is current again.
func (r *Remote) believeLocked() {
	if r.mu.doubt == "" {
		return
	}
	r.mu.doubt = ""
	if r.mu.connected && r.mu.last != nil {
		w := r.mu.last
		r.publishLocked(func(seq uint64) *dimmer.State { return fromWire(w, seq, false, "") })
	}
}

// ticked notes a tick event (last: the previous tick's arrival on this
// connection) and reports whether it is fresh: of a generation at least
// the one held.
func (r *Remote) ticked(data string, last *time.Time) bool {
	var t struct {
		Generation uint64 `json:"generation"`
	}
	if json.Unmarshal([]byte(data), &t) != nil {
		return false
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !last.IsZero() {
		r.mu.tickEvery = min(now.Sub(*last), r.o.ReadTimeout)
	}
	*last = now
	if t.Generation < r.mu.gen {
		return false
	}
	r.believeLocked() // a leader's commit, relayed: the replica is current
	return true
}

// maxRefusal bounds what the follower reads of a refusal: a problem+json
// body (the daemon's are a few hundred bytes), whose detail the error,
// and so the log and Health, quote.
const maxRefusal = 1 << 10

// refusal reads the daemon's answer resp to url.
func refusal(url string, resp *http.Response) error {
	return httpproblem.ReadRefusal(resp, maxRefusal, httpproblem.Refusal{
		Where:        "provider: remote: " + url,
		Hint:         "check the token (this app's, and the daemon's evaluation or operator tokens)",
		Unauthorized: ErrUnauthorized,
	})
}

// maxEvent bounds one event's data: the largest state a valid daemon
// publishes (dimmer.MaxStateBytes). A larger event ends the connection
// as a bad state does: the daemon is not one this follower can trust.
const maxEvent = dimmer.MaxStateBytes

// maxStateFile bounds the state file: a state event's data, re-encoded
// with its saved_at.
const maxStateFile = maxEvent + 1<<10

var errEventTooLarge = fmt.Errorf("provider: remote: an event over %d bytes (a valid brownoutd's largest state)", maxEvent)

// readLine reads one line of at most limit bytes.
func readLine(br *bufio.Reader, limit int) (string, error) {
	var b strings.Builder
	for {
		part, isPrefix, err := br.ReadLine()
		if err != nil {
			return "", err
		}
		if b.Len()+len(part) > limit {
			return "", errEventTooLarge
		}
		b.Write(part)
		if !isPrefix {
			return b.String(), nil
		}
	}
}

// apply takes a state event from replica i: newer than what we hold, or
// from a daemon that restarted (another boot epoch). adopted is false
// for a state older than the one held (a lower generation of the same
// boot epoch: a replica that lags), which is never taken.
func (r *Remote) apply(i int, id, data string) (adopted bool, err error) {
	var w wireState
	if err := json.Unmarshal([]byte(data), &w); err != nil {
		return false, err
	}
	if err := w.check(); err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	restarted := r.mu.boot != 0 && w.Boot != r.mu.boot
	if !restarted && r.mu.boot != 0 && w.Generation < r.mu.gen {
		return false, nil // an older state of the same daemon
	}
	if restarted {
		r.log.Info("provider: remote: brownoutd restarted", "boot", w.Boot, "generation", w.Generation, "url", r.urls[i])
	}
	r.mu.boot, r.mu.gen = w.Boot, w.Generation
	r.mu.last, r.mu.lastAt, r.mu.connected, r.mu.at = &w, r.o.Now(), true, i
	r.mu.link.lastSuccess = r.mu.lastAt
	p := &r.mu.peers[i]
	p.lastSuccess, p.failing = r.mu.lastAt, false
	r.learn(&w)
	if r.mu.doubt != "" {
		r.publishLocked(held(&w, "brownoutd has no current leader, last-known levels held: "+r.mu.doubt))
	} else {
		r.publishLocked(func(seq uint64) *dimmer.State { return fromWire(&w, seq, false, "") })
	}
	if r.o.StateFile != "" {
		w.SavedAt = r.o.Now()
		if err := writeStateFile(r.o.StateFile, &w); err != nil {
			r.log.Warn("provider: remote: saving the last-known state", "file", r.o.StateFile, "err", err)
		}
	}
	return true, nil
}

func readStateFile(path string) (*wireState, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxStateFile {
		return nil, fmt.Errorf("provider: remote: %s: over %d bytes", path, maxStateFile)
	}
	var w wireState
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, err
	}
	return &w, w.check()
}

func writeStateFile(path string, w *wireState) error {
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".brownout-state-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
