package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/signal"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/cli"
	"github.com/brownout/brownout/internal/cluster"
	"github.com/brownout/brownout/internal/server"
	"github.com/brownout/brownout/internal/statedir"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
)

const serveUsage = `Usage: brownoutd serve [flags]

Runs the controller as a service: reads the fleet's signals (push by
default: apps POST /v1/signals), serves levels over OFREP
(/ofrep/v1/evaluate/flags[/{key}], and its change events at
/ofrep/v1/events) and the operator API (/v1/state, /v1/history,
/v1/events, /v1/stream — the state's changes and ticks as they happen —
/v1/stream/token, /v1/features/{name}/override, /v1/freeze, /v1/unfreeze,
/v1/shadow), the operator dial at /, /metrics, /healthz, /readyz.

With no configuration it runs on embedded defaults: 127.0.0.1:8080, the
push source, the features recommendations, reviews, gallery (in that shed
order), the targets latency.p99 300ms and reject.ratio 1 % (dim only).
Settings: flags over BROWNOUTD_*
environment variables over the YAML file over the defaults. SIGHUP reloads
the file: an invalid one keeps the running configuration (and says why).

With services: in the file, one daemon controls several services, each
with its own features, targets, source, schedule, tokens and state (under
state_dir/services/{name}): each one's routes are under /services/{name}/
(OFREP, the operator API, its pushes, its dial), or at the root with the
header X-Brownout-Service: {name}; GET /v1/state and the dial at / list
them (cmd/brownoutd/brownoutd.services.example.yaml). SIGHUP adds the
services the file adds and stops serving those it removes (their state
stays, for their return); a service's tick and source wait for a restart.

No page of another origin may evaluate flags from a browser unless
--cors-origin names its origin: then OFREP's evaluations and event stream
answer it, and nothing else does (the operator API never).

Flags:
`

// serveFlags are serve's flags; each has a BROWNOUTD_* variable.
type serveFlags struct {
	config, listen, stateDir, tick       string
	store                                string
	perClient, maxConns, maxStreams      string
	operatorTokens, evalTokens, pushToks string
	tlsCert, tlsKey                      string
	corsOrigins                          originList
}

// originList is --cors-origin: repeatable, each a comma-separated list.
type originList []string

func (l *originList) String() string { return strings.Join(*l, ",") }

func (l *originList) Set(v string) error {
	*l = append(*l, splitList(v)...)
	return nil
}

// splitList splits a comma-separated list, each item trimmed; empty
// items are dropped.
func splitList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "YAML configuration file (env BROWNOUTD_CONFIG)")
	fs.StringVar(&f.listen, "listen", "", "address to listen on, host:port (env BROWNOUTD_LISTEN; default 127.0.0.1:8080)")
	fs.StringVar(&f.stateDir, "state-dir", "", "directory for the operators' overrides, freeze and shadow, private to this user (env BROWNOUTD_STATE_DIR; default $STATE_DIRECTORY under systemd, else $XDG_STATE_HOME/brownoutd, else ~/.local/state/brownoutd)")
	fs.StringVar(&f.store, "store", "", "a postgres:// URL: keep the operators' state there and run as one of several replicas, one of which leads (env BROWNOUTD_STORE; default none: the state dir, one daemon)")
	fs.StringVar(&f.tick, "tick", "", "control period, e.g. 1s (env BROWNOUTD_TICK)")
	fs.StringVar(&f.perClient, "max-conns-per-client", "", fmt.Sprintf("connections one client address may hold open, every loopback address one client; 0 for no cap, e.g. behind a load balancer (env BROWNOUTD_MAX_CONNS_PER_CLIENT; default %d, a quarter of the default --max-conns)", server.DefaultPerClient))
	fs.StringVar(&f.maxConns, "max-conns", "", fmt.Sprintf("connections the server holds open at once, from %d to %d; each a file descriptor (ulimit -n) (env BROWNOUTD_MAX_CONNS; default %d)", minConns, maxConns, server.MaxConns))
	fs.StringVar(&f.maxStreams, "max-streams", "", fmt.Sprintf("event streams (/v1/stream, /ofrep/v1/events) open at once, every service's together; at most seven eighths of --max-conns (env BROWNOUTD_MAX_STREAMS; default half of --max-conns, %d)", api.DefaultMaxStreams))
	fs.StringVar(&f.operatorTokens, "operator-tokens", "", "file of named operator tokens, \"name token\" per line (env BROWNOUTD_OPERATOR_TOKENS); without any, writes only on a loopback listener")
	fs.StringVar(&f.evalTokens, "eval-tokens", "", "file of tokens required on OFREP evaluations (env BROWNOUTD_EVAL_TOKENS); default open")
	fs.StringVar(&f.pushToks, "push-tokens", "", "file of tokens required on POST /v1/signals (env BROWNOUTD_PUSH_TOKENS); required with the push source on a non-loopback listener")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (env BROWNOUTD_TLS_CERT); or terminate TLS in front")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS key file (env BROWNOUTD_TLS_KEY)")
	fs.Var(&f.corsOrigins, "cors-origin", "an origin, scheme://host[:port], whose pages may evaluate flags from a browser (OFREP's evaluations and event stream, nothing else); repeat it or separate with commas (env BROWNOUTD_CORS_ORIGINS; default none)")
}

// settings resolves the configuration: flags over environment over file
// over defaults. set lists the flags given on the command line.
func (f *serveFlags) settings(getenv func(string) string, set map[string]bool) (*config, string, error) {
	pick := func(flagName, flagVal, env string) string {
		if set[flagName] {
			return flagVal
		}
		return getenv(env)
	}
	file := pick("config", f.config, "BROWNOUTD_CONFIG")
	var data []byte
	if file != "" {
		b, err := readFile(file, maxConfigFile)
		if err != nil {
			return nil, file, err
		}
		data = b
	}
	c, err := parseConfig(fileName(file), data)
	if err != nil {
		return nil, file, err
	}
	if v := pick("listen", f.listen, "BROWNOUTD_LISTEN"); v != "" {
		if err := checkListen(v); err != nil {
			return nil, file, fmt.Errorf("listen %w", err)
		}
		c.Listen = v
	}
	if v := pick("max-conns-per-client", f.perClient, "BROWNOUTD_MAX_CONNS_PER_CLIENT"); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil {
			c.Conns.PerClient, err = perClient(n)
		}
		if err != nil {
			return nil, file, fmt.Errorf("max conns per client %q: want a number of connections, or 0 for no cap", v)
		}
	}
	if v := pick("max-conns", f.maxConns, "BROWNOUTD_MAX_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil {
			c.Conns.MaxConns, err = connsCap(n)
		}
		if err != nil {
			return nil, file, fmt.Errorf("max conns %q: want a number of connections from %d to %d", v, minConns, maxConns)
		}
	}
	if v := pick("max-streams", f.maxStreams, "BROWNOUTD_MAX_STREAMS"); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil {
			c.MaxStreams, err = streamsCap(n)
		}
		if err != nil {
			return nil, file, fmt.Errorf("max streams %q: want a number of streams, at least 1", v)
		}
	}
	if err := c.checkStreams(); err != nil {
		return nil, file, fmt.Errorf("max streams: %w", err)
	}
	if v := pick("state-dir", f.stateDir, "BROWNOUTD_STATE_DIR"); v != "" {
		c.StateDir = v
	}
	if v := pick("store", f.store, "BROWNOUTD_STORE"); v != "" {
		if err := checkStore(v); err != nil {
			return nil, file, fmt.Errorf("store: %w", err)
		}
		c.Store = v
	}
	if v := pick("tick", f.tick, "BROWNOUTD_TICK"); v != "" {
		d, err := time.ParseDuration(v)
		if err == nil {
			err = checkTick(d)
		}
		if err != nil {
			return nil, file, fmt.Errorf("tick %q: want a duration from 100ms to %v", v, maxTick)
		}
		c.Dimmer.Tick = d
	}
	for _, t := range []struct {
		flag, val, env string
		dst            *string
	}{
		{"operator-tokens", f.operatorTokens, "BROWNOUTD_OPERATOR_TOKENS", &c.Auth.OperatorTokensFile},
		{"eval-tokens", f.evalTokens, "BROWNOUTD_EVAL_TOKENS", &c.Auth.EvalTokensFile},
		{"push-tokens", f.pushToks, "BROWNOUTD_PUSH_TOKENS", &c.Auth.PushTokensFile},
		{"tls-cert", f.tlsCert, "BROWNOUTD_TLS_CERT", &c.TLS.Cert},
		{"tls-key", f.tlsKey, "BROWNOUTD_TLS_KEY", &c.TLS.Key},
	} {
		if v := pick(t.flag, t.val, t.env); v != "" {
			*t.dst = v
		}
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return nil, file, errors.New("tls: cert and key go together")
	}
	origins := []string(f.corsOrigins)
	if !set["cors-origin"] {
		origins = splitList(getenv("BROWNOUTD_CORS_ORIGINS"))
	}
	if set["cors-origin"] || len(origins) > 0 {
		c.CORSOrigins = nil
		for _, o := range origins {
			co, err := corsOrigin(o)
			if err != nil {
				return nil, file, fmt.Errorf("cors origin %w", err)
			}
			c.CORSOrigins = append(c.CORSOrigins, co)
		}
	}
	if c.StateDir == "" && c.Store == "" {
		if c.StateDir, err = defaultStateDir(getenv); err != nil {
			return nil, file, err
		}
	}
	c.inherit()
	ce := &configError{file: "brownoutd"}
	serveChecks(c, true, func(path, format string, a ...any) {
		ce.errs = append(ce.errs, path+": "+fmt.Sprintf(format, a...))
	})
	if len(ce.errs) > 0 {
		if file != "" {
			ce.file = file
		}
		return nil, file, ce
	}
	return c, file, nil
}

// defaultStateDir is where the operators' state lives when no state dir
// is configured: systemd's StateDirectory= ($STATE_DIRECTORY, the first
// of its list), else $XDG_STATE_HOME/brownoutd, else
// ~/.local/state/brownoutd. Never a shared temporary directory, where
// another local user could plant operator.json or hold the lock: without
// any of these, an error says what to set.
func defaultStateDir(getenv func(string) string) (string, error) {
	d, err := statedir.Default("brownoutd", getenv)
	if err != nil {
		return "", fmt.Errorf("%w: set --state-dir (or BROWNOUTD_STATE_DIR, state_dir in the file) to a directory private to this user, or run under systemd with StateDirectory=brownoutd", err)
	}
	return d, nil
}

func fileName(f string) string {
	if f == "" {
		return "(defaults)"
	}
	return f
}

// loopback reports whether addr listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// source is a signal source with its health.
type source interface {
	dimmer.Source
	Health() signals.SourceHealth
}

func buildSource(c *serviceConfig) (source, *fleet.PushSource, error) {
	switch {
	case c.Scrape != nil:
		s, err := fleet.NewScrapeSource(fleet.ScrapeConfig{Targets: c.Scrape.Targets, Window: time.Duration(c.Scrape.Window), Timeout: time.Duration(c.Scrape.Timeout)})
		return s, nil, err
	case c.PromQL != nil:
		cfg := fleet.PromQLConfig{Address: c.PromQL.URL, Timeout: time.Duration(c.PromQL.Timeout), Period: time.Duration(c.PromQL.Period), Selector: c.PromQL.Selector}
		if c.PromQL.Range != "" || len(c.PromQL.Queries) > 0 || c.PromQL.Selector != "" {
			rng := c.PromQL.Range
			if rng == "" {
				rng = "1m"
			}
			cfg.Queries = fleet.DefaultQueriesFor(rng, c.PromQL.Selector)
			if d, err := time.ParseDuration(rng); err == nil {
				cfg.Window = d // what the controller waits after a step
			}
			for k, q := range c.PromQL.Queries {
				key, _ := signals.ParseKey(k)
				cfg.Queries[key] = q
			}
		}
		s, err := fleet.NewPromQLSource(cfg)
		return s, nil, err
	}
	p := fleet.NewPushSource(fleet.PushConfig{Window: time.Duration(c.Push.Window), Expire: time.Duration(c.Push.Expire), MaxInstances: int(c.Push.MaxInstances)})
	return p, p, nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	f.register(fs)
	logf := cli.LogFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("serve: unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	c, file, err := f.settings(os.Getenv, set)
	if err != nil {
		return err
	}
	log, err := logf.Logger(stderr)
	if err != nil {
		return usageError{err.Error()}
	}
	if len(c.Services) > 0 {
		return serveServices(ctx, c, file, &f, set, log, stdout)
	}
	c.Dimmer.Logger = log
	ctl, err := dimmer.New(c.Dimmer)
	if err != nil {
		return err
	}
	src, push, err := buildSource(&c.serviceConfig)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	// The Go runtime's usual metrics, and the heap live after the last
	// collection (go_gc_heap_live_bytes): what the daemon keeps, without
	// the garbage of the moment (the hostile clients' test bounds it).
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	prov, err := provider.New(ctl, provider.Options{Registerer: reg})
	if err != nil {
		return err
	}
	acfg := api.Config{Controller: ctl, Provider: prov, OperatorTokens: c.OperatorTokens, EvalTokens: c.EvalTokens,
		PushTokens: c.PushTokens, Loopback: loopback(c.Listen), StateDir: c.StateDir, Registerer: reg, Logger: log,
		Defaults: c.Defaults, CORSOrigins: c.CORSOrigins, Sources: func() []signals.SourceHealth { return []signals.SourceHealth{src.Health()} },
		MaxStreams: c.maxStreams(), OwnStreamConns: true} // runServe ends the streams with a.Shutdown before the server's
	if push != nil {
		acfg.Push = push
	}
	rep, err := openReplica(ctx, c, &c.serviceConfig, nil, ctl, &acfg, log, reg)
	if err != nil {
		return err
	}
	if rep != nil {
		defer rep.Close()
	}
	a, err := api.New(acfg)
	if err != nil {
		return err
	}
	defer a.Close() // the state dir's lock, after the last Save
	if rep != nil {
		// The store's state, before anyone is served: until then a
		// replica serves its own fresh state. A failure is logged; the
		// replica follows the store when it answers, not ready till then.
		rep.Load(ctx, a)
	}
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
	e := newEcho(a, reg)
	if rep != nil {
		e.loaded = rep.Loaded
	}
	srv := server.New(e) // no WriteTimeout: /v1/stream and /ofrep/v1/events last
	scheme := "http"
	if c.TLS.Cert != "" {
		scheme = "https"
	}
	fmt.Fprintf(stdout, "brownoutd: serving on %s://%s (config %s; features %s; state %s)\n", scheme, ln.Addr(), fileName(file), featureNames(c.Dimmer), stateWhere(c, rep))
	fmt.Fprintf(stdout, "brownoutd: the dial at %s://%s/\n", scheme, ln.Addr())
	if len(c.CORSOrigins) > 0 {
		fmt.Fprintf(stdout, "brownoutd: pages of %s may evaluate flags from a browser (OFREP only)\n", strings.Join(c.CORSOrigins, ", "))
	}
	if len(c.OperatorTokens) == 0 && !loopback(c.Listen) {
		log.Warn("brownoutd: no operator token and not on loopback: operator writes are refused")
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		if rep != nil {
			rep.Run(ctx, a, src)
			return
		}
		a.Run(ctx, src)
	}()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	runReloads(ctx, hup, log,
		func(job reloadJob) (*config, string, bool) {
			return reloadAccess(reconfigurer(ctl, rep), a, &f, set, c, job)
		},
		func(job reloadJob) { reloadLaw(reconfigurer(ctl, rep), a, job) })
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
		<-loopDone
		return err
	case <-ctx.Done():
	}
	log.Info("brownoutd: shutting down")
	a.Shutdown() // a last event on every stream, which then ends
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	err = srv.Shutdown(sctx)
	cancel()
	<-loopDone
	a.Save()
	return err
}

// A reload (SIGHUP) applies the configuration file again in two stages:
// at once, who may call (reloadAccess); then the law and the features'
// defaults (reloadLaw), one file at a time. A replica's law is
// reconfigured in its loop, which may be waiting on a store that does not
// answer (ten seconds or more, and then the law's reload fails): a token
// revoked by a second SIGHUP meanwhile is refused at once, not once the
// first file's law has been reloaded or has given up.

// reloadAccess reads and checks the configuration file (an invalid one
// keeps the running configuration and says why) and applies its tokens
// and CORS origins. It returns the file's configuration, for reloadLaw.
func reloadAccess(ctl reconfigurable, a *api.API, f *serveFlags, set map[string]bool, running *config, job reloadJob) (*config, string, bool) {
	log := job.log
	c, file, err := f.settings(os.Getenv, set)
	if err != nil {
		log.Error("brownoutd: reload refused, keeping the running configuration", "config", fileName(file), "err", err)
		return nil, file, false
	}
	if fields := restartOnly(running, c); len(fields) > 0 {
		log.Warn("brownoutd: these settings take effect at the next restart, not on reload; the running ones stay", "settings", strings.Join(fields, ", "))
		c.Dimmer.Tick = ctl.Config().Tick
	}
	c.Dimmer.Logger = job.base // (the law's lines, not this reload's)
	if _, err := dimmer.New(c.Dimmer); err != nil {
		log.Error("brownoutd: reload refused, keeping the running configuration", "config", fileName(file), "err", err)
		return nil, file, false
	}
	a.SetTokens(c.OperatorTokens, c.EvalTokens, c.PushTokens)
	if err := a.SetCORSOrigins(c.CORSOrigins); err != nil { // settings checked them: never
		log.Error("brownoutd: reload: the CORS origins stay as they were", "err", err)
	}
	log.Info("brownoutd: reload: tokens and CORS origins applied", "config", fileName(file))
	return c, file, true
}

// reloadLaw reconfigures the law for the file of job, read by
// reloadAccess, with the features' defaults spanning the change (see
// bridgeDefaults).
func reloadLaw(ctl reconfigurable, a *api.API, job reloadJob) {
	c, file, log := job.c, job.file, job.log
	old := a.Defaults()
	a.SetDefaults(bridgeDefaults(old, c.Defaults))
	if err := ctl.Reconfigure(c.Dimmer); err != nil { // checked above: only a replica's loop that does not answer
		a.SetDefaults(old)
		log.Error("brownoutd: reload: the law and the features' defaults stay as they were (the tokens and CORS origins are reloaded)", "config", fileName(file), "err", err)
		a.Note("reload", job.name()+": tokens and CORS origins reloaded from "+fileName(file)+"; the law and the features' defaults kept: "+err.Error())
		return
	}
	a.SetDefaults(c.Defaults)
	a.Save() // overrides on removed features are gone: not back after a crash
	var rep *cluster.Replica
	if rc, ok := ctl.(replicaReconf); ok {
		rep = rc.rep
	}
	a.Note("reload", job.name()+": configuration reloaded from "+fileName(file)+replicaNote(rep))
	log.Info("brownoutd: configuration reloaded", "config", fileName(file), "features", featureNames(c.Dimmer))
}

// reloadJob is one SIGHUP's reload: its number since the daemon started
// (n, in each of its log lines, as reload=n, and in its events), the
// file's configuration c once read and checked (ok), and where from.
type reloadJob struct {
	n    int
	base *slog.Logger // the daemon's: the laws and services it builds log there
	log  *slog.Logger // base, with reload=n: the reload's own lines
	c    *config
	file string
	ok   bool
}

func newReloadJob(n int, base *slog.Logger) reloadJob {
	return reloadJob{n: n, base: base, log: base.With("reload", n)}
}

// name is how the events name the reload.
func (j reloadJob) name() string { return "reload " + strconv.Itoa(j.n) }

// runReloads serves the SIGHUPs of hup until ctx ends: access, a
// reload's first stage, as each comes (it reads and checks the file and
// applies its tokens and CORS origins); apply, its second, in another
// goroutine, one reload at a time — the latest waiting (lawQueue). The
// channel it returns is closed once apply has returned for good.
func runReloads(ctx context.Context, hup <-chan os.Signal, log *slog.Logger, access func(reloadJob) (*config, string, bool), apply func(reloadJob)) <-chan struct{} {
	laws := newLawQueue()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-laws.ready:
				if job, ok := laws.take(); ok {
					apply(job)
				}
			}
		}
	}()
	go func() {
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				job := newReloadJob(n, log)
				if job.c, job.file, job.ok = access(job); job.ok {
					if was := laws.put(job); was > 0 {
						job.log.Info("brownoutd: reload: this file replaces one still waiting to be applied (its tokens and CORS origins were)", "config", fileName(job.file), "replaces", was)
					}
				}
			}
		}
	}()
	return done
}

// lawQueue hands the reloads whose tokens are applied to the goroutine
// that reloads their laws: the latest waits while a law's reload runs,
// and replaces any that waited before it (its law is the one to run; the
// tokens of each were applied as its file was read).
type lawQueue struct {
	ready chan struct{} // a reload waits (one signal for any number)
	mu    sync.Mutex
	next  reloadJob
}

func newLawQueue() *lawQueue { return &lawQueue{ready: make(chan struct{}, 1)} }

// put makes job the reload whose law runs next; it returns the number of
// the one it replaced, which waited (0: none).
func (q *lawQueue) put(job reloadJob) (replaced int) {
	q.mu.Lock()
	if q.next.ok {
		replaced = q.next.n
	}
	q.next = job
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return replaced
}

// take returns the reload that waits, if any, and empties the queue.
func (q *lawQueue) take() (reloadJob, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	job := q.next
	q.next = reloadJob{}
	return job, job.ok
}

// bridgeDefaults is the features' defaults while a reload changes the law
// from one whose features had old to one whose have next, which may fail
// and keep the old: for a feature both name, it fails closed if either
// says so; for one only one of them names, that one's. A default missing
// reads true (fail open): set before the law, next's alone made a
// feature the file removes fail open while the law still had it; set
// after it, a feature the file adds failed open until they were; and a
// feature whose file turns it to fail open does so once the law has
// changed — not while it waits, nor if it fails.
func bridgeDefaults(old, next map[string]bool) map[string]bool {
	out := make(map[string]bool, len(old)+len(next))
	maps.Copy(out, old)
	for f, d := range next {
		if o, ok := out[f]; ok {
			d = d && o
		}
		out[f] = d
	}
	return out
}

// restartOnly lists the settings that differ between the running and the
// reloaded configuration but are fixed for the process's life.
func restartOnly(running, next *config) []string {
	var out []string
	if running.Listen != next.Listen {
		out = append(out, "listen")
	}
	if running.Conns.PerClient != next.Conns.PerClient {
		out = append(out, "max_conns_per_client")
	}
	if running.maxConns() != next.maxConns() {
		out = append(out, "max_conns")
	}
	if running.maxStreams() != next.maxStreams() {
		out = append(out, "max_streams")
	}
	if running.StateDir != next.StateDir {
		out = append(out, "state_dir")
	}
	if running.Store != next.Store {
		out = append(out, "store")
	}
	if running.TLS != next.TLS {
		out = append(out, "tls")
	}
	tick := func(c *config) time.Duration {
		if c.Dimmer.Tick == 0 {
			return time.Second
		}
		return c.Dimmer.Tick
	}
	if tick(running) != tick(next) {
		out = append(out, "tick")
	}
	if !reflect.DeepEqual([]any{running.Push, running.Scrape, running.PromQL}, []any{next.Push, next.Scrape, next.PromQL}) {
		out = append(out, "sources")
	}
	return out
}

func featureNames(d dimmer.Config) string {
	var n []string
	for _, f := range d.Features {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}
