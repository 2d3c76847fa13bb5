package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/cluster"
	"github.com/brownout/brownout/internal/server"
	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
	"github.com/brownout/brownout/web"
)

// A daemon of several services (services: in the file) runs one unit per
// service: its own controller, signal source, API (OFREP, the operator
// API, the push endpoint), tokens, caps, state directory and control
// loop. Nothing of one service waits for another's: each loop is its own
// goroutine, each source its own lock, and the router (router.go) hands
// a request to its service before reading its body. The loops start
// spread over a tick (service i of n at i/n of it), so that their ticks
// do not all fall due at once and queue behind each other for the CPUs.
// A file without services: runs its one service as before (runServe),
// at the root.

// unit is one service of a daemon of several. newUnit sets its fields,
// fixed from then on but for its loop's (start, stop); its parts are
// safe for concurrent use, and run is its one goroutine.
type unit struct {
	name    string
	cfg     *serviceConfig
	ctl     *dimmer.Controller
	src     source
	api     *api.API
	rep     *cluster.Replica     // with a store: the service's replica; else nil
	handler http.Handler         // the service's routes under /services/{name}/
	reg     *prometheus.Registry // its metrics, labelled service={name}: /metrics gathers it while it is served

	// gate is held read-locked by every request the router hands the
	// unit; retire write-locks it, so that requests already in it end
	// before its state is saved and its lock released, and a request
	// that arrives meanwhile (it read the router's units before the
	// reload) is refused as one of a service not served.
	gate sync.RWMutex
	stop context.CancelFunc // ends the loop that start started
	done chan struct{}      // closed when that loop returned
}

// newUnit builds s's unit over its source (buildSource; push, when it is
// a push source): its metrics go to a registry of its own, labelled with
// its name, its log lines say it. With a store (c.Store) the service runs
// as a replica of its own, its rows keyed by its name, its lease its own:
// each service has its leader, all of them on conn, the daemon's
// connection to the store. Close it with close.
func newUnit(ctx context.Context, c *config, s *serviceConfig, src source, push *fleet.PushSource, conn *cluster.Conn, streams *api.StreamCap, log *slog.Logger) (*unit, error) {
	log = log.With("service", s.Name)
	own := prometheus.NewRegistry()
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"service": s.Name}, own)
	s.Dimmer.Logger = log
	ctl, err := dimmer.New(s.Dimmer)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", s.Name, err)
	}
	prov, err := provider.New(ctl, provider.Options{Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", s.Name, err)
	}
	base := service.Base(s.Name)
	acfg := api.Config{Controller: ctl, Provider: prov, Service: s.Name,
		OperatorTokens: s.OperatorTokens, EvalTokens: s.EvalTokens, PushTokens: s.PushTokens,
		Loopback: loopback(c.Listen), StateDir: c.stateDir(s), Registerer: reg, Logger: log,
		Defaults: s.Defaults, CORSOrigins: c.CORSOrigins,
		OwnStreamConns: true, // serveServices ends the streams with each API's Shutdown
		StreamCap:      streams,
		Sources:        func() []signals.SourceHealth { return []signals.SourceHealth{src.Health()} },
		// OFREP clients given the service's base URL follow its stream.
		EventStreams: []api.EventStream{{Type: "sse", Endpoint: &api.Endpoint{RequestURI: base + "/ofrep/v1/events"}, InactivityDelaySec: 120}}}
	if push != nil {
		acfg.Push = push
	}
	rep, err := openReplica(ctx, c, s, conn, ctl, &acfg, log, reg)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", s.Name, err)
	}
	a, err := api.New(acfg)
	if err != nil {
		if rep != nil {
			rep.Close()
		}
		return nil, fmt.Errorf("service %s: %w", s.Name, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ofrep/", a.Handler())
	mux.Handle("/v1/", a.Handler())
	mux.Handle("/", a.Local(web.Handler()))
	return &unit{name: s.Name, cfg: s, ctl: ctl, src: src, api: a, rep: rep, handler: http.StripPrefix(base, mux), reg: own}, nil
}

// close releases the unit's state dir, then its store (after the last
// Save).
func (u *unit) close() {
	u.api.Close()
	if u.rep != nil {
		u.rep.Close()
	}
}

// serve hands a request to the unit through h, one of its handlers, and
// reports true; false, without a byte written, when the unit is being
// retired (the router then answers as for a service it does not serve).
func (u *unit) serve(h http.Handler, w http.ResponseWriter, r *http.Request) bool {
	if !u.gate.TryRLock() {
		return false
	}
	defer u.gate.RUnlock()
	h.ServeHTTP(w, r)
	return true
}

// run is the unit's control loop, its ticks from delay on (its phase in
// the tick), until ctx ends. A replica's runs from now, so that a reload
// reconfigures its law without waiting for its first tick.
func (u *unit) run(ctx context.Context, delay time.Duration) {
	if u.rep != nil {
		u.rep.RunAfter(ctx, u.api, u.src, delay) // at its end, a leader gives its lease up
		return
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	u.api.Run(ctx, u.src)
}

// host runs the units of a daemon of several services: those it started
// with, and those a reload adds (reloadServices), each until the daemon
// stops or a reload removes it. Its methods are called from serve's
// goroutine and its reloads' (reloadServices) one at a time, never at
// once; servicesAccess reads its routed units and sets access.
type host struct {
	c    *config       // the configuration the daemon started with: its settings fixed for its life
	conn *cluster.Conn // with a store, the daemon's connection to it; else nil
	// streams caps the streams of every service together: they hold the
	// daemon's connections, which the services share.
	streams *api.StreamCap
	rt      *router
	log     *slog.Logger
	ctx     context.Context // the loops' parent: the daemon's life
	t0      time.Time       // the loops' phases' origin
	loops   sync.WaitGroup
	// access is the latest file whose tokens and CORS origins were
	// applied (servicesAccess), under accessMu.
	accessMu sync.Mutex
	access   *config
}

// build makes s's unit: its source, its controller, API and state (its
// state dir locked, or its replica on the store, the store's state read).
func (h *host) build(s *serviceConfig) (*unit, error) {
	src, push, err := buildSource(s)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", s.Name, err)
	}
	u, err := newUnit(h.ctx, h.c, s, src, push, h.conn, h.streams, h.log)
	if err == nil && u.rep != nil {
		// The store's state, before the unit is routed: its loop starts
		// up to a tick later (its phase), and until its replica has read
		// the store it serves its own fresh state. A failure is logged;
		// the replica follows the store when it answers, the daemon not
		// ready till then.
		u.rep.Load(h.ctx, u.api)
	}
	return u, err
}

// start runs u's loop, the i-th service of n, from now: at i/n of its
// tick after the daemon's start (h.t0; the loops spread over the tick, so
// that their ticks do not fall due at once), the first such moment from
// now.
func (h *host) start(u *unit, i, n int, now time.Time) {
	tick := u.ctl.Config().Tick
	phase := time.Duration(i) * tick / time.Duration(max(n, 1))
	delay := (phase - now.Sub(h.t0)%tick + tick) % tick
	ctx, stop := context.WithCancel(h.ctx)
	u.stop, u.done = stop, make(chan struct{})
	h.loops.Go(func() {
		defer close(u.done)
		u.run(ctx, delay)
	})
}

// retireDrain bounds how long retire waits for the requests in a unit
// to end: a request's body comes within server.BodyTimeout, and the
// unit's streams end as retire begins.
const retireDrain = 15 * time.Second

// retire stops serving u, which the router no longer routes to: its
// streams end with a last event that says why (its clients reconnect,
// and get the 404 of a service not served), the requests in it end,
// its loop stops (a replica's gives its lease up), its operators'
// state is saved and its lock released — its state dir or its rows in
// the store stay, for the service to continue if it comes back.
func (h *host) retire(u *unit, why string) {
	u.api.ShutdownFor(why)
	drained := make(chan struct{})
	go func() {
		u.gate.Lock() // never unlocked: the unit is done
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(retireDrain):
		h.log.Warn("brownoutd: a retired service's requests did not end; stopping it under them", "service", u.name, "waited", retireDrain)
	}
	if u.stop != nil {
		u.stop()
		<-u.done
	}
	u.api.Save()
	u.close()
}

// serveServices is runServe for a file with services:.
func serveServices(ctx context.Context, c *config, file string, f *serveFlags, set map[string]bool, log *slog.Logger, stdout io.Writer) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &host{c: c, log: log, ctx: ctx}
	// With a store, one connection to it for every service: a pool sized
	// for them and one listener (cluster.Connect), closed after the last
	// unit's Save.
	if c.Store != "" {
		var err error
		if h.conn, err = cluster.Connect(ctx, c.Store, len(c.Services), storeConnectTimeout); err != nil {
			return err
		}
		defer h.conn.Close()
		h.conn.SetLogger(log)
		warnPool(log, h.conn.MaxConns())
	}
	var units []*unit
	// One cap of streams for the daemon, whichever service they follow:
	// they hold its connections, which the services share.
	h.streams = api.NewStreamCap(c.maxStreams())
	for _, s := range c.Services {
		u, err := h.build(s)
		if err != nil {
			for _, u := range units {
				u.close()
			}
			return err
		}
		units = append(units, u)
	}
	h.rt = newRouter(units, loopback(c.Listen))
	defer func() {
		for _, u := range h.rt.units().order {
			u.close() // the state dirs' locks, the replicas, after the last Save
		}
	}()
	if err := checkNoFile(c); err != nil {
		return err
	}
	ln, err := server.ListenWith(c.Listen, c.Conns)
	if err != nil {
		return err
	}
	if err := reg.Register(ln.Collector()); err != nil {
		ln.Close()
		return err
	}
	e := newServicesEcho(h.rt, reg)
	if c.Store != "" {
		e.loaded = func() bool {
			for _, u := range h.rt.units().order {
				if u.rep != nil && !u.rep.Loaded() {
					return false
				}
			}
			return true
		}
	}
	srv := server.New(e)
	scheme := "http"
	if c.TLS.Cert != "" {
		scheme = "https"
	}
	where := c.StateDir
	if c.Store != "" {
		where = "store " + cluster.Redact(c.Store) + ", a replica of each service"
	}
	fmt.Fprintf(stdout, "brownoutd: serving on %s://%s (config %s; services %s; state %s)\n", scheme, ln.Addr(), fileName(file), h.rt.units().list(), where)
	for _, u := range units {
		fmt.Fprintf(stdout, "brownoutd: service %s at %s://%s%s/ (features %s; state %s)\n", u.name, scheme, ln.Addr(), service.Base(u.name), featureNames(u.cfg.Dimmer), unitState(c, u))
	}
	fmt.Fprintf(stdout, "brownoutd: the dial at %s://%s/ lists the services\n", scheme, ln.Addr())
	if len(c.CORSOrigins) > 0 {
		fmt.Fprintf(stdout, "brownoutd: pages of %s may evaluate flags from a browser (OFREP only)\n", strings.Join(c.CORSOrigins, ", "))
	}
	for _, u := range units {
		if len(u.cfg.OperatorTokens) == 0 && !loopback(c.Listen) {
			log.Warn("brownoutd: no operator token and not on loopback: operator writes are refused", "service", u.name)
		}
	}

	h.t0 = time.Now()
	for i, u := range units {
		h.start(u, i, len(units), h.t0)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reloads := runReloads(ctx, hup, h.log,
		func(job reloadJob) (*config, string, bool) { return servicesAccess(h, f, set, job.log) },
		func(job reloadJob) { reloadServices(h, job) })
	serveErr := make(chan error, 1)
	go func() {
		if c.TLS.Cert != "" {
			serveErr <- srv.ServeTLS(ln, c.TLS.Cert, c.TLS.Key)
		} else {
			serveErr <- srv.Serve(ln)
		}
	}()
	e.ready.Store(true)
	select {
	case err := <-serveErr:
		cancel()
		<-reloads
		h.loops.Wait()
		return err
	case <-ctx.Done():
	}
	<-reloads // a reload under way ends first: the units are then those served
	log.Info("brownoutd: shutting down")
	for _, u := range h.rt.units().order {
		u.api.Shutdown() // a last event on every stream, which then ends
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	err = srv.Shutdown(sctx)
	cancel()
	h.loops.Wait()
	for _, u := range h.rt.units().order {
		u.api.Save()
	}
	return err
}

// newServicesEcho is newEcho for a daemon of several services: the
// router under /services/, /ofrep/ and /v1/; the dial at / (it lists the
// services, each of which has its own at /services/{name}/); metrics,
// health and readiness beside: the daemon's own (reg) and those of each
// service it serves at the moment of the scrape.
func newServicesEcho(rt *router, reg *prometheus.Registry) *echoServer {
	return newEchoOf(rt, rt.guard, servicesGatherer{reg, rt}, "/services/*", "/ofrep/*", "/v1/*")
}

// servicesGatherer is /metrics of a daemon of several services: the
// daemon's registry and the registry of every unit the router serves, so
// that a service a reload removes leaves no series behind, and one added
// (again) registers into a registry of its own.
type servicesGatherer struct {
	daemon *prometheus.Registry
	rt     *router
}

func (g servicesGatherer) Gather() ([]*dto.MetricFamily, error) {
	set := g.rt.units()
	gs := make(prometheus.Gatherers, 0, 1+len(set.order))
	gs = append(gs, g.daemon)
	for _, u := range set.order {
		gs = append(gs, u.reg)
	}
	return gs.Gather()
}

// A reload of a daemon of several services is reload's two stages for each
// (see reloadAccess): the file is checked whole — every service's
// controller configuration, the sources of those it adds — and only when
// all of it is valid are its tokens (of the services it keeps) and CORS
// origins (every service's) applied, at once (servicesAccess). Then, one
// file at a time (reloadServices), the services it adds are built (their
// state dirs locked, their replicas on the store); if one cannot be, the
// services stay as they were, the file's tokens and origins applied.
// Else the services it keeps take their new
// configuration and defaults; those it adds are routed and their loops
// started; those it removes are unrouted at once and retired
// (host.retire). A service's tick and source, and the daemon's settings
// (listen, state dir, store, TLS, …), take effect at the next restart:
// rebuilding a service in place would start its levels, history and
// windows afresh in the middle of an incident.

// servicesAccess checks the configuration file and applies the tokens and
// CORS origins of the services it keeps; it returns the file's
// configuration, for reloadServices.
func servicesAccess(h *host, f *serveFlags, set map[string]bool, log *slog.Logger) (*config, string, bool) {
	c, file, err := f.settings(os.Getenv, set)
	if err == nil && len(c.Services) == 0 {
		err = fmt.Errorf("%s has no services: a daemon started with services keeps them until its restart", fileName(file))
	}
	if err != nil {
		log.Error("brownoutd: reload refused, keeping the running configuration", "config", fileName(file), "err", err)
		return nil, file, false
	}
	fields := restartOnly(h.c, c)
	cur := h.rt.units()
	for _, s := range c.Services {
		// Each law checked at the tick it will run at, on a copy:
		// reloadServices checks again against the services it finds.
		d := s.Dimmer
		d.Logger = h.log.With("service", s.Name)
		if u := cur.byName[s.Name]; u != nil {
			if tick := s.Dimmer.Tick; tick != u.ctl.Config().Tick && !(tick == 0 && u.ctl.Config().Tick == time.Second) {
				fields = append(fields, "services["+u.name+"].tick")
			}
			if !reflect.DeepEqual([]any{s.Push, s.Scrape, s.PromQL}, []any{u.cfg.Push, u.cfg.Scrape, u.cfg.PromQL}) {
				fields = append(fields, "services["+u.name+"].sources")
			}
			d.Tick = u.ctl.Config().Tick
		} else if _, _, err := buildSource(s); err != nil {
			log.Error("brownoutd: reload refused, keeping the running configuration", "config", fileName(file), "service", s.Name, "err", err)
			return nil, file, false
		}
		if _, err := dimmer.New(d); err != nil {
			log.Error("brownoutd: reload refused, keeping the running configuration", "config", fileName(file), "service", s.Name, "err", err)
			return nil, file, false
		}
	}
	if len(fields) > 0 {
		// (Said as the file is read: a file whose reload another
		// replaces in the queue, or that is refused later, is still
		// told.)
		log.Warn("brownoutd: these settings take effect at the next restart, not on reload; the running ones stay", "settings", strings.Join(dedup(fields), ", "))
	}
	// A token revoked is refused from now on, whatever a service's loop
	// is doing (a replica's law is reconfigured in its loop, which may be
	// in a slow snapshot) and whatever an earlier file's reload waits for.
	// (The services routed now, under the lock: reloadServices routes
	// the ones it adds under it.)
	h.accessMu.Lock()
	h.access = c
	applyAccess(h, h.rt.units().order, c)
	h.accessMu.Unlock()
	log.Info("brownoutd: reload: tokens and CORS origins applied", "config", fileName(file))
	return c, file, true
}

// applyAccess gives units c's CORS origins (the daemon's, every service's)
// and each one c names its tokens. (One c does not name is one a reload
// will remove: its tokens stay until then.)
func applyAccess(h *host, units []*unit, c *config) {
	for _, u := range units {
		if err := u.api.SetCORSOrigins(c.CORSOrigins); err != nil { // settings checked them: never
			h.log.Error("brownoutd: reload: the CORS origins stay as they were", "service", u.name, "err", err)
		}
		for _, s := range c.Services {
			if s.Name == u.name {
				u.api.SetTokens(s.OperatorTokens, s.EvalTokens, s.PushTokens)
			}
		}
	}
}

// reloadServices applies the file of job, read and checked by
// servicesAccess, to the services: see above.
func reloadServices(h *host, job reloadJob) {
	c, file, log := job.c, job.file, job.log
	refuse := func(svc string, err error) {
		log.Error("brownoutd: reload refused, keeping the running services (the file's tokens and CORS origins stay applied)", "config", fileName(file), "service", svc, "err", err)
	}
	cur := h.rt.units()
	next := map[string]*serviceConfig{}
	var adding []*serviceConfig
	for _, s := range c.Services {
		next[s.Name] = s
		u := cur.byName[s.Name]
		if u == nil {
			s.Dimmer.Logger = h.log.With("service", s.Name) // (the law's lines, not this reload's)
			adding = append(adding, s)
			continue
		}
		s.Dimmer.Tick = u.ctl.Config().Tick // (servicesAccess said so where the file's differs)
		s.Dimmer.Logger = h.log.With("service", u.name)
		if _, err := dimmer.New(s.Dimmer); err != nil {
			// (Checked at this tick by servicesAccess, unless a reload
			// since added the service.)
			refuse(u.name, err)
			return
		}
	}
	added := map[string]*unit{}
	for _, s := range adding {
		u, err := h.build(s)
		if err != nil {
			for _, u := range added {
				u.close()
			}
			refuse(s.Name, err)
			return
		}
		added[s.Name] = u
	}
	// The laws, each service's on its own: a replica's waits for its
	// loop (a step, when the store is slow) and its event for the store,
	// and one after another they added up (30 s for 8 services on a store
	// that did not answer).
	var reconfiguring sync.WaitGroup
	for _, u := range cur.order {
		s := next[u.name]
		if s == nil {
			continue
		}
		reconfiguring.Go(func() {
			// The defaults span the law's change (see bridgeDefaults).
			old := u.api.Defaults()
			u.api.SetDefaults(bridgeDefaults(old, s.Defaults))
			if err := reconfigurer(u.ctl, u.rep).Reconfigure(s.Dimmer); err != nil { // checked above: only a replica's loop that does not answer
				u.api.SetDefaults(old)
				log.Error("brownoutd: reload: the service's law and its features' defaults stay as they were (its tokens and CORS origins are reloaded)", "service", u.name, "err", err)
				u.api.Note("reload", job.name()+": tokens and CORS origins reloaded from "+fileName(file)+"; the law and the features' defaults kept: "+err.Error())
				return
			}
			u.api.SetDefaults(s.Defaults)
			u.api.Save() // overrides on removed features are gone: not back after a crash
			u.api.Note("reload", job.name()+": configuration reloaded from "+fileName(file)+replicaNote(u.rep))
		})
	}
	reconfiguring.Wait()
	// The new set, in the file's order, routed from the next request on.
	order := make([]*unit, 0, len(c.Services))
	for _, s := range c.Services {
		if u := added[s.Name]; u != nil {
			order = append(order, u)
		} else {
			order = append(order, cur.byName[s.Name])
		}
	}
	// Routed with the latest file's tokens and CORS origins: a service
	// added here was built with the origins the daemon started with and
	// this file's tokens, and a file read since may have changed them
	// (servicesAccess gave that one's to the services routed then).
	h.accessMu.Lock()
	applyAccess(h, order, h.access)
	h.rt.publish(order)
	h.accessMu.Unlock()
	var addedNames, removedNames []string
	for i, u := range order {
		if added[u.name] == nil {
			continue
		}
		h.start(u, i, len(order), time.Now())
		addedNames = append(addedNames, u.name)
		u.api.Note("service", "service added by "+job.name()+" of "+fileName(file)+replicaNote(u.rep)+": served at "+service.Base(u.name)+"/")
		log.Info("brownoutd: service added", "service", u.name, "base", service.Base(u.name)+"/", "features", featureNames(u.cfg.Dimmer), "state", unitState(h.c, u))
		if len(u.cfg.OperatorTokens) == 0 && !loopback(h.c.Listen) {
			log.Warn("brownoutd: no operator token and not on loopback: operator writes are refused", "service", u.name)
		}
	}
	var retiring sync.WaitGroup
	for _, u := range cur.order {
		if next[u.name] != nil {
			continue
		}
		removedNames = append(removedNames, u.name)
		retiring.Go(func() {
			u.api.Note("service", "service removed by "+job.name()+" of "+fileName(file)+replicaNote(u.rep)+": no longer served there; its operators' state stays, for it to continue if it comes back")
			h.retire(u, "the service is no longer served: a reload of the daemon's configuration removed it")
			log.Info("brownoutd: service removed: no longer served, its operators' state kept", "service", u.name, "state", unitState(h.c, u))
		})
	}
	retiring.Wait()
	log.Info("brownoutd: configuration reloaded", "config", fileName(file), "services", len(order),
		"added", strings.Join(addedNames, ", "), "removed", strings.Join(removedNames, ", "))
}

// unitState says where a service's operators' state lives, for its start
// line.
func unitState(c *config, u *unit) string {
	if u.rep != nil {
		return stateWhere(c, u.rep)
	}
	return c.stateDir(u.cfg)
}

// dedup drops repeated strings, keeping the first of each.
func dedup(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
