package testapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/internal/pool"
)

// Part is an optional part of a page: a section that the brownout
// controller may switch off, and what it costs.
type Part struct {
	Name string
	// Cost is the part's time: what it holds a worker for, or with Remote
	// what the handler waits for.
	Cost time.Duration
	// Remote makes the part a call to another service: the handler waits
	// Cost for it before it asks for a worker, holding none while it
	// waits. It takes wall time and an in-flight request, not the pool.
	Remote bool
}

// String is the part as ParseParts reads it: "reviews=1.5ms",
// "recommendations=3ms@remote".
func (p Part) String() string {
	s := p.Name + "=" + p.Cost.String()
	if p.Remote {
		s += remoteSuffix
	}
	return s
}

// remoteSuffix marks a remote part in ParseParts' syntax.
const remoteSuffix = "@remote"

// Config shapes an App. Zero fields take the defaults given.
type Config struct {
	// Workers is the hidden concurrency: a page holds one of them while
	// it is worked on (a thread pool, a database pool). Default 4.
	Workers int
	// Page is the mandatory work of a page. Default 6 ms.
	Page time.Duration
	// Parts are the optional parts, in the order they are asked for.
	// Default: recommendations 2.5 ms, reviews 1.5 ms.
	Parts []Part
	// Exponential draws each cost from an exponential distribution with
	// that mean (seeded per request) instead of holding it exactly.
	Exponential bool
	// Contention makes the work of a request that starts with n in
	// service (itself included) take 1 + Alpha·(n−1) + Beta·n·(n−1) times
	// as long, as a database's does (the universal scalability law).
	Contention struct{ Alpha, Beta float64 }
	// Flag reports whether the user gets an optional part. Default: every
	// part on.
	Flag func(ctx context.Context, part, user string) bool
	// Priors sets the stack's controller's configured costs
	// (dimmer.Feature.Cost, shares of the all-off page), by feature name.
	// A feature without one keeps the stack's (the README's snippet sets
	// none: dimmer's default, 1).
	Priors map[string]float64
	// WallTime stops the pool from reporting each page's time on its
	// worker to the stack's tallies (signals.Held): the controller then
	// learns the parts' costs from the pages' wall time — the wait for a
	// worker and a remote part's time included — instead of the pool's.
	WallTime bool
}

// Default is the app of the real-HTTP harness: 4 workers, pages of 6 ms,
// recommendations 2.5 ms, reviews 1.5 ms — 400 pages/s with every part on,
// 667 with every part off.
func Default() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Page <= 0 {
		c.Page = 6 * time.Millisecond
	}
	if c.Parts == nil {
		c.Parts = []Part{{Name: "recommendations", Cost: 2500 * time.Microsecond}, {Name: "reviews", Cost: 1500 * time.Microsecond}}
	}
	return c
}

// Capacity returns the pages per second the app serves with every part on
// and with every part off (without contention): the pool's, which remote
// parts do not use.
func (c Config) Capacity() (allOn, allOff float64) {
	c = c.withDefaults()
	on := c.Page
	for _, p := range c.Parts {
		if !p.Remote {
			on += p.Cost
		}
	}
	w := float64(c.Workers)
	return w / on.Seconds(), w / c.Page.Seconds()
}

// PoolShare is part p's true cost as the brownout controller means it —
// what it takes from the bottleneck that overload exhausts, the worker
// pool — as a share of the all-off page's pool work (without contention,
// which scales both alike): 0 for a remote part. WallShare is its wall
// time as a share of the same.
func (c Config) PoolShare(p Part) (pool, wall float64) {
	c = c.withDefaults()
	wall = p.Cost.Seconds() / c.Page.Seconds()
	if p.Remote {
		return 0, wall
	}
	return wall, wall
}

// ParseParts parses "recommendations=2.5ms,reviews=1.5ms"; a part whose
// duration ends in @remote is Remote ("recommendations=3ms@remote").
func ParseParts(s string) ([]Part, error) {
	var out []Part
	if strings.TrimSpace(s) == "" {
		return []Part{}, nil
	}
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		name, cost, ok := strings.Cut(strings.TrimSpace(f), "=")
		cost, remote := strings.CutSuffix(cost, remoteSuffix)
		d, err := time.ParseDuration(cost)
		if !ok || name == "" || err != nil || d < 0 {
			return nil, fmt.Errorf("testapp: part %q: want name=duration or name=duration@remote, e.g. reviews=1.5ms", f)
		}
		if seen[name] {
			return nil, fmt.Errorf("testapp: part %q twice", name)
		}
		seen[name] = true
		out = append(out, Part{Name: name, Cost: d, Remote: remote})
	}
	return out, nil
}

// ParsePriors parses "recommendations=0.4,reviews=0.25": configured costs
// (Config.Priors), each a positive share of the all-off page.
func ParsePriors(s string) (map[string]float64, error) {
	out := map[string]float64{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, f := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || name == "" || err != nil || !(x > 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("testapp: prior %q: want name=share > 0, e.g. reviews=0.25", f)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("testapp: prior for %q twice", name)
		}
		out[name] = x
	}
	return out, nil
}

// App is an HTTP app with a hidden bottleneck: each page waits for its
// user's remote parts (a call to another service, holding no worker), then
// for one of Workers workers (giving up when its client goes, as a handler
// waiting with the request's context does), then holds it for the page's
// cost plus the cost of each other optional part its user gets. It
// answers JSON:
//
//	{"sections":["recommendations"],"dimmed":["reviews"]}
//
// An App is safe for concurrent use.
type App struct {
	cfg  Config
	pool *pool.Pool

	served, gaveUp atomic.Uint64
	partsOn        []atomic.Uint64
}

// New returns an App.
func New(cfg Config) *App {
	cfg = cfg.withDefaults()
	p := pool.New(cfg.Workers)
	p.SetContention(cfg.Contention.Alpha, cfg.Contention.Beta)
	p.SetWallTime(cfg.WallTime)
	return &App{cfg: cfg, pool: p, partsOn: make([]atomic.Uint64, len(cfg.Parts))}
}

// Config returns the app's configuration with defaults filled in.
func (a *App) Config() Config { return a.cfg }

// Stats is what the app served.
type Stats struct {
	Served, GaveUp uint64            // pages worked on; pages whose client left while they waited for a remote part or a worker
	PartsOn        map[string]uint64 // optional parts served, by name
	Busy           int64             // workers busy now
}

// Stats returns the counts so far.
func (a *App) Stats() Stats {
	st := Stats{Served: a.served.Load(), GaveUp: a.gaveUp.Load(), Busy: a.pool.Busy(), PartsOn: map[string]uint64{}}
	for i, p := range a.cfg.Parts {
		st.PartsOn[p.Name] = a.partsOn[i].Load()
	}
	return st
}

// UserHeader carries the user id: what an auth layer in front sets, and
// the OpenFeature targeting key.
const UserHeader = "X-User-ID"

type page struct {
	Sections []string `json:"sections"`
	Dimmed   []string `json:"dimmed"`
}

// ServeHTTP implements http.Handler.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	user := r.Header.Get(UserHeader)
	cost := a.cost(a.cfg.Page)
	var remote time.Duration
	var pg page
	for i, p := range a.cfg.Parts {
		if a.cfg.Flag == nil || a.cfg.Flag(ctx, p.Name, user) {
			if p.Remote {
				remote += a.cost(p.Cost)
			} else {
				cost += a.cost(p.Cost)
			}
			pg.Sections = append(pg.Sections, p.Name)
			a.partsOn[i].Add(1)
		} else {
			pg.Dimmed = append(pg.Dimmed, p.Name)
		}
	}
	if err := wait(ctx, remote); err != nil { // the remote calls: no worker held
		a.gaveUp.Add(1)
		http.Error(w, "client gone", http.StatusServiceUnavailable)
		return
	}
	if err := a.pool.Do(ctx, cost); err != nil { // the work: not cancelled once started
		a.gaveUp.Add(1)
		http.Error(w, "client gone", http.StatusServiceUnavailable)
		return
	}
	a.served.Add(1)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(pg)
}

// wait is a remote call of d: it ends early, with ctx's error, when ctx
// does.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var rngs = sync.Pool{New: func() any { return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) }}

func (a *App) cost(mean time.Duration) time.Duration {
	if !a.cfg.Exponential || mean <= 0 {
		return mean
	}
	r := rngs.Get().(*rand.Rand)
	d := time.Duration(r.ExpFloat64() * float64(mean))
	rngs.Put(r)
	return min(d, time.Duration(20*float64(mean)))
}

// ParseContention parses "alpha,beta", e.g. "0.02,0.0005".
func ParseContention(s string) (alpha, beta float64, err error) {
	a, b, ok := strings.Cut(s, ",")
	if ok {
		alpha, err = strconv.ParseFloat(strings.TrimSpace(a), 64)
		if err == nil {
			beta, err = strconv.ParseFloat(strings.TrimSpace(b), 64)
		}
	}
	if !ok || err != nil || alpha < 0 || beta < 0 || math.IsInf(alpha+beta, 0) {
		return 0, 0, errors.New("testapp: contention: want alpha,beta ≥ 0, e.g. 0.02,0.0005")
	}
	return alpha, beta, nil
}
