package fleet

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// TestPushWorkMixedFleet: during a rolling upgrade some instances push
// "work" and some (an older Pusher) do not, while every one pushes its
// tallies. The source's Work must not be the new instances' work beside
// the whole fleet's tallies: a feature's tally would count more requests
// than "every request" (the model law reads the shares and the reach as
// tally ÷ Work.N), and the mean work would be the new instances' alone.
// Work is given only when it covers every instance whose tallies it sums.
func TestPushWorkMixedFleet(t *testing.T) {
	c := &clock{t: t0}
	src := newPushSource(c)
	start := t0.Add(-time.Minute)
	oldRec, newRec := signals.NewRecorder(signals.Config{}), signals.NewRecorder(signals.Config{})
	require.NoError(t, oldRec.Features("recs"))
	require.NoError(t, newRec.Features("recs"))
	withoutWork := func(rec *signals.Recorder, id string, now time.Time) []byte {
		b := pushOf(rec, now, signals.DefaultBuckets())
		b.V, b.Instance, b.Start, b.Time, b.Work = 1, id, start.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), nil
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		return raw
	}
	push := func() {
		mustPush(t, src, withoutWork(oldRec, "old", c.t))
		mustPush(t, src, body(t, newRec, "new", start, c.t))
	}
	push()
	for _, rec := range []*signals.Recorder{oldRec, newRec} {
		for range 10 { // product pages
			tally(rec, "recs", true, 100*time.Millisecond)
		}
		for range 10 { // carts: in no tally
			var rt signals.RequestTally
			require.True(t, rec.BeginTally(&rt, context.Background()))
			rec.EndTally(&rt, 10*time.Millisecond)
		}
	}
	c.t = c.t.Add(time.Second)
	push()
	snap, err := src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	require.Len(t, snap.Tallies, 1)
	n := snap.Tallies[0].On.N + snap.Tallies[0].Off.N
	require.Equal(t, int64(20), n, "both instances' product pages")
	if snap.Work.N != 0 {
		t.Fatalf("Work %+v covers one instance of two, beside tallies of both (%d requests evaluated recs): "+
			"the reach reads %d/%d", snap.Work, n, n, snap.Work.N)
	}
}
