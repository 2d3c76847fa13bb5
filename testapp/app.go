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
// controller may switch off, and what it costs a worker.
type Part struct {
	Name string
	Cost time.Duration
}

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
	// ModelLaw runs the stack's controller on dimmer's experimental model
	// law (dimmer.Config.Model) instead of the default search law.
	ModelLaw bool
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
		c.Parts = []Part{{"recommendations", 2500 * time.Microsecond}, {"reviews", 1500 * time.Microsecond}}
	}
	return c
}

// Capacity returns the pages per second the app serves with every part on
// and with every part off (without contention).
func (c Config) Capacity() (allOn, allOff float64) {
	c = c.withDefaults()
	on := c.Page
	for _, p := range c.Parts {
		on += p.Cost
	}
	w := float64(c.Workers)
	return w / on.Seconds(), w / c.Page.Seconds()
}

// ParseParts parses "recommendations=2.5ms,reviews=1.5ms".
func ParseParts(s string) ([]Part, error) {
	var out []Part
	if strings.TrimSpace(s) == "" {
		return []Part{}, nil
	}
	for _, f := range strings.Split(s, ",") {
		name, cost, ok := strings.Cut(strings.TrimSpace(f), "=")
		d, err := time.ParseDuration(cost)
		if !ok || name == "" || err != nil || d < 0 {
			return nil, fmt.Errorf("testapp: part %q: want name=duration, e.g. reviews=1.5ms", f)
		}
		out = append(out, Part{Name: name, Cost: d})
	}
	return out, nil
}

// App is an HTTP app with a hidden bottleneck: each page waits for one of
// Workers workers (giving up when its client goes, as a handler waiting on
// a pool with the request's context does), then holds it for the page's
// cost plus the cost of each optional part its user gets. It answers JSON:
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
	return &App{cfg: cfg, pool: p, partsOn: make([]atomic.Uint64, len(cfg.Parts))}
}

// Config returns the app's configuration with defaults filled in.
func (a *App) Config() Config { return a.cfg }

// Stats is what the app served.
type Stats struct {
	Served, GaveUp uint64            // pages worked on; pages whose client left while they waited for a worker
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
	var pg page
	for i, p := range a.cfg.Parts {
		if a.cfg.Flag == nil || a.cfg.Flag(ctx, p.Name, user) {
			cost += a.cost(p.Cost)
			pg.Sections = append(pg.Sections, p.Name)
			a.partsOn[i].Add(1)
		} else {
			pg.Dimmed = append(pg.Dimmed, p.Name)
		}
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
