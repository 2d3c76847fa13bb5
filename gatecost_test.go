package brownout_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout"
	"github.com/brownout/brownout/signals"
)

// tallied is a second's snapshot of 100 requests a second: a page of 4 ms,
// half of them with reviews (4 ms more), none with recommendations.
func tallied(now time.Time) signals.Snapshot {
	var on, off, none signals.Moments
	for i := range 100 {
		if i%2 == 0 {
			on.Add(0.008)
		} else {
			off.Add(0.004)
		}
		none.Add(0.004 + 0.004*float64(1-i%2))
	}
	work := on
	work.Merge(off)
	s := signals.Snapshot{Time: now, Window: 5 * time.Second, RecentSpan: time.Second, Work: work,
		Tallies: []signals.Tally{{Feature: "recommendations", Off: none}, {Feature: "reviews", On: on, Off: off}}}
	s.Recent.Arrived, s.Recent.Completed = 100, 100
	s.Set(signals.ArrivalRate, 100)
	s.Set(signals.LatencyP99, 0.02)
	return s
}

// TestGateChargesTheRequestCost: on the model law the one-call entry's
// gate counts the work in flight — a request is charged what the levels
// make it take (dimmer.Controller.RequestCost), here about 1.5 all-off
// requests with reviews learned at a page's worth and pinned at half,
// recommendations off — and on
// the search law a request is one.
func TestGateChargesTheRequestCost(t *testing.T) {
	for _, law := range []string{brownout.LawModel, brownout.LawSearch} {
		b, err := brownout.New(brownout.Options{Features: features(), Law: law, Domain: domain()})
		require.NoError(t, err)
		ctl := b.Controller()
		_, err = ctl.Pin("reviews", 0.5, time.Hour, "test")
		require.NoError(t, err)
		_, err = ctl.Pin("recommendations", 0, time.Hour, "test")
		require.NoError(t, err)
		now := time.Now()
		for range 30 {
			now = now.Add(time.Second)
			ctl.Step(now, tallied(now))
		}
		want := 1.0
		if law == brownout.LawModel {
			want = 1.5
		}
		require.InDelta(t, want, ctl.RequestCost(), 0.1, "%s law", law)

		in, release := make(chan struct{}), make(chan struct{})
		app := httptest.NewServer(b.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			in <- struct{}{}
			<-release
		})))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.Get(app.URL); err == nil {
				resp.Body.Close()
			}
		}()
		<-in
		assert.InDelta(t, ctl.RequestCost(), b.Shedder().Stats().InFlight, 1e-9, "%s law: the cost in flight", law)
		close(release)
		<-done
		app.Close()
		require.NoError(t, b.Close())
	}
}
