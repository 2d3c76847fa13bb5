// Package pool is a bounded pool of simulated workers: the hidden
// bottleneck of the test app and of the demo shop. Work holds a worker for
// a service time on a timer (no CPU is burnt), so an app's capacity is
// known in advance and reachable on a small machine while a load
// generator runs beside it.
package pool

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/signals"
)

// ErrGone is returned when the caller's context ends while it waits for a
// worker: a handler waiting on a pool with the request's context gives up
// when its client goes.
var ErrGone = errors.New("pool: gave up waiting for a worker")

// Pool is a set of workers. It is safe for concurrent use.
type Pool struct {
	slots     chan struct{}
	busy      atomic.Int64
	overshoot atomic.Int64 // the timer's average lateness, ns
	alpha     float64
	beta      float64
	slowdown  atomic.Uint64 // math.Float64bits of the work multiplier; 0: 1
	worked    atomic.Int64  // ns of work held, all workers
	wallTime  bool          // do not report the time held (SetWallTime)
}

// New returns a pool of n workers (at least 1).
func New(n int) *Pool { return &Pool{slots: make(chan struct{}, max(n, 1))} }

// SetContention makes work that starts with m in service (itself
// included) take 1 + alpha·(m−1) + beta·m·(m−1) times as long, as a
// database's does (the universal scalability law). Call it before use.
func (p *Pool) SetContention(alpha, beta float64) { p.alpha, p.beta = alpha, beta }

// SetWallTime stops Do from reporting the time a request held a worker to
// its tally (signals.Held), so that the costs are learned from the
// requests' wall time: for comparing the two. Call it before use.
func (p *Pool) SetWallTime(on bool) { p.wallTime = on }

// SetSlowdown multiplies all work started from now on by f (≥ 1 halves
// capacity at 2: a noisy neighbour, a degraded disk); 1 restores it.
func (p *Pool) SetSlowdown(f float64) {
	if !(f > 0) || math.IsInf(f, 0) {
		f = 1
	}
	p.slowdown.Store(math.Float64bits(f))
}

// Slowdown returns the work multiplier in force.
func (p *Pool) Slowdown() float64 {
	if b := p.slowdown.Load(); b != 0 {
		return math.Float64frombits(b)
	}
	return 1
}

// Worked returns the work held so far, all workers together: its
// increase over an interval ÷ (Workers × the interval) is the pool's
// utilization.
func (p *Pool) Worked() time.Duration { return time.Duration(p.worked.Load()) }

// Workers returns the pool's size.
func (p *Pool) Workers() int { return cap(p.slots) }

// Busy returns the workers busy now.
func (p *Pool) Busy() int64 { return p.busy.Load() }

// Do waits for a worker (or ctx's end: ErrGone), holds it for d (scaled
// by the contention at its start; work is not cancelled once started) and
// releases it. It reports the time it held the worker to the request's
// tally, when ctx carries one (signals.Held): the pool is the apps'
// bottleneck, and a feature's cost is what it takes from it, not the
// wait for a worker nor a remote call's time. A request that gives up
// waiting reports that it held nothing.
func (p *Pool) Do(ctx context.Context, d time.Duration) error {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		if !p.wallTime {
			signals.Held(ctx, 0) // it took nothing from the pool: its wait is not work
		}
		return ErrGone
	}
	n := p.busy.Add(1)
	if f := p.Slowdown(); f != 1 {
		d = time.Duration(float64(d) * f)
	}
	if p.alpha != 0 || p.beta != 0 {
		m := float64(n)
		d = time.Duration(float64(d) * (1 + p.alpha*(m-1) + p.beta*m*(m-1)))
	}
	start := time.Now()
	p.hold(d)
	held := time.Since(start)
	p.worked.Add(int64(held))
	p.busy.Add(-1)
	<-p.slots
	if !p.wallTime {
		signals.Held(ctx, held)
	}
	return nil
}

// hold sleeps for d. A timer fires late (tens of µs to a millisecond under
// load), and capacity is stated in exact costs: so it sleeps d less the
// timer's average lateness.
func (p *Pool) hold(d time.Duration) {
	late := time.Duration(p.overshoot.Load())
	want := max(d-late, 0)
	start := time.Now()
	time.Sleep(want)
	got := time.Since(start) - want
	p.overshoot.Store(int64(late + (got-late)/16))
}
