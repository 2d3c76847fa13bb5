package signals

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
