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
// fixed from then on; its parts are safe for concurrent use, and run is
// its one goroutine.
type unit struct {
	name    string
	cfg     *serviceConfig
	ctl     *dimmer.Controller
	src     source
	api     *api.API
	rep     *cluster.Replica // with a store: the service's replica; else nil
	handler http.Handler     // the service's routes under /services/{name}/
}

// newUnit builds s's unit over its source (buildSource; push, when it is
// a push source): its metrics go to reg labelled with its name, its log
// lines say it. With a store (c.Store) the service runs as a replica of
// its own, its rows keyed by its name, its lease its own: each service
// has its leader. Close it with close.
func newUnit(ctx context.Context, c *config, s *serviceConfig, src source, push *fleet.PushSource, streams *api.StreamCap, reg prometheus.Registerer, log *slog.Logger) (*unit, error) {
	log = log.With("service", s.Name)
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"service": s.Name}, reg)
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
	rep, err := openReplica(ctx, c, s, ctl, &acfg, log, reg)
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
	return &unit{name: s.Name, cfg: s, ctl: ctl, src: src, api: a, rep: rep, handler: http.StripPrefix(base, mux)}, nil
}

// close releases the unit's state dir, then its store (after the last
// Save).
func (u *unit) close() {
	u.api.Close()
	if u.rep != nil {
		u.rep.Close()
	}
}

// run is the unit's control loop, started after delay (its phase in the
// tick), until ctx ends.
func (u *unit) run(ctx context.Context, delay time.Duration) {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	if u.rep != nil {
		u.rep.Run(ctx, u.api, u.src)
		return
	}
	u.api.Run(ctx, u.src)
}

// serveServices is runServe for a file with services:.
func serveServices(ctx context.Context, c *config, file string, f *serveFlags, set map[string]bool, log *slog.Logger, stdout io.Writer) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var units []*unit
	defer func() {
		for _, u := range units {
			u.close() // the state dirs' locks, the stores, after the last Save
		}
	}()
	// One cap of streams for the daemon, whichever service they follow:
	// they hold its connections, which the services share.
	streams := api.NewStreamCap(c.maxStreams())
	for _, s := range c.Services {
		src, push, err := buildSource(s)
		if err != nil {
			return fmt.Errorf("service %s: %w", s.Name, err)
		}
		u, err := newUnit(ctx, c, s, src, push, streams, reg, log)
		if err != nil {
			return err
		}
		units = append(units, u)
	}
	rt := newRouter(units, loopback(c.Listen))
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
	e := newServicesEcho(rt, reg)
	srv := server.New(e)
	scheme := "http"
	if c.TLS.Cert != "" {
		scheme = "https"
	}
	where := c.StateDir
	if c.Store != "" {
		where = "store " + cluster.Redact(c.Store) + ", a replica of each service"
	}
	fmt.Fprintf(stdout, "brownoutd: serving on %s://%s (config %s; services %s; state %s)\n", scheme, ln.Addr(), fileName(file), rt.list(), where)
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

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var loops sync.WaitGroup
	for i, u := range units {
		phase := time.Duration(i) * u.ctl.Config().Tick / time.Duration(len(units))
		loops.Go(func() { u.run(ctx, phase) })
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reloadServices(units, f, set, c, log)
			}
		}
	}()
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
		loops.Wait()
		return err
	case <-ctx.Done():
	}
	log.Info("brownoutd: shutting down")
	for _, u := range units {
		u.api.Shutdown() // a last event on every stream, which then ends
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	err = srv.Shutdown(sctx)
	cancel()
	loops.Wait()
	for _, u := range units {
		u.api.Save()
	}
	return err
}

// newServicesEcho is newEcho for a daemon of several services: the
// router under /services/, /ofrep/ and /v1/; the dial at / (it lists the
// services, each of which has its own at /services/{name}/); metrics,
// health and readiness beside.
func newServicesEcho(rt *router, reg *prometheus.Registry) *echoServer {
	return newEchoOf(rt, rt.guard, reg, "/services/*", "/ofrep/*", "/v1/*")
}

// reloadServices is reload for a daemon of several services: the file
// is checked whole, every service's controller configuration first, and
// applied to every service only when all of it is valid. The services
// themselves (their names), each one's tick and source, and the daemon's
// listener take effect at the next restart.
func reloadServices(units []*unit, f *serveFlags, set map[string]bool, running *config, log *slog.Logger) {
	c, file, err := f.settings(os.Getenv, set)
	if err == nil && len(c.Services) == 0 {
		err = fmt.Errorf("%s has no services: a daemon started with services keeps them until its restart", fileName(file))
	}
	if err != nil {
		log.Error("brownoutd: reload refused, keeping the running configuration", "config", fileName(file), "err", err)
		return
	}
	fields := restartOnly(running, c)
	next := map[string]*serviceConfig{}
	for _, s := range c.Services {
		next[s.Name] = s
	}
	if len(next) != len(units) {
		fields = append(fields, "services")
	}
	for _, u := range units {
		s := next[u.name]
		if s == nil {
			fields = append(fields, "services")
			continue
		}
		if tick := s.Dimmer.Tick; tick != u.ctl.Config().Tick && !(tick == 0 && u.ctl.Config().Tick == time.Second) {
			fields = append(fields, "services["+u.name+"].tick")
		}
		if !reflect.DeepEqual([]any{s.Push, s.Scrape, s.PromQL}, []any{u.cfg.Push, u.cfg.Scrape, u.cfg.PromQL}) {
			fields = append(fields, "services["+u.name+"].sources")
		}
		s.Dimmer.Tick = u.ctl.Config().Tick
		s.Dimmer.Logger = log.With("service", u.name)
		if _, err := dimmer.New(s.Dimmer); err != nil {
			log.Error("brownoutd: reload refused, keeping the running configuration", "config", fileName(file), "service", u.name, "err", err)
			return
		}
	}
	if len(fields) > 0 {
		log.Warn("brownoutd: these settings take effect at the next restart, not on reload; the running ones stay", "settings", strings.Join(dedup(fields), ", "))
	}
	for _, u := range units {
		s := next[u.name]
		if s == nil {
			continue
		}
		if err := reconfigurer(u.ctl, u.rep).Reconfigure(s.Dimmer); err != nil { // checked above: never
			log.Error("brownoutd: reload: the service's configuration stays as it was", "service", u.name, "err", err)
			continue
		}
		u.api.SetTokens(s.OperatorTokens, s.EvalTokens, s.PushTokens)
		u.api.SetDefaults(s.Defaults)
		if err := u.api.SetCORSOrigins(c.CORSOrigins); err != nil { // settings checked them: never
			log.Error("brownoutd: reload: the CORS origins stay as they were", "service", u.name, "err", err)
		}
		u.api.Save() // overrides on removed features are gone: not back after a crash
		u.api.Note("reload", "configuration reloaded from "+fileName(file))
	}
	log.Info("brownoutd: configuration reloaded", "config", fileName(file), "services", len(units))
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
