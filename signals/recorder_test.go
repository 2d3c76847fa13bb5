package signals

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecorderSnapshotRatesAndMissing(t *testing.T) {
	rec := NewRecorder(Config{GoodWithin: 200 * time.Millisecond})
	s := rec.Snapshot(t0)
	_, ok := s.Get(LatencyP99)
	assert.False(t, ok, "no request yet: latency is missing, not zero")
	assert.False(t, s.Has(SojournMin))

	now := t0
	for sec := range 5 {
		for i := range 100 {
			now = t0.Add(time.Duration(sec)*time.Second + time.Duration(i)*10*time.Millisecond)
			rec.Arrive(Default)
			start := rec.Start(now)
			d := 50 * time.Millisecond
			if i%10 == 0 {
				d = 300 * time.Millisecond // slower than GoodWithin
			}
			rec.Done(Default, start, start.Add(d), false, time.Time{})
		}
		rec.Reject(Sheddable, ReasonShedLevel)
		rec.Snapshot(now)
	}
	s = rec.Snapshot(t0.Add(5 * time.Second))
	arr, _ := s.Get(ArrivalRate)
	good, _ := s.Get(Goodput)
	rej, _ := s.Get(RejectRate)
	assert.InDelta(t, 100, arr, 1, "arrivals per second")
	assert.InDelta(t, 90, good, 1, "one in ten too slow")
	assert.InDelta(t, 1, rej, 0.01)
	assert.Equal(t, uint64(5), s.Classes[Sheddable].Rejected[ReasonShedLevel])
	p99, _ := s.Duration(LatencyP99)
	assert.InEpsilon(t, float64(300*time.Millisecond), float64(p99), 0.02)

	// After a long quiet spell the window empties: rates go to zero and
	// latency becomes missing again.
	s = rec.Snapshot(t0.Add(time.Minute))
	arr, _ = s.Get(ArrivalRate)
	assert.Zero(t, arr)
	assert.False(t, s.Has(LatencyP99))
}

func TestParseKeyRoundTrip(t *testing.T) {
	for k := range NumKeys {
		got, err := ParseKey(k.String())
		assert.NoError(t, err)
		assert.Equal(t, k, got)
	}
	_, err := ParseKey("latency.p98")
	assert.ErrorContains(t, err, `unknown signal "latency.p98"`)
}

func TestRecorderGateSignals(t *testing.T) {
	rec := NewRecorder(Config{})
	now := time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
	snap := rec.Snapshot(now)
	for _, k := range []Key{GateBusy, GateUtilization, GateQueued, GateLimit} {
		assert.False(t, snap.Has(k), "%s: no gate registered, no previous snapshot", k)
	}
	rec.SetGate(func() GateReading { return GateReading{Limit: 8, InFlight: 6, Queued: 3} })

	// Since the snapshot: 10 arrivals; 4 start at once, 3 after waiting,
	// 2 refused by the gate, 1 refused by the cascade before it.
	for i := range 10 {
		rec.Arrive(Default)
		switch {
		case i < 4:
			rec.Queued(Default, 0, now)
		case i < 7:
			rec.Queued(Default, 5*time.Millisecond, now)
		case i < 9:
			rec.Reject(Default, ReasonMaxWait)
		default:
			rec.Reject(Default, ReasonShedLevel)
		}
	}
	snap = rec.Snapshot(now.Add(time.Second))
	busy, ok := snap.Get(GateBusy)
	require.True(t, ok)
	assert.InDelta(t, 5.0/9, busy, 1e-9, "5 of the 9 arrivals that reached the gate found no room")
	u, _ := snap.Get(GateUtilization)
	assert.Equal(t, 0.75, u)
	q, _ := snap.Get(GateQueued)
	assert.Equal(t, 3.0, q)
	l, _ := snap.Get(GateLimit)
	assert.Equal(t, 8.0, l)

	// The next snapshot covers only what happened since the last one.
	rec.Arrive(Default)
	rec.Queued(Default, 0, now)
	snap = rec.Snapshot(now.Add(2 * time.Second))
	busy, _ = snap.Get(GateBusy)
	assert.Equal(t, 0.0, busy, "the gate had room for the one arrival since")
	rec.SetGate(nil)
	assert.False(t, rec.Snapshot(now.Add(3*time.Second)).Has(GateLimit))

	// Without a gate — another limiter in front, whose refusals the
	// middleware counts — no arrival found a gate full: gate.busy is
	// missing, not the share refused.
	for range 10 {
		rec.Arrive(Default)
		rec.Reject(Default, ReasonConcurrency)
	}
	snap = rec.Snapshot(now.Add(4 * time.Second))
	assert.False(t, snap.Has(GateBusy), "no gate: no gate.busy")
	rr, _ := snap.Get(RejectRatio)
	assert.Positive(t, rr, "the refusals still count in reject.ratio")
}

// Rates count what arrived since the window's oldest slot was opened, over
// the time since then — the time that slot's counts were taken, not the
// slot's nominal start. A controller's ticker drifts against the slots'
// grid: read a little after a boundary one period and a little before the
// next, the nominal start is up to a slot older than the counts, and a
// steady 100 arrivals a second read as 80 (4 slots of counts over 5 of
// time) now and then.
func TestRatesUnderJitteredSnapshots(t *testing.T) {
	rec := NewRecorder(Config{Latency: WindowConfig{Slices: 5}})
	// Snapshots about a second apart, swinging around the slot
	// boundaries: 0.98 s or 1.02 s.
	next := t0.Add(990 * time.Millisecond)
	var lo, hi float64 = 1e9, 0
	for i := range 60 * 100 {
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		rec.Arrive(Default)
		if now.Before(next) {
			continue
		}
		s := rec.Snapshot(now)
		if now.Sub(t0) > 10*time.Second {
			arr, _ := s.Get(ArrivalRate)
			lo, hi = min(lo, arr), max(hi, arr)
		}
		d := 980 * time.Millisecond
		if i%2 == 0 {
			d = 1020 * time.Millisecond
		}
		next = next.Add(d)
	}
	assert.InDelta(t, 100, lo, 3, "the lowest windowed arrival rate (steady 100/s)")
	assert.InDelta(t, 100, hi, 3, "the highest")
}
