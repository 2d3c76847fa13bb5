package gate

import (
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

func TestGateCoDelAdaptiveLIFO(t *testing.T) {
	g := New(Config{Limit: LimitConfig{Initial: 1, Min: 1, Max: 1, Fixed: true},
		MaxWait: [3]time.Duration{time.Second, time.Second, time.Second}, Target: 50 * time.Millisecond, Interval: 100 * time.Millisecond})
	var d drops
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	warm := &Ticket{Class: signals.Default, Arrival: at(-1000)}
	g.Arrive(warm.Arrival, warm, d.drop)
	g.Done(warm.Arrival.Add(time.Millisecond), warm) // 1 ms per unit: the door lets them queue
	running := &Ticket{Class: signals.Default, Arrival: at(0)}
	g.Arrive(at(0), running, d.drop)
	arrive := func(from, to int) { // one every 10 ms, in time order
		for ms := from; ms <= to; ms += 10 {
			g.Arrive(at(ms), &Ticket{Class: signals.Default, Arrival: at(ms)}, d.drop)
		}
	}
	step := func(ms int) *Ticket {
		g.Done(at(ms), running)
		running = g.Next(at(ms), d.drop)
		require.NotNil(t, running, "at %d ms", ms)
		return running
	}
	// The queue holds requests from 0 ms on. At 60 ms it has not for an
	// Interval (100 ms): FIFO, MaxWait.
	arrive(0, 60)
	assert.False(t, g.Standing(signals.Default, at(60)))
	assert.Equal(t, at(0), step(60).Arrival, "FIFO")
	assert.Empty(t, d.got)
	// From 100 ms it is standing: requests older than Target (50 ms) are
	// dropped, and the newest is served first.
	arrive(70, 140)
	require.True(t, g.Standing(signals.Default, at(145)))
	require.NotEmpty(t, d.got)
	for i, why := range d.got {
		assert.Equal(t, signals.ReasonCoDel, why)
		assert.Greater(t, at(145).Sub(d.ts[i].Arrival), 50*time.Millisecond, "only requests past the target are dropped")
	}
	assert.Equal(t, at(140), step(145).Arrival, "newest first while standing")
	// Still standing until the queue empties: whatever waits is served
	// newest first within the target, or dropped.
	for ms := 150; g.Queued(signals.Default) > 0; ms += 5 {
		n := step(ms)
		assert.LessOrEqual(t, at(ms).Sub(n.Arrival), 50*time.Millisecond, "at %d ms", ms)
	}
	// Empty: the episode is over. A new queue is FIFO again.
	assert.False(t, g.Standing(signals.Default, at(300)))
	a, b := &Ticket{Class: signals.Default, Arrival: at(300)}, &Ticket{Class: signals.Default, Arrival: at(301)}
	g.Arrive(at(300), a, d.drop)
	g.Arrive(at(301), b, d.drop)
	assert.Same(t, a, step(305), "FIFO after the queue emptied")
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
