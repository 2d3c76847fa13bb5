package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/jsonbody"
	"github.com/brownout/brownout/internal/local"
	httpproblem "github.com/brownout/brownout/internal/problem"
	"github.com/brownout/brownout/internal/server"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/signals"
)

// Version is the version of the JSON bodies this package writes ("v").
const Version = 1

// maxBody bounds every request body this package reads.
const maxBody = 64 << 10

// bodyTimeout bounds the time a client may take to send a body, as in
// the servers of package server.
const bodyTimeout = server.BodyTimeout

// Config configures an API.
type Config struct {
	// Controller is the controller served. Required.
	Controller *dimmer.Controller
	// Provider evaluates flags for OFREP. Default: a provider.New of the
	// Controller (its evaluation counters then count OFREP's answers).
	Provider *provider.Provider
	// OperatorTokens are the named bearer tokens allowed to write
	// (overrides, freeze, shadow): name → token; the name is the "who" of
	// the audit line. With none, writes are refused unless Loopback.
	OperatorTokens map[string]string
	// EvalTokens, when any is set, are required on OFREP evaluations (as
	// Authorization: Bearer or X-API-Key).
	EvalTokens map[string]string
	// PushTokens are required on POST /v1/signals when any is set.
	PushTokens map[string]string
	// Defaults are what apps should fall back to per feature when they
	// cannot reach the daemon (true: fail open), shown in /v1/state.
	Defaults map[string]bool
	// Service names the service on a daemon of several (brownoutd's
	// services:), shown in /v1/state; "" for a daemon's one service. The
	// routes stay the API's own: the daemon mounts them under the
	// service's path (and sets EventStreams to match).
	Service string
	// Loopback: the server listens on loopback addresses only, so that
	// writes without a configured token are allowed (as "local").
	Loopback bool
	// Push, when set, serves POST /v1/signals (a fleet.PushSource).
	Push http.Handler
	// Sources reports the signal sources' health for /v1/state.
	Sources func() []signals.SourceHealth
	// StateDir, when set, keeps the operators' overrides, freeze and
	// shadow in StateDir/operator.json across restarts. Ignored with a
	// Store.
	StateDir string
	// Store, when set, keeps the operators' state and the events for
	// replicas that share them (cluster.go). Default none: this process's
	// own.
	Store Store
	// Epoch is the boot epoch in ETags and stream ids, and Secret (32
	// bytes) the key of the stream tokens and of the shed seed. Default:
	// the time of New and random bytes, new each boot; replicas set the
	// cluster's, so that what one gave is good at another.
	Epoch  int64
	Secret []byte
	// Cluster, when set, says what /v1/state shows of the replicas.
	Cluster func() *ClusterJSON
	// History is how much per-tick history /v1/history keeps. Default
	// and minimum 15 minutes.
	History time.Duration
	// MaxStreams bounds the streams (/v1/stream and /ofrep/v1/events
	// together) open at once; past it a stream is refused with 503 and
	// Retry-After. Default DefaultMaxStreams.
	MaxStreams int
	// StreamCap, when set, bounds the streams in MaxStreams' place, and
	// counts them together with those of every API given the same one:
	// a daemon of several services shares one, so that its streams
	// together hold at most so many of its connections.
	StreamCap *StreamCap
	// OwnStreamConns: a stream over HTTP/1.1 takes its connection from
	// net/http and writes its chunked response itself, a wake's events in
	// one write to the socket (streamout.go): less work a delivery, for a
	// server that follows many streams. The http.Server's Close and
	// Shutdown then neither close nor wait for those streams: only for
	// a server that ends them with the API's Shutdown first (brownoutd
	// does). Default off: every stream is net/http's.
	OwnStreamConns bool
	// CORSOrigins are the origins (scheme://host[:port], ParseOrigin)
	// whose pages may evaluate flags from a browser: OFREP's evaluations
	// and its event stream answer them CORS, and no other route does
	// (cors.go). Default none.
	CORSOrigins []string
	// EventStreams are advertised in the OFREP bulk answer. Default: this
	// API's own OFREP stream, {"type":"sse","endpoint":{"requestUri":
	// "/ofrep/v1/events"},"inactivityDelaySec":120}; an empty non-nil
	// slice advertises none.
	EventStreams []EventStream
	// Registerer, when set, receives the API's metrics.
	Registerer prometheus.Registerer
	// Logger receives the audit lines. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// EventStream is an OFREP eventStreams entry: a URL, or an endpoint
// whose origin defaults to the OFREP base URL the client was given.
type EventStream struct {
	Type               string    `json:"type"`
	URL                string    `json:"url,omitempty"`
	Endpoint           *Endpoint `json:"endpoint,omitempty"`
	InactivityDelaySec int       `json:"inactivityDelaySec,omitempty"`
}

// Endpoint is an EventStream's structured location.
type Endpoint struct {
	Origin     string `json:"origin,omitempty"`
	RequestURI string `json:"requestUri"`
}

// API is the HTTP surface of a controller: OFREP evaluation, the state,
// history and events, the operators' writes and the push source. It is
// plain net/http (Handler), mounted by brownoutd and by the shop's
// embedded mode alike.
type API struct {
	cfg   Config
	ctl   *dimmer.Controller
	prov  *provider.Provider
	boot  int64 // boot epoch, in ETags and event ids
	now   func() time.Time
	log   *slog.Logger
	mux   http.Handler
	store *opStore

	hist    *history
	events  *eventLog
	metrics *metrics

	saveErrors atomic.Uint64
	closingWhy atomic.Pointer[string] // the streams' last event's reason (ShutdownFor)

	tokens   atomic.Pointer[tokenSet]
	defaults atomic.Pointer[map[string]bool]
	origins  atomic.Pointer[originSet] // granted CORS (cors.go)

	streams, ofrepStreams *hub
	streamCap             *StreamCap   // both kinds: Config.StreamCap, or one of MaxStreams
	ownedStreams          atomic.Int64 // those that own their connection (streamout.go)
	closing               chan struct{}
	// lastState is the newest state event encoded (stateEvent): a stream
	// opened while the state is the same is given these bytes, not its
	// own copy of them.
	lastState atomic.Pointer[[]byte]
	closeOnce sync.Once
	secret    [32]byte // signs stream tokens; new each boot

	// writeMu serialises the operators' changes (and saves of their
	// state): the controller's change, the flags in mu and the state
	// file's write happen as one. Taken before mu, never while holding it;
	// readers of the flags take mu alone.
	writeMu sync.Mutex
	closed  bool // Close ran: the state directory is no longer ours (under writeMu)
	mu      struct {
		sync.Mutex
		frozen       bool
		freezeReason string
		shadow       bool
		// pinners are who set each feature's pin: the pin of that
		// until (a pin set another way — a replica's, one restored
		// without a who — names no one).
		pinners map[string]pinner
	}
}

// pinner is who set a pin, and the pin's until, which tells it.
type pinner struct {
	who   string
	until time.Time
}

// setPinner records who set feature's pin, which lasts until until.
func (a *API) setPinner(feature, who string, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.pinners == nil {
		a.mu.pinners = map[string]pinner{}
	}
	a.mu.pinners[feature] = pinner{who, until}
}

// pinnedBy is who set feature's pin p: "" if it is not known.
func (a *API) pinnedBy(feature string, p *dimmer.Pin) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, ok := a.mu.pinners[feature]; ok && w.until.Equal(p.Until) {
		return w.who
	}
	return ""
}

// New returns the API of cfg.Controller and restores the operators'
// state from cfg.StateDir (a corrupt file is reported, moved aside and
// ignored: never fatal).
func New(cfg Config) (*API, error) {
	if cfg.Controller == nil {
		return nil, errors.New("api: no controller")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.StreamCap == nil {
		cfg.StreamCap = NewStreamCap(cfg.MaxStreams)
	}
	if cfg.History < 15*time.Minute {
		cfg.History = 15 * time.Minute
	}
	for _, ts := range []map[string]string{cfg.OperatorTokens, cfg.EvalTokens, cfg.PushTokens} {
		for name, tok := range ts {
			if tok == "" {
				return nil, fmt.Errorf("api: token %q is empty", name)
			}
		}
	}
	a := &API{cfg: cfg, ctl: cfg.Controller, prov: cfg.Provider, now: cfg.Now, log: cfg.Logger, streamCap: cfg.StreamCap}
	if err := a.SetCORSOrigins(cfg.CORSOrigins); err != nil {
		return nil, err
	}
	a.SetTokens(cfg.OperatorTokens, cfg.EvalTokens, cfg.PushTokens)
	a.SetDefaults(cfg.Defaults)
	a.streams, a.ofrepStreams, a.closing, a.secret = newHub(), newHub(), make(chan struct{}), newSecret()
	if a.cfg.EventStreams == nil {
		a.cfg.EventStreams = []EventStream{{Type: "sse", Endpoint: &Endpoint{RequestURI: "/ofrep/v1/events"}, InactivityDelaySec: 120}}
	}
	a.boot = a.now().UnixNano()
	if cfg.Epoch != 0 {
		a.boot = cfg.Epoch
	}
	if cfg.Secret != nil {
		if len(cfg.Secret) != len(a.secret) {
			return nil, fmt.Errorf("api: secret of %d bytes, want %d", len(cfg.Secret), len(a.secret))
		}
		copy(a.secret[:], cfg.Secret)
	}
	if a.prov == nil {
		p, err := provider.New(cfg.Controller, provider.Options{})
		if err != nil {
			return nil, err
		}
		a.prov = p
	}
	tick := cfg.Controller.Config().Tick
	a.hist = newHistory(int(cfg.History/tick) + 1)
	a.events = newEventLog(1000)
	a.metrics = newMetrics(a)
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(a.metrics); err != nil {
			return nil, err
		}
	}
	if cfg.StateDir != "" && cfg.Store == nil {
		a.store = &opStore{path: cfg.StateDir + "/operator.json"}
		if err := a.store.lock(); err != nil {
			return nil, err
		}
		if err := a.restore(); err != nil {
			a.store.unlock()
			return nil, err
		}
		// Fail at start, not at the first override, on a directory that
		// cannot be written.
		if err := a.store.write(a.snapshot()); err != nil {
			a.store.unlock()
			return nil, fmt.Errorf("api: state dir %s cannot be written: %w", cfg.StateDir, err)
		}
	}
	a.routes()
	return a, nil
}

// tokenSet is the tokens in force; replaced is closed when another set
// replaces it (open streams check themselves again).
type tokenSet struct {
	operator, eval, push map[string]string
	replaced             chan struct{}
}

// SetTokens replaces the tokens (a configuration reload). Open streams
// that the new tokens no longer admit end (stream.go).
func (a *API) SetTokens(operator, eval, push map[string]string) {
	if old := a.tokens.Swap(&tokenSet{operator, eval, push, make(chan struct{})}); old != nil {
		close(old.replaced)
		a.streams.kick() // the open streams look at the new tokens
		a.ofrepStreams.kick()
	}
}

// SetDefaults replaces the features' fallback defaults shown in the state.
func (a *API) SetDefaults(d map[string]bool) { a.defaults.Store(&d) }

// Defaults returns a copy of the features' fallback defaults.
func (a *API) Defaults() map[string]bool {
	if d := a.defaults.Load(); d != nil {
		return maps.Clone(*d)
	}
	return nil
}

// Note records an event that is not an operator's write (a reload).
func (a *API) Note(kind, what string) {
	e := Event{Time: a.now(), Kind: kind, What: what}
	if a.cfg.Store == nil {
		a.events.add(e)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := a.cfg.Store.Note(ctx, e); err != nil {
		a.log.Warn("brownout: an event could not be recorded in the store", "kind", kind, "what", what, "err", err)
	}
}

// Save writes the operators' state to the state directory now (at
// shutdown, after a reload; every accepted write already saved it).
func (a *API) Save() { a.save() }

// Close releases the state directory's lock (after Save, at shutdown).
// After it, changes are no longer written there: another process may own
// the directory now.
func (a *API) Close() {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	if a.store != nil && !a.closed {
		a.store.unlock()
	}
	a.closed = true
}

// ShutdownFor is Shutdown with the reason the streams' last event gives
// ("the daemon is stopping" by default): a daemon that stops serving
// this API's service while it runs on (a reload removed it) says so. The
// first reason given wins.
func (a *API) ShutdownFor(reason string) {
	a.closingWhy.CompareAndSwap(nil, &reason)
	a.Shutdown()
}

// shutdownReason is the reason of the streams' last event.
func (a *API) shutdownReason() string {
	if why := a.closingWhy.Load(); why != nil {
		return *why
	}
	return "the daemon is stopping"
}

// Handler returns the API's routes: /ofrep/v1/…, /v1/….
func (a *API) Handler() http.Handler { return a.mux }

// Boot returns the boot epoch (Unix nanoseconds) in the API's ETags.
func (a *API) Boot() int64 { return a.boot }

func (a *API) routes() {
	m := http.NewServeMux()
	// Reads: on a loopback listener, a read without a token is the local
	// operator's only (readRefusal).
	// OFREP's routes answer the pages of Config.CORSOrigins (cors.go);
	// no other route does.
	m.Handle("POST /ofrep/v1/evaluate/flags/{key}", a.cors(evalCORS, a.counted("single", a.localOFREP(a.evalOne))))
	m.Handle("POST /ofrep/v1/evaluate/flags", a.cors(evalCORS, a.counted("bulk", a.localOFREP(a.evalBulk))))
	m.Handle("GET /ofrep/v1/events", a.cors(eventsCORS, a.localOFREPStream(http.HandlerFunc(a.getOFREPEvents))))
	m.HandleFunc("OPTIONS /ofrep/v1/evaluate/flags/{key}", a.preflight(evalCORS))
	m.HandleFunc("OPTIONS /ofrep/v1/evaluate/flags", a.preflight(evalCORS))
	m.HandleFunc("OPTIONS /ofrep/v1/events", a.preflight(eventsCORS))
	m.Handle("GET /v1/stream", a.Local(http.HandlerFunc(a.getStream)))
	m.Handle("POST /v1/stream/token", a.Local(http.HandlerFunc(a.postStreamToken)))
	m.Handle("GET /v1/state", a.Local(http.HandlerFunc(a.getState)))
	m.Handle("GET /v1/history", a.Local(http.HandlerFunc(a.getHistory)))
	m.Handle("GET /v1/events", a.Local(http.HandlerFunc(a.getEvents)))
	m.HandleFunc("PUT /v1/features/{name}/override", a.write(a.putOverride))
	m.HandleFunc("DELETE /v1/features/{name}/override", a.write(a.deleteOverride))
	m.HandleFunc("POST /v1/freeze", a.write(a.postFreeze))
	m.HandleFunc("POST /v1/unfreeze", a.write(a.postUnfreeze))
	m.HandleFunc("PUT /v1/shadow", a.write(a.putShadow))
	if a.cfg.Push != nil {
		m.Handle("/v1/signals", a.pushAuth(a.cfg.Push))
	}
	a.mux = unmatched(m)
}

// probeMethods are the methods unmatched tries a request's path with, to
// tell a path no route has (404) from a method its routes do not take
// (405, with Allow).
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions}

// unmatched serves m, and answers what none of its routes takes as the
// API answers its other errors — problem+json, OFREP's error shape on
// /ofrep/ — not net/http's text/plain: 404 for a path no route has, 405
// with Allow for a method the path's routes do not take.
func unmatched(m *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := m.Handler(r); pattern != "" {
			m.ServeHTTP(w, r)
			return
		}
		var allow []string
		for _, method := range probeMethods {
			probe := &http.Request{Method: method, URL: r.URL, Host: r.Host, Header: http.Header{}}
			if _, p := m.Handler(probe); p != "" && method != r.Method {
				allow = append(allow, method)
			}
		}
		path := r.URL.Path
		if len(path) > 200 {
			path = path[:200] + "…"
		}
		status, typ, detail := http.StatusNotFound, "not-found", fmt.Sprintf("no route %q here", path)
		if len(allow) > 0 {
			status, typ = http.StatusMethodNotAllowed, "method-not-allowed"
			detail = fmt.Sprintf("%s %q: this route takes %s", r.Method, path, strings.Join(allow, ", "))
			w.Header().Set("Allow", strings.Join(allow, ", "))
		} else if r.URL.Path == "/ofrep/v1/evaluate/flags/" {
			detail = "no flag key: POST /ofrep/v1/evaluate/flags/{key} evaluates one flag, POST /ofrep/v1/evaluate/flags all of them"
		}
		if strings.HasPrefix(r.URL.Path, "/ofrep/") {
			w.Header().Set("Cache-Control", "no-store")
			writeJSON(w, status, ofrepFailure{ErrorCode: "GENERAL", ErrorDetails: detail})
			return
		}
		problem(w, status, typ, detail)
	})
}

// readRefusal says why r, a read, cannot be answered (its problem type
// and detail), or "" when it can: on a loopback listener, a read without
// a token must pass readRefusal (origin.go says why); with one, or on
// another listener, the route's own token check decides.
func (a *API) readRefusal(r *http.Request) (typ, detail string) {
	if !a.cfg.Loopback || a.tokened(r) {
		return "", ""
	}
	return readRefusal(r)
}

// ofrepRefusal is readRefusal for OFREP's routes: there a page of an
// origin of Config.CORSOrigins is no other site's page (the operator
// allowed it), but on a loopback listener its request must still name
// the listener in its Host (hostRefusal).
func (a *API) ofrepRefusal(r *http.Request) (typ, detail string) {
	if a.cfg.Loopback && !a.tokened(r) && a.corsGranted(r) {
		if d := hostRefusal(r); d != "" {
			return "cross-site", d
		}
		return "", ""
	}
	return a.readRefusal(r)
}

// tokened reports whether r carries a token of this API for a read: an
// evaluation or operator token in a header, or a stream token for one in
// the URL (?token=, the dial's EventSource) while evaluation tokens are on.
func (a *API) tokened(r *http.Request) bool {
	toks := a.tokens.Load()
	if _, ok := token(r, toks.eval); ok {
		return true
	}
	if _, ok := token(r, toks.operator); ok {
		return true
	}
	if t := r.URL.Query().Get("token"); t != "" && len(toks.eval) > 0 {
		exp, fp, ok := a.checkStreamToken(t)
		return ok && a.admits(streamCred{exp: exp, fp: fp}, toks, a.now())
	}
	return false
}

// Local guards h, a read of this API's server outside its routes (the
// metrics, the dial's files), as the API guards its own reads: on a
// loopback listener, a request without a token that comes with another
// Host than this listener's, or from a page of another site, is refused
// with 403 problem+json (see LocalOnly). On another listener it does
// nothing.
func (a *API) Local(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if typ, detail := a.readRefusal(r); typ != "" {
			refuse(w, r, http.StatusForbidden, typ, detail)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// localOFREP is Local for OFREP's evaluations (ofrepRefusal: a page of
// an allowed origin may read them), refused in OFREP's error shape.
func (a *API) localOFREP(h func(w http.ResponseWriter, r *http.Request) int) func(w http.ResponseWriter, r *http.Request) int {
	return func(w http.ResponseWriter, r *http.Request) int {
		if _, detail := a.ofrepRefusal(r); detail != "" {
			server.Abandon(w, r)
			writeJSON(w, http.StatusForbidden, ofrepFailure{Key: r.PathValue("key"), ErrorCode: "GENERAL", ErrorDetails: detail})
			return http.StatusForbidden
		}
		return h(w, r)
	}
}

// localOFREPStream is Local for OFREP's event stream (ofrepRefusal),
// refused in OFREP's error shape.
func (a *API) localOFREPStream(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, detail := a.ofrepRefusal(r); detail != "" {
			ofrepFail(w, http.StatusForbidden, detail)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// token finds the name of the token r carries among toks: Authorization:
// Bearer, or X-API-Key. Constant-time over every configured token.
func token(r *http.Request, toks map[string]string) (string, bool) {
	got := presented(r)
	who, found := "", false
	for name, tok := range toks {
		if subtle.ConstantTimeCompare([]byte(got), []byte(tok)) == 1 {
			who, found = name, true
		}
	}
	return who, found && got != ""
}

// write wraps an operator write: a named token; or, when none is
// configured and the listener is on loopback, no token from a request
// that localRefusal lets pass (origin.go says why). A refusal changes
// nothing and audits nothing.
func (a *API) write(h func(w http.ResponseWriter, r *http.Request, who string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who := "local"
		switch toks := a.tokens.Load().operator; {
		case len(toks) > 0:
			name, ok := token(r, toks)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="brownout operator"`)
				refuse(w, r, http.StatusUnauthorized, "unauthorized", "writes need an operator token (Authorization: Bearer …)")
				return
			}
			who = name
		case !a.cfg.Loopback:
			refuse(w, r, http.StatusForbidden, "no-operator-token", "no operator token is configured and the server does not listen on loopback only: writes are off")
			return
		default:
			if typ, detail := localRefusal(r); typ != "" {
				refuse(w, r, http.StatusForbidden, typ, detail)
				return
			}
		}
		h(w, r, who)
	}
}

// pushAuth guards POST /v1/signals as write guards the operators' writes:
// a push token when any is configured, else a loopback listener and a
// request localRefusal lets pass; every push declares its JSON body. The
// body gets bodyTimeout, wherever the API is mounted.
func (a *API) pushAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		server.SetBodyDeadline(w, r, bodyTimeout)
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r) // the source says which method it takes
			return
		}
		switch toks := a.tokens.Load().push; {
		case len(toks) > 0:
			if _, ok := token(r, toks); !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="brownout push"`)
				refuse(w, r, http.StatusUnauthorized, "unauthorized", "pushes need a push token (Authorization: Bearer …)")
				return
			}
			if !local.IsJSON(r) {
				refuse(w, r, http.StatusUnsupportedMediaType, "json-required", "Content-Type "+local.Quote(r.Header.Get("Content-Type"))+": a push is Content-Type: application/json")
				return
			}
		case !a.cfg.Loopback:
			refuse(w, r, http.StatusForbidden, "no-push-token", "no push token is configured and the server does not listen on loopback only: pushes are off")
			return
		default:
			if typ, detail := localRefusal(r); typ != "" {
				refuse(w, r, http.StatusForbidden, typ, detail)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers a request refused before its body was read; the
// connection closes after the answer (server.Abandon).
func refuse(w http.ResponseWriter, r *http.Request, status int, typ, detail string) {
	server.Abandon(w, r)
	problem(w, status, typ, detail)
}

// problem writes an application/problem+json answer (RFC 9457) of type
// urn:brownout:api:<typ>.
func problem(w http.ResponseWriter, status int, typ, detail string) {
	httpproblem.Write(w, httpproblem.Problem{Type: httpproblem.Type("api", typ), Status: status, Detail: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // an API, not a page: reasons stay readable (pages render them as text)
	if err := enc.Encode(v); err != nil {
		// A value JSON cannot say (a NaN that got through): a 500 that
		// says so, never a 200 with an empty body.
		problem(w, http.StatusInternalServerError, "encoding", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// decode reads one JSON value of at most maxBody bytes into v; strict
// refuses unknown fields (operator bodies: a typo must not pass
// silently).
func decode(w http.ResponseWriter, r *http.Request, v any, strict bool) (int, error) {
	return decodeBody(w, r, v, strict, false)
}

// decodeBody is decode; optional accepts an empty body (also a chunked
// one). A client has bodyTimeout to send it.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, strict, optional bool) (int, error) {
	return jsonbody.Decode(w, r, v, jsonbody.Options{Max: maxBody, Strict: strict, Optional: optional, Timeout: bodyTimeout})
}
