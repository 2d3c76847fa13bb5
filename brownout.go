// Package brownout protects an HTTP service from overload by dimming it:
// when it is overloaded, a share of the users stops getting the optional
// features (recommendations, reviews, …) so that every user keeps getting
// the page, and only when dimming is not enough is work refused, lowest
// priority first.
//
// New returns the whole stack with the recommended defaults: a signals
// recorder, the brownout controller (a p99 latency objective and at most
// 1 % refused), its OpenFeature provider, the admission gate as
// middleware, and the operator API with OFREP and the web dial:
//
//	b, err := brownout.New(brownout.Options{
//		Features: []brownout.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
//	})
//	if err != nil { … }
//	defer b.Close()
//	go b.Run(ctx)
//	if err := b.RegisterProvider(); err != nil { … } // openfeature's default provider
//	http.ListenAndServe(addr, b.Middleware(app))      // echo: e.Use(echo.WrapMiddleware(b.Middleware))
//
// The app asks openfeature for each optional feature per user (the
// targeting key), and renders it only when the flag is true.
//
// With Options.Daemon set it follows a brownoutd instead (fleet mode):
// the levels come from the daemon's stream, and the recorder's signals are
// pushed to it. Options.Daemons lists the replicas of a brownoutd in HA:
// the levels come from one replica at a time, and the signals go to each.
// Options.Service names the app's service on a daemon of several.
//
// The packages underneath (signals, signals/fleet, dimmer, provider, shed,
// api) stay public for whoever needs another arrangement.
package brownout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/replica"
	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
	"github.com/brownout/brownout/web"
)

// Feature is an optional feature the controller dims (dimmer.Feature).
type Feature = dimmer.Feature

// Route classifies and costs the requests of one path pattern (shed.Route).
type Route = shed.Route

// CostEstimate is what the controller learned of a feature's cost
// (dimmer.CostEstimate).
type CostEstimate = dimmer.CostEstimate

// Defaults of Options.
const (
	// DefaultTarget is the p99 latency objective: a page that answers
	// within 300 ms feels immediate, and it leaves room under the
	// client timeouts of a few seconds that retries start from.
	DefaultTarget = 300 * time.Millisecond
	// DefaultMaxRejectRatio is the share of requests the gate may refuse
	// for overload before the controller dims: 1 %, so that a few
	// refusals of a burst do not dim, and a sustained overload — which
	// the gate holds within its wait bound, and shows as refusals — does.
	DefaultMaxRejectRatio = 0.01
	// latencySlices is the recorder's latency window in slices of a
	// second each: 5 s, so that p99 moves within a few ticks of a change.
	latencySlices = 5
)

// LawModel names the control law — the only one — for the deprecated
// Options.Law: dimmer's model law, which measures the offered load and
// what a request and each feature cost, and sets the levels the load
// allows (docs/model.md).
const LawModel = api.LawModel

// LawSearch named the search law, which was removed.
//
// Deprecated: New returns an error for it; leave Options.Law empty.
const LawSearch = "search"

// Options configures New. Features is required in embedded mode (the
// controller dims them); the rest takes the defaults.
type Options struct {
	// Features are the optional features, dimmed lowest Rank first (see
	// dimmer.Feature). Each name is a flag key, as brownoutd's
	// configuration requires (provider.CheckFeatureName): no "recs.level"
	// (the level flag of recs), no '/'. Each request tallies which of them it rendered, so
	// that the controller learns what each costs; in fleet mode list them
	// too, for the tallies the app pushes to the daemon, and so that
	// before the daemon was ever heard (a cold start with it down, no
	// StateDir's levels) their flags answer on — their default, failing
	// open as the daemon does for a feature without a default — marked
	// stale, the reason saying so (provider.RemoteOptions.Features). Only
	// their names are used there: the daemon's features, with their
	// defaults, replace them once it is heard.
	Features []Feature
	// Target is the p99 latency objective. Default DefaultTarget.
	Target time.Duration
	// MaxRejectRatio is the share of requests refused for overload past
	// which the controller dims. Default DefaultMaxRejectRatio; negative:
	// latency alone.
	MaxRejectRatio float64
	// Probe is the share of the users the controller withholds a
	// feature from while it is all on (and gives one that is all off
	// to), so that its cost stays measured: dimmer.Config.Probe. Default
	// (0) dimmer.DefaultProbe, 5 %; at most dimmer.MaxProbe; negative:
	// no probe. Embedded mode only: in fleet mode it is the daemon's
	// (law.probe in brownoutd's configuration).
	Probe float64
	// Law named the controller's control law when there were two.
	//
	// Deprecated: the model law is the only law; the search law was
	// removed. Leave Law empty: "" and LawModel are accepted (and change
	// nothing, in fleet mode too), any other value — "search" included —
	// is an error.
	Law string
	// Routes classify requests (critical, default, sheddable) and give
	// their cost relative to an average request; requests no route
	// matches are default and cost 1.
	Routes []Route
	// TrustPriority believes the callers' X-Priority header: only where
	// they are your own services.
	TrustPriority bool
	// TrustedProxies are the load balancers in front, whose
	// X-Forwarded-For names the client for rate limits (see
	// shed.Config.TrustedProxies); none by default.
	TrustedProxies []netip.Prefix
	// Gate and RateLimit configure the admission gate (see package shed);
	// the zero values are its defaults, no rate limit.
	Gate      shed.GateConfig
	RateLimit *shed.RateLimitConfig
	// Domain registers the provider under an OpenFeature domain in
	// RegisterProvider; "" is the default provider (or, with Service, the
	// domain of the service's name).
	Domain string
	// Registerer, when set, receives the metrics of every part (signals,
	// flag evaluations, the operator API). With Service or Domain set
	// they carry the label service="{Service, else Domain}" — the label
	// brownoutd's services' metrics carry — so that the Brownouts of an
	// app of several services (or domains) share one registerer; without
	// either, no label is added. (A daemon that scrapes this process's
	// /metrics sums every series of a name: with several Brownouts on one
	// registerer, let each push — the default — or give the daemon's
	// PromQL source a selector on service.)
	Registerer prometheus.Registerer
	// OperatorTokens are the named bearer tokens the operator API takes
	// for writes (overrides, freeze, shadow). Without any, writes are
	// refused — unless Loopback.
	OperatorTokens map[string]string
	// Loopback says that Handler is served on a loopback-only listener,
	// so that writes without a token are taken from the same machine
	// (still never on another site's behalf). The handler cannot know
	// its listener: false unless you are sure.
	Loopback bool
	// CORSOrigins are the origins (scheme://host[:port], see
	// api.ParseOrigin) whose pages may evaluate flags from a browser
	// through Handler — OpenFeature's web SDK with its OFREP provider:
	// OFREP's evaluations and event stream answer them CORS, nothing else
	// does (never the operators' writes). None by default. Embedded mode
	// only: in fleet mode the daemon serves OFREP (brownoutd
	// --cors-origin).
	CORSOrigins []string
	// StateDir, when set, keeps the operators' overrides, freeze and
	// shadow across restarts; in fleet mode, the daemon's last levels
	// (brownoutd-state.json), so that a restart during an outage of the
	// daemon starts from them.
	StateDir string
	// Daemon, when set, is a brownoutd's URL: fleet mode. The levels come
	// from the daemon and the recorder's signals are pushed to it; the
	// operator API is the daemon's (Handler serves the dial's page only to
	// say so).
	Daemon string
	// Daemons, instead of Daemon, are the base URLs of one brownoutd's
	// replicas (HA): fleet mode, the levels followed from one replica at
	// a time — started at one at random, moved to another when it fails
	// or lags — and the signals pushed to every one (see
	// provider.RemoteOptions.URLs and fleet.PusherConfig.URLs). At most
	// 16, no replica twice. Set Daemon or Daemons.
	Daemons []string
	// DaemonToken is sent to the daemon with every evaluation stream and
	// push (its eval and push token).
	DaemonToken string
	// Service, in fleet mode, names this app's service on a daemon of
	// several (brownoutd's services:): the stream the levels come from
	// and the pushes say it (provider.RemoteOptions.Service,
	// fleet.PusherConfig.Service), so that the daemon hands them to that
	// service's controller, tokens and caps. RegisterProvider then
	// registers the provider under the OpenFeature domain of this name
	// unless Domain names another: an app of several services makes a
	// Brownout for each, and asks each one's flags of
	// openfeature.NewClient(service). Lower-case letters, digits, '-', '_'
	// and '.'; none for a daemon of one service, which refuses a name.
	Service string
	// Instance names this process in its pushes. Default: the host name
	// and the process id.
	Instance string
	// NoPush: in fleet mode, do not push the signals — the daemon reads
	// this process's /metrics (scrape or PromQL) instead.
	NoPush bool
	// Logger receives the controller's and the API's log lines. Default:
	// slog.Default().
	Logger *slog.Logger
}

// Brownout is the protection stack of one service.
type Brownout struct {
	opts    Options
	daemons []string // fleet mode: the daemon's URLs, checked
	rec     *signals.Recorder
	ctl     *dimmer.Controller // nil in fleet mode
	remote  *provider.Remote   // nil in embedded mode
	pusher  *fleet.Pusher      // nil in embedded mode
	prov    *provider.Provider
	shedder *shed.Shedder
	api     *api.API // nil in fleet mode
	handler http.Handler

	mu      sync.Mutex
	running bool // Run runs
	ran     bool // Run returned
	closed  bool
}

// New builds the stack of o. Nothing runs until Run.
func New(o Options) (*Brownout, error) {
	if o.Target == 0 {
		o.Target = DefaultTarget
	}
	if o.Target < 0 {
		return nil, fmt.Errorf("brownout: Target %v: want a positive latency", o.Target)
	}
	if o.MaxRejectRatio == 0 {
		o.MaxRejectRatio = DefaultMaxRejectRatio
	}
	if o.MaxRejectRatio >= 1 || math.IsNaN(o.MaxRejectRatio) {
		return nil, fmt.Errorf("brownout: MaxRejectRatio %v: want a share under 1 (negative: latency alone)", o.MaxRejectRatio)
	}
	if o.Law != "" && o.Law != LawModel {
		if strings.EqualFold(o.Law, LawModel) {
			return nil, fmt.Errorf("brownout: Law %q: did you mean %q? The model law is the only law: leave Law empty (it is deprecated)", o.Law, LawModel)
		}
		return nil, fmt.Errorf("brownout: Law %q: the search law was removed and the model law is the only law: leave Law empty (it is deprecated)", o.Law)
	}
	if o.Daemon != "" && len(o.Daemons) > 0 {
		return nil, errors.New("brownout: Daemon and Daemons both set: set Daemons alone for several replicas")
	}
	daemons, field := o.Daemons, "Daemons"
	if o.Daemon != "" {
		daemons, field = []string{o.Daemon}, "Daemon"
	}
	if len(daemons) > 0 { // fleet mode
		var err error
		if daemons, err = replica.Check(daemons, true); err != nil {
			return nil, fmt.Errorf("brownout: %s: %w", field, err)
		}
	} else {
		daemons = nil
	}
	if daemons != nil && o.Probe != 0 {
		return nil, errors.New("brownout: Probe in fleet mode: the daemon's law sets the levels; set its law.probe")
	}
	if daemons != nil && len(o.CORSOrigins) > 0 {
		return nil, errors.New("brownout: CORSOrigins in fleet mode: the daemon serves OFREP; allow the origins there (brownoutd --cors-origin)")
	}
	if o.Service != "" {
		if daemons == nil {
			return nil, errors.New("brownout: Service is a daemon's service: set Daemon or Daemons (fleet mode), or leave Service out")
		}
		if err := service.Check(o.Service); err != nil {
			return nil, fmt.Errorf("brownout: %w", err)
		}
		if o.Domain == "" {
			o.Domain = o.Service
		}
	}
	reg := o.Registerer
	if label := cmp.Or(o.Service, o.Domain); reg != nil && label != "" {
		// Each Brownout's series apart, under the daemon's label.
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"service": label}, reg)
	}
	if daemons == nil && len(o.Features) == 0 {
		return nil, errors.New("brownout: no Features: list the optional features the controller dims (or set Daemon for fleet mode)")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	b := &Brownout{opts: o, daemons: daemons}
	b.rec = signals.NewRecorder(signals.Config{Latency: signals.WindowConfig{Slices: latencySlices}})
	names := make([]string, len(o.Features))
	for i, f := range o.Features {
		// The daemon's rule (check-config): a name is one flag key.
		if err := provider.CheckFeatureName(f.Name); err != nil {
			return nil, fmt.Errorf("brownout: Features[%d].Name: %w", i, err)
		}
		names[i] = f.Name
	}
	if len(names) > 0 {
		// Each request's feature tally: what the controller learns each
		// feature's cost from (dimmer.Controller.Costs).
		if err := b.rec.Features(names...); err != nil {
			return nil, fmt.Errorf("brownout: %w", err)
		}
	}
	var (
		src       provider.Source
		shedLevel func() float64
		shedSeed  func() (dimmer.ShedSeed, bool)
		err       error
	)
	if daemons != nil {
		if o.Instance == "" {
			host, _ := os.Hostname()
			o.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
		}
		// The features listed are the flags answered, on, until the
		// daemon is heard: a cold start with it down answers at once with
		// the defaults.
		ro := provider.RemoteOptions{URLs: daemons, Token: o.DaemonToken, Service: o.Service, Features: names, Logger: o.Logger}
		if o.StateDir != "" {
			ro.StateFile = filepath.Join(o.StateDir, "brownoutd-state.json")
		}
		b.remote, err = provider.NewRemote(ro)
		if err != nil {
			return nil, fmt.Errorf("brownout: %w", err)
		}
		if !o.NoPush {
			push := make([]string, len(daemons))
			for i, d := range daemons {
				push[i] = d + "/v1/signals"
			}
			b.pusher, err = fleet.NewPusher(b.rec, fleet.PusherConfig{URLs: push, Instance: o.Instance, Service: o.Service, Token: o.DaemonToken, Logger: o.Logger})
			if err != nil {
				return nil, fmt.Errorf("brownout: %w", err)
			}
		}
		src, shedSeed = b.remote, b.remote.ShedSeed
		shedLevel = func() float64 { return b.remote.State().Shed }
	} else {
		targets := []dimmer.Target{{Signal: signals.LatencyP99, Target: o.Target.Seconds()}}
		if o.MaxRejectRatio > 0 {
			targets = append(targets, dimmer.Target{Signal: signals.RejectRatio, Target: o.MaxRejectRatio, DimOnly: true})
		}
		b.ctl, err = dimmer.New(dimmer.Config{Targets: targets, Features: o.Features, Probe: o.Probe, Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("brownout: %w", err)
		}
		src, shedLevel = b.ctl, b.ctl.ShedLevel
	}
	b.prov, err = provider.New(src, provider.Options{Registerer: reg, Recorder: b.rec})
	if err != nil {
		return nil, fmt.Errorf("brownout: %w", err)
	}
	scfg := shed.Config{Gate: o.Gate, RateLimit: o.RateLimit, TrustPriority: o.TrustPriority, TrustedProxies: o.TrustedProxies,
		Recorder: b.rec, ShedLevel: shedLevel, ShedSeed: shedSeed}
	// The gate counts the work in flight, not the requests: each is
	// charged what the model law expects it to take at the levels
	// published, as a share of a request with every feature on
	// (dimmer.Controller.RequestCost, or the daemon's), so that features
	// coming back are not read as a queue. A
	// route that declares its cost keeps it: that is the app's own unit.
	var charge func(*http.Request) float64
	switch {
	case b.ctl != nil:
		ctl := b.ctl
		charge = func(*http.Request) float64 { return ctl.RequestCost() }
	case b.remote != nil:
		// (The daemon's: its state's request_cost.)
		remote := b.remote
		charge = func(*http.Request) float64 { return remote.RequestCost() }
	}
	scfg.Cost = charge
	if len(o.Routes) > 0 {
		rt, err := shed.NewRoutes(o.Routes...)
		if err != nil {
			return nil, fmt.Errorf("brownout: %w", err)
		}
		scfg.Classify, scfg.Cost = rt.Classify, rt.DeclaredCost
		if charge != nil {
			scfg.Cost = func(r *http.Request) float64 {
				if c, ok := rt.Declared(r); ok {
					return c
				}
				return charge(r)
			}
		}
	}
	if b.shedder, err = shed.New(scfg); err != nil {
		return nil, fmt.Errorf("brownout: %w", err)
	}
	if reg != nil {
		if err := reg.Register(signals.NewCollector(b.rec, signals.CollectorOpts{})); err != nil {
			return nil, fmt.Errorf("brownout: metrics: %w", err)
		}
	}
	if b.ctl == nil {
		b.handler = b.fleetHandler()
		return b, nil
	}
	b.api, err = api.New(api.Config{Controller: b.ctl, Provider: b.prov, OperatorTokens: o.OperatorTokens,
		Loopback: o.Loopback, StateDir: o.StateDir, CORSOrigins: o.CORSOrigins, Registerer: reg, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("brownout: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ofrep/", b.api.Handler())
	mux.Handle("/v1/", b.api.Handler())
	mux.Handle("/", b.api.Local(web.Handler()))
	b.handler = mux
	return b, nil
}

// Middleware wraps h in the admission gate and the signals recorder: the
// one line in front of a handler. With echo:
// e.Use(echo.WrapMiddleware(b.Middleware)).
func (b *Brownout) Middleware(h http.Handler) http.Handler { return b.shedder.Middleware(h) }

// Provider returns the OpenFeature provider of the levels.
func (b *Brownout) Provider() *provider.Provider { return b.prov }

// RegisterProvider registers the provider with openfeature, under
// Options.Domain or as the default provider, and waits for it to be
// ready.
func (b *Brownout) RegisterProvider() error {
	if b.opts.Domain != "" {
		return openfeature.SetNamedProviderAndWait(b.opts.Domain, b.prov)
	}
	return openfeature.SetProviderAndWait(b.prov)
}

// Client returns an openfeature client of Options.Domain (the default
// provider's when empty); call RegisterProvider first.
func (b *Brownout) Client() *openfeature.Client { return openfeature.NewClient(b.opts.Domain) }

// Handler serves the operator surface: OFREP (/ofrep/v1/…), the state,
// history, events and operators' writes (/v1/…), and the web dial (/).
// Mount it on an internal listener; writes need a token of
// Options.OperatorTokens unless Options.Loopback. In fleet mode those are
// the daemon's: Handler serves GET /v1/state alone, a FleetState — the
// levels this app follows and how its links to the daemon fare — and
// answers everything else with a 404 that names the daemon.
func (b *Brownout) Handler() http.Handler { return b.handler }

// Controller returns the embedded controller; nil in fleet mode.
func (b *Brownout) Controller() *dimmer.Controller { return b.ctl }

// Shedder returns the admission gate.
func (b *Brownout) Shedder() *shed.Shedder { return b.shedder }

// Recorder returns the signals recorder the middleware feeds.
func (b *Brownout) Recorder() *signals.Recorder { return b.rec }

// API returns the operator API; nil in fleet mode.
func (b *Brownout) API() *api.API { return b.api }

// Remote returns the follower of the daemon; nil in embedded mode.
func (b *Brownout) Remote() *provider.Remote { return b.remote }

// Source returns where the levels come from: the controller, or the
// daemon's follower.
func (b *Brownout) Source() provider.Source {
	if b.remote != nil {
		return b.remote
	}
	return b.ctl
}

// Run's refusals. A Brownout runs once: Run returns ErrRunning while it
// runs, ErrRan once it returned (its context ended: make another
// Brownout with New to run again), ErrClosed after Close.
var (
	ErrRunning = errors.New("brownout: Run: already running")
	ErrRan     = errors.New("brownout: Run: it ran and returned when its context ended, and a Brownout runs once: make another with New")
	ErrClosed  = errors.New("brownout: Run: closed")
)

// Run runs the control loop — the controller's ticks in embedded mode;
// following the daemon and pushing to it in fleet mode — until ctx is
// done, and returns nil then. It runs once (see ErrRan).
func (b *Brownout) Run(ctx context.Context) error {
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return ErrClosed
	case b.running:
		b.mu.Unlock()
		return ErrRunning
	case b.ran:
		b.mu.Unlock()
		return ErrRan
	}
	b.running = true
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.running, b.ran = false, true
		b.mu.Unlock()
	}()
	var err error
	if b.api != nil {
		err = b.api.Run(ctx, dimmer.Local(b.rec))
	} else {
		var wg sync.WaitGroup
		if b.pusher != nil {
			wg.Go(func() { _ = b.pusher.Run(ctx) })
		}
		err = b.remote.Run(ctx)
		wg.Wait()
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Close ends the operator API's streams and releases its state
// directory. Stop Run (its context) first.
func (b *Brownout) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.api != nil {
		b.api.Shutdown() // end the streams, so that servers can shut down
		b.api.Close()
	}
	return nil
}
