package gate

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

var t0 = time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)

type drops struct {
	got []signals.Reason
	ts  []*Ticket
}

func (d *drops) drop(t *Ticket, why signals.Reason) {
	d.got = append(d.got, why)
	d.ts = append(d.ts, t)
}

func fixed(n float64) Config {
	return Config{Limit: LimitConfig{Initial: n, Min: n, Max: n, Fixed: true}}
}

func TestGateFastPathQueueAndPriority(t *testing.T) {
	g := New(fixed(2))
	var d drops
	a, b := &Ticket{Class: signals.Default, Arrival: t0}, &Ticket{Class: signals.Default, Arrival: t0}
	dec, _ := g.Arrive(t0, a, d.drop)
	assert.Equal(t, Admitted, dec)
	dec, _ = g.Arrive(t0, b, d.drop)
	assert.Equal(t, Admitted, dec)
	assert.Equal(t, 2.0, g.InFlight())

	shed := &Ticket{Class: signals.Sheddable, Arrival: t0}
	crit := &Ticket{Class: signals.Critical, Arrival: t0.Add(time.Millisecond)}
	dec, _ = g.Arrive(t0, shed, d.drop)
	assert.Equal(t, Queued, dec)
	dec, _ = g.Arrive(t0.Add(time.Millisecond), crit, d.drop)
	assert.Equal(t, Queued, dec)
	assert.Nil(t, g.Next(t0, d.drop), "full")

	now := t0.Add(10 * time.Millisecond)
	g.Done(now, a)
	assert.Same(t, crit, g.Next(now, d.drop), "critical first, though it came later")
	g.Done(now, b)
	assert.Same(t, shed, g.Next(now, d.drop))
	assert.Empty(t, d.got)
}

func TestGateTimeBoundAndSweep(t *testing.T) {
	g := New(Config{Limit: LimitConfig{Initial: 1, Min: 1, Max: 1, Fixed: true},
		MaxWait: [3]time.Duration{time.Second, 100 * time.Millisecond, 50 * time.Millisecond}})
	var d drops
	// Teach the gate a service time of 10 ms per unit.
	warm := &Ticket{Class: signals.Default, Arrival: t0}
	g.Arrive(t0, warm, d.drop)
	g.Done(t0.Add(10*time.Millisecond), warm)

	now := t0.Add(time.Second)
	busy := &Ticket{Class: signals.Default, Arrival: now}
	g.Arrive(now, busy, d.drop)
	queued := 0
	var refused signals.Reason
	for i := range 20 {
		dec, why := g.Arrive(now, &Ticket{Class: signals.Default, Arrival: now}, d.drop)
		if dec == Queued {
			queued++
			continue
		}
		refused = why
		assert.Equal(t, Refused, dec, "request %d", i)
		break
	}
	// K ≈ μ × wait: 100 ms at 10 ms each.
	assert.InDelta(t, 9, queued, 1, "default class: about 100 ms of work may queue")
	assert.Equal(t, signals.ReasonMaxWait, refused)
	// An expensive request is refused sooner than a cheap one.
	dec, _ := g.Arrive(now, &Ticket{Class: signals.Sheddable, Arrival: now, Cost: 10}, d.drop)
	assert.Equal(t, Refused, dec, "10 units of sheddable work cannot wait 50 ms")

	// Nobody finishes: the waiters exceed their max wait and are swept.
	later := now.Add(150 * time.Millisecond)
	assert.Nil(t, g.Next(later, d.drop))
	assert.Len(t, d.got, queued)
	for _, why := range d.got {
		assert.Contains(t, []signals.Reason{signals.ReasonMaxWait, signals.ReasonCoDel}, why)
	}
	assert.Equal(t, 0, g.Queued(signals.Default))
}

// rig drives a gate with a server of one slot that completes a request
// every `service`: arrivals are scripted per class, every decision is
// recorded.
type rig struct {
	g        *Gate
	now      time.Time
	running  *Ticket
	service  time.Duration
	next     time.Time // the running request's end
	d        drops
	dropAt   []time.Time                   // when each of d's drops happened
	admitted [signals.NumClasses][]*Ticket // with their admission time in Start
	refused  [signals.NumClasses][]signals.Reason
}

func newRig(cfg Config, service time.Duration) *rig {
	cfg.Limit = LimitConfig{Initial: 1, Min: 1, Max: 1, Fixed: true}
	return &rig{g: New(cfg), now: t0, service: service}
}

func (r *rig) start(tk *Ticket) {
	r.running, r.next = tk, r.now.Add(r.service)
	r.admitted[tk.Class] = append(r.admitted[tk.Class], tk)
}

func (r *rig) arrive(c signals.Class) {
	tk := &Ticket{Class: c, Arrival: r.now}
	switch dec, why := r.g.Arrive(r.now, tk, r.drop); dec {
	case Admitted:
		r.start(tk)
	case Refused:
		r.refused[c] = append(r.refused[c], why)
	}
}

func (r *rig) drop(tk *Ticket, why signals.Reason) {
	r.d.drop(tk, why)
	r.dropAt = append(r.dropAt, r.now)
	r.refused[tk.Class] = append(r.refused[tk.Class], why)
}

// advance moves the clock to `to` in steps of 1 ms, completing the
// running request when its time is up and starting the next.
func (r *rig) advance(to time.Time) {
	for r.now.Before(to) {
		r.now = r.now.Add(time.Millisecond)
		if r.running != nil && !r.now.Before(r.next) {
			r.g.Done(r.now, r.running)
			r.running = nil
		}
		if r.running == nil {
			if tk := r.g.Next(r.now, r.drop); tk != nil {
				r.start(tk)
			}
		}
	}
}

// TestGateCoDelCutsAClassOverCapacity: a class that brings twice what the
// server completes is cut by CoDel once its queue stands: the requests
// past Target are dropped, the newest are served first and within Target
// while it stands; when the overload ends and the queue empties, it is
// served in order again.
func TestGateCoDelCutsAClassOverCapacity(t *testing.T) {
	r := newRig(Config{MaxWait: [3]time.Duration{time.Second, time.Second, time.Second}, Target: 50 * time.Millisecond, Interval: 100 * time.Millisecond}, 10*time.Millisecond)
	end := t0.Add(20 * time.Second)
	for r.now.Before(end) { // a default request every 5 ms: twice the throughput
		r.arrive(signals.Default)
		r.advance(r.now.Add(5 * time.Millisecond))
	}
	require.True(t, r.g.Standing(signals.Default, r.now), "twice the throughput for 20 s: standing")
	late := r.admitted[signals.Default][len(r.admitted[signals.Default])-500:]
	for _, tk := range late {
		assert.LessOrEqual(t, tk.Start.Sub(tk.Arrival), 50*time.Millisecond, "while it stands, served within Target")
	}
	require.NotEmpty(t, r.d.got)
	for i := len(r.d.got) / 2; i < len(r.d.got); i++ {
		assert.Equal(t, signals.ReasonCoDel, r.d.got[i])
		assert.Greater(t, r.dropAt[i].Sub(r.d.ts[i].Arrival), 50*time.Millisecond, "only requests past Target are dropped")
	}
	// The overload ends: the queue empties, the episode is over, and a new
	// queue is served in order again.
	r.advance(r.now.Add(2 * time.Second))
	assert.Zero(t, r.g.Queued(signals.Default))
	assert.False(t, r.g.Standing(signals.Default, r.now))
	for range 3 {
		r.arrive(signals.Default)
	}
	first := r.admitted[signals.Default][len(r.admitted[signals.Default])-1]
	a := r.g.queues[signals.Default].front()
	r.advance(r.now.Add(10 * time.Millisecond))
	assert.Same(t, a, r.running, "in order after the queue emptied (the first was %v)", first.Arrival)
}

// TestGateCriticalWithinCapacityIsNeverCut: critical requests bring 95 %
// of what the server completes and default ones twice as much again.
// The critical queue stands now and then, but critical is within
// capacity: it is never refused, and never waits past its MaxWait; the
// excess is default work, refused — and no default request is admitted
// in a second in which a critical one is refused.
func TestGateCriticalWithinCapacityIsNeverCut(t *testing.T) {
	r := newRig(Config{}, 10*time.Millisecond) // package defaults: CoDel 100 ms / 500 ms
	end := t0.Add(60 * time.Second)
	rng := uint64(7)
	for r.now.Before(end) {
		// Poisson arrivals in 1 ms steps: critical 95 a second (the server
		// completes 100), default 200.
		rng = rng*6364136223846793005 + 1442695040888963407
		u := float64(rng>>11) / (1 << 53)
		switch {
		case u < 0.095:
			r.arrive(signals.Critical)
		case u < 0.295:
			r.arrive(signals.Default)
		}
		r.advance(r.now.Add(time.Millisecond))
	}
	assert.Empty(t, r.refused[signals.Critical], "critical within capacity: never refused")
	for _, tk := range r.admitted[signals.Critical] {
		require.LessOrEqual(t, tk.Start.Sub(tk.Arrival), 800*time.Millisecond)
	}
	assert.NotEmpty(t, r.refused[signals.Default], "the excess is default work")
	t.Logf("critical admitted %d, default admitted %d, refused %d", len(r.admitted[signals.Critical]), len(r.admitted[signals.Default]), len(r.refused[signals.Default]))
}

func TestGateDeadlines(t *testing.T) {
	g := New(fixed(1))
	var d drops
	dec, why := g.Arrive(t0, &Ticket{Class: signals.Critical, Arrival: t0, Deadline: t0}, d.drop)
	assert.Equal(t, Refused, dec)
	assert.Equal(t, signals.ReasonDeadline, why, "already past: refused at no cost")

	busy := &Ticket{Arrival: t0}
	g.Arrive(t0, busy, d.drop)
	soon := &Ticket{Class: signals.Critical, Arrival: t0, Deadline: t0.Add(5 * time.Millisecond)}
	dec, _ = g.Arrive(t0, soon, d.drop)
	require.Equal(t, Queued, dec)
	now := t0.Add(10 * time.Millisecond)
	g.Done(now, busy)
	assert.Nil(t, g.Next(now, d.drop), "the only waiter's deadline passed: dropped before it starts")
	assert.Equal(t, []signals.Reason{signals.ReasonDeadline}, d.got)
}

// TestGateAssuredShare: under a standing overload of the default class,
// sheddable requests get their assured share of the admitted cost — not
// none (strict priority's starvation), not more — and with the share
// turned off they get nothing.
func TestGateAssuredShare(t *testing.T) {
	for _, tc := range []struct {
		name  string
		share float64
		want  float64
	}{{"default 5 %", 0, 0.05}, {"20 %", 0.2, 0.2}, {"off", -1, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fixed(4)
			cfg.Assured[signals.Sheddable] = tc.share
			cfg.MaxWait = [3]time.Duration{time.Hour, time.Hour, time.Hour}
			cfg.Target, cfg.Interval = time.Hour, time.Hour
			g := New(cfg)
			var d drops
			now := t0
			var running []*Ticket
			admitted := map[signals.Class]float64{}
			arrive := func(c signals.Class, cost float64) {
				tk := &Ticket{Class: c, Cost: cost, Arrival: now}
				if dec, _ := g.Arrive(now, tk, d.drop); dec == Admitted {
					running = append(running, tk)
					admitted[c] += cost
				}
			}
			for range 5000 {
				// Always more default work queued than the gate can take,
				// and a trickle of cheap sheddable requests.
				for i := 0; i < 20 && g.Queued(signals.Default) < 20; i++ {
					arrive(signals.Default, 1)
				}
				if g.Queued(signals.Sheddable) < 20 {
					arrive(signals.Sheddable, 0.05)
				}
				now = now.Add(time.Millisecond)
				g.Done(now, running[0])
				running = running[1:]
				for tk := g.Next(now, d.drop); tk != nil; tk = g.Next(now, d.drop) {
					running = append(running, tk)
					admitted[tk.Class] += tk.Cost
				}
			}
			require.Positive(t, g.Queued(signals.Default), "the overload held")
			share := admitted[signals.Sheddable] / (admitted[signals.Sheddable] + admitted[signals.Default])
			assert.InDelta(t, tc.want, share, 0.01, "sheddable's share of the admitted cost")
		})
	}
}

// TestGateAssuredShareNeverAheadOfCritical: the sheddable class's assured
// share jumps the default queue, never a waiting critical request.
func TestGateAssuredShareNeverAheadOfCritical(t *testing.T) {
	cfg := fixed(1)
	cfg.Assured[signals.Sheddable] = 0.5
	cfg.MaxWait = [3]time.Duration{time.Hour, time.Hour, time.Hour}
	g := New(cfg)
	var d drops
	running := &Ticket{Class: signals.Default, Arrival: t0}
	g.Arrive(t0, running, d.drop)
	now := t0
	for i := range 200 {
		now = now.Add(time.Millisecond)
		for _, c := range []signals.Class{signals.Critical, signals.Default, signals.Sheddable} {
			g.Arrive(now, &Ticket{Class: c, Arrival: now}, d.drop)
		}
		g.Done(now, running)
		running = g.Next(now, d.drop)
		require.NotNil(t, running, "step %d", i)
		if running.Class != signals.Critical {
			assert.Zero(t, g.Queued(signals.Critical), "step %d: %v admitted while a critical request waits", i, running.Class)
		}
	}
	assert.Empty(t, d.got)
}

// TestGateProbeEndsWhenItHurts: a probe of the limit halves what the gate
// admits; when the load is within capacity and a request has waited half
// its class's MaxWait, the queue is the probe's doing and the probe ends
// at once. While a class is over capacity the queue is the load's, and the
// probe goes on.
func TestGateProbeEndsWhenItHurts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		waited time.Duration
		over   bool
		ends   bool
	}{
		{"within capacity, waited half of MaxWait", 150 * time.Millisecond, false, true},
		{"within capacity, waited less", 140 * time.Millisecond, false, false},
		{"over capacity", 150 * time.Millisecond, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New(Config{}) // default class MaxWait 300 ms
			g.limit.warm.Store(true)
			g.limit.cold = false
			g.limit.startProbe(t0)
			require.True(t, g.limit.probing)
			g.queues[signals.Default].push(&Ticket{Class: signals.Default, Arrival: t0})
			g.queued.Add(1)
			g.dem.over[signals.NumClasses-1] = tc.over
			now := t0.Add(tc.waited)
			require.True(t, g.limit.isDue(now))
			g.Update(now)
			assert.Equal(t, tc.ends, !g.limit.probing)
		})
	}
}

// TestGateCutShortProbeNeverLowersTheBaseline: a probe that ends before
// its cohort is done (it hurt, or ran out of time) counts the members
// still running with the time they have run so far — a lower bound of
// the cohort's latency. Ended a few milliseconds after its last
// admissions, that bound is far under the service time, and taken for
// the baseline it read every window at the limit as queueing: the limit
// collapsed under the worker count. It may raise the baseline, never
// lower it; a whole cohort moves it either way.
func TestGateCutShortProbeNeverLowersTheBaseline(t *testing.T) {
	const base = 0.010 // seconds per cost unit
	probe := func(t *testing.T, latency time.Duration, finished int, end time.Duration) *Gate {
		g := New(Config{})
		g.limit.warm.Store(true)
		g.limit.cold = false
		g.limit.base = base
		g.limit.set(20)
		g.limit.startProbe(t0)
		var ts []*Ticket
		for i := range 10 { // the cohort: half the limit, admitted a millisecond apart
			tk := &Ticket{Class: signals.Default, Cost: 1}
			require.True(t, g.TryAdmit(tk, t0.Add(time.Duration(i)*time.Millisecond)))
			ts = append(ts, tk)
		}
		for _, tk := range ts[:finished] {
			g.Release(tk.Start.Add(latency), tk)
		}
		g.limit.hurts = true // ends at once, with what it has
		g.limit.endProbe(t0.Add(end))
		require.False(t, g.limit.probing)
		return g
	}
	t.Run("cut short, reading under the baseline", func(t *testing.T) {
		g := probe(t, 3*time.Millisecond, 3, 12*time.Millisecond)
		assert.Equal(t, base, g.limit.base, "a lower bound under the baseline leaves it")
	})
	t.Run("cut short, reading over the baseline", func(t *testing.T) {
		g := probe(t, 40*time.Millisecond, 3, 45*time.Millisecond)
		assert.Greater(t, g.limit.base, base, "a lower bound over the baseline raises it")
	})
	t.Run("whole cohort, under the baseline", func(t *testing.T) {
		g := probe(t, 4*time.Millisecond, 10, 20*time.Millisecond)
		assert.InDelta(t, math.Sqrt(base*0.004), g.limit.base, 1e-9, "a whole cohort moves it half way in log")
	})
}
