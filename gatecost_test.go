package brownout_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout"
	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/shed"
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

// TestGateChargesTheRequestCost: the one-call entry's gate counts the
// work in flight — a request is charged what the levels make it take as
// a share of a full one (dimmer.Controller.RequestCost): here a page of
// 4 ms, reviews learned at 4 ms more and pinned at half, recommendations
// (configured at a page's worth) pinned off, 1.5 of a full page's 3. A
// route table keeps the costs its routes declare; a route that only
// classifies, or a request no route matches, is charged the work.
func TestGateChargesTheRequestCost(t *testing.T) {
	for _, tc := range []struct {
		routes []shed.Route
		path   string
		want   float64
	}{
		{nil, "/", 0.5},
		{[]shed.Route{{Pattern: "/healthz", Class: signals.Sheddable}}, "/", 0.5},
		{[]shed.Route{{Pattern: "/product", Class: signals.Default}}, "/product", 0.5},
		{[]shed.Route{{Pattern: "/search", Cost: 2}}, "/search", 2},
	} {
		name := fmt.Sprintf("%d routes, %s", len(tc.routes), tc.path)
		b, err := brownout.New(brownout.Options{Features: features(), Routes: tc.routes, Domain: domain()})
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
		require.InDelta(t, 0.5, ctl.RequestCost(), 0.05, name)
		if tc.want == 0.5 {
			tc.want = ctl.RequestCost()
		}
		assert.InDelta(t, tc.want, inFlight(b, tc.path), 1e-6, "%s: the cost in flight", name)
		require.NoError(t, b.Close())
	}
}

// TestFleetGateChargesTheDaemonsRequestCost: in fleet mode an instance's
// gate charges what the daemon's model law says a request takes at the
// levels it publishes (its state's request_cost).
func TestFleetGateChargesTheDaemonsRequestCost(t *testing.T) {
	ctl, err := dimmer.New(dimmer.Config{Targets: []dimmer.Target{{Signal: signals.LatencyP99, Target: 0.3}}, Features: features()})
	require.NoError(t, err)
	a, err := api.New(api.Config{Controller: ctl, Loopback: true})
	require.NoError(t, err)
	defer a.Close()
	daemon := httptest.NewServer(a.Handler())
	defer daemon.Close()
	_, err = ctl.Pin("reviews", 0.5, time.Hour, "test")
	require.NoError(t, err)
	_, err = ctl.Pin("recommendations", 0, time.Hour, "test")
	require.NoError(t, err)
	now := time.Now()
	var st *dimmer.State
	for range 30 {
		now = now.Add(time.Second)
		st = ctl.Step(now, tallied(now))
	}
	a.Publish(st)
	want := ctl.RequestCost()
	require.InDelta(t, 0.5, want, 0.05)

	b, err := brownout.New(brownout.Options{Daemon: daemon.URL, Domain: domain(), Instance: "app-1", NoPush: true})
	require.NoError(t, err)
	_, stop := run(t, b)
	defer stop()
	require.Eventually(t, func() bool { return math.Abs(b.Remote().RequestCost()-want) < 1e-6 }, 10*time.Second, 10*time.Millisecond, "the daemon's charge followed")
	assert.InDelta(t, want, inFlight(b, "/"), 1e-6, "the cost in flight")
}

// inFlight is the cost b's gate holds in flight while one request to path
// is in the handler.
func inFlight(b *brownout.Brownout, path string) float64 {
	in, release := make(chan struct{}), make(chan struct{})
	app := httptest.NewServer(b.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		in <- struct{}{}
		<-release
	})))
	defer app.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.Get(app.URL + path); err == nil {
			resp.Body.Close()
		}
	}()
	<-in
	cost := b.Shedder().Stats().InFlight
	close(release)
	<-done
	return cost
}
