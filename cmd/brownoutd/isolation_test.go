package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/signals/fleet"
)

// isolationConfig is two services on one daemon, each with its own push
// tokens: a, whose faults the tests inject, and b, which is overloaded
// for a while and dims, then recovers.
const isolationConfig = `listen: 127.0.0.1:8080
tick: 1s
services:
  - name: a
    features: [{name: banner}, {name: ads}]
    sources: {push: {max_instances: 60}}
  - name: b
    targets: [{signal: latency.p99, target: 300ms}]
    features: [{name: recommendations}, {name: reviews}, {name: gallery}]
`

// bSchedule is b's load: within target, then three times over it, then
// within again.
var bSchedule = []phase{{100 * time.Millisecond, 20 * time.Second}, {900 * time.Millisecond, 50 * time.Second}, {100 * time.Millisecond, time.Hour}}

// isolationRun runs the two services for four virtual minutes with a's
// fault and returns b's history and a's last state. Faults: "none" (a's
// five instances push every second), "failing" (a's source is a scrape
// whose targets never answer: every tick waits its whole tick for it),
// "flooding" (a's five instances push every 100 ms, ten times as often,
// and overloaded).
func isolationRun(t *testing.T, fault string) (b []api.Point, a api.StateJSON) {
	synctest.Test(t, func(t *testing.T) {
		sources := map[string]source{}
		if fault == "failing" {
			src, err := fleet.NewScrapeSource(fleet.ScrapeConfig{Targets: []string{"http://10.0.0.9:8081/metrics"}, Client: hanging})
			require.NoError(t, err)
			sources["a"] = src
		}
		r := newRig(t, isolationConfig, sources)
		r.start()
		ctx, cancel := context.WithCancel(context.Background())
		c := client(r.rt)
		startRigLoad(ctx, t, c, "b", "", "b-1", time.Second, bSchedule)
		switch fault {
		case "none":
			for i := range 5 {
				startRigLoad(ctx, t, c, "a", "", fmt.Sprintf("a-%d", i), time.Second, []phase{{50 * time.Millisecond, time.Hour}})
			}
		case "flooding":
			for i := range 5 {
				startRigLoad(ctx, t, c, "a", "", fmt.Sprintf("a-%d", i), 100*time.Millisecond, []phase{{2 * time.Second, time.Hour}})
			}
		}
		time.Sleep(4 * time.Minute)
		get := func(path string, v any) {
			w := httptest.NewRecorder()
			r.rt.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080"+path, nil))
			require.Equal(t, http.StatusOK, w.Code, path)
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), v))
		}
		var h struct{ Points []api.Point }
		get("/services/b/v1/history?since=15m", &h)
		get("/services/a/v1/state", &a)
		b = h.Points
		cancel()
		r.stop()
		synctest.Wait()
	})
	return b, a
}

// TestServiceLevelsIgnoreAnotherServicesFaults: on one daemon, while
// service a's source fails (every tick of a waits its whole tick for
// targets that never answer) or a's pushers flood (ten times its pushes),
// service b's every tick — its time, its readings, its levels, its
// mode, its generation — is what it is while a is healthy: b dims under
// its overload and recovers on the same ticks to the same levels. In
// virtual time (testing/synctest), so that the runs are comparable tick
// by tick; a shared loop, a shared lock or a shared source would move
// b's ticks or readings.
func TestServiceLevelsIgnoreAnotherServicesFaults(t *testing.T) {
	base, aBase := isolationRun(t, "none")
	require.GreaterOrEqual(t, len(base), 230, "b ticked every second")
	dimmed := false
	for _, p := range base {
		dimmed = dimmed || p.Levels["recommendations"] == 0
	}
	require.True(t, dimmed, "b dims under its overload (else the comparison says little)")
	assert.Equal(t, map[string]float64{"recommendations": 1, "reviews": 1, "gallery": 1}, base[len(base)-1].Levels, "and recovers")
	require.True(t, aBase.Sources[0].OK, "a is healthy in the base run")

	for _, fault := range []string{"failing", "flooding"} {
		t.Run(fault, func(t *testing.T) {
			got, a := isolationRun(t, fault)
			switch fault {
			case "failing":
				assert.False(t, a.Sources[0].OK, "a's source fails")
				assert.Equal(t, "stale", a.Mode, "a goes stale")
			case "flooding":
				require.True(t, a.Sources[0].OK)
				assert.Len(t, a.Sources[0].Instances, 5)
				assert.Less(t, a.Features[0].Level, 1.0, "a takes its flood, and dims")
			}
			require.Equal(t, len(base), len(got), "b ticked as often")
			for i := range base {
				w, g := base[i], got[i]
				if !assert.True(t, w.Time.Equal(g.Time), "tick %d at %v, not %v", i, g.Time, w.Time) {
					break
				}
				assert.Equal(t, w.Levels, g.Levels, "tick %d (%v): b's levels", i, w.Time)
				assert.Equal(t, w.Readings, g.Readings, "tick %d: b's readings", i)
				assert.Equal(t, w.Mode, g.Mode, "tick %d: b's mode", i)
				assert.Equal(t, w.Generation, g.Generation, "tick %d: b's generation", i)
			}
		})
	}
}

// isolationLoad is the real-time isolation's daemon and load: services a
// and b ticking every 100 ms; b's fifty instances push every second,
// within b's target; a's, by fault, push every second too ("none"),
// every 100 ms ("flooding": ten times the pushes), or a scrapes a target
// that never answers ("failing": every tick of a waits its whole tick).
func isolationLoad(tb testing.TB, fault string) (string, fleetLoad) {
	aSource := "{push: {}}"
	if fault == "failing" {
		aSource = "{scrape: {targets: [" + hangingTarget(tb) + "]}}"
	}
	src := `tick: 100ms
services:
  - name: a
    features: [{name: banner}, {name: ads}]
    sources: ` + aSource + `
  - name: b
    targets: [{signal: latency.p99, target: 300ms}]
    features: [{name: recommendations}, {name: reviews}, {name: gallery}]
`
	b := pushGroup{Service: "b", Instances: 50, Interval: time.Second, Latency: 50 * time.Millisecond, Width: 400}
	l := fleetLoad{Groups: []pushGroup{b}}
	switch fault {
	case "none":
		l.Groups = append(l.Groups, pushGroup{Service: "a", Instances: 50, Interval: time.Second, Latency: 50 * time.Millisecond, Width: 400})
	case "flooding":
		l.Groups = append(l.Groups, pushGroup{Service: "a", Instances: 50, Interval: 100 * time.Millisecond, Latency: 2 * time.Second, Width: 400})
	}
	return src, l
}

// maxTickLag is the bound on a service's tick lag p99 (issue 32's, for
// 20 services of 50 pushing instances each).
const maxTickLag = 10 * time.Millisecond

// TestServiceTicksIgnoreAnotherServicesFaults: in real time, on one
// daemon, while service a's source hangs on every tick or a's fifty
// pushers push ten times as often, service b's ticks run on time — its
// tick lag p99 stays under 10 ms — and its levels stay where its own
// signals hold them (full, auto, every instance live), as while a is
// healthy. The pushers run in a child process. This machine is shared:
// an idle Go process's 100 ms ticker here runs up to tens of ms late now
// and then, so a case whose lag is over the bound runs again, three times
// at most (a shared loop or lock would put b's every tick a's 100 ms
// late, every time); its levels must hold on every run. Timing-sensitive:
// it skips under -race (make test runs it without).
func TestServiceTicksIgnoreAnotherServicesFaults(t *testing.T) {
	if race.Enabled {
		t.Skip("timing-sensitive: make test runs it without -race")
	}
	if testing.Short() {
		t.Skip("a real-time load of 15 s or more")
	}
	for _, fault := range []string{"none", "failing", "flooding"} {
		var lags []time.Duration
		for attempt := 0; attempt < 3; attempt++ {
			src, l := isolationLoad(t, fault)
			run := runLoad(t, src, l, 2*time.Second, 3*time.Second, "a", "b")
			b, a := run.states["b"], run.states["a"]
			lags = append(lags, run.lagP99["b"])
			t.Logf("a %s: b's tick lag p99 %v over %d ticks (a's %v); the daemon's CPU %.0f%%; pushes %v, p99 %v, %d bytes each; an idle process's ticks meanwhile: p99 %v, max %v; load average %s",
				fault, run.lagP99["b"], run.ticks["b"], run.lagP99["a"], 100*run.cpu.Seconds()/run.elapsed.Seconds(), run.pushes.Status, run.pushes.P99, run.pushes.BodyBytes,
				run.control.P99, run.control.Max, run.loadAvg)
			require.NotEmpty(t, run.history["b"])
			for _, p := range run.history["b"] {
				require.Equal(t, map[string]float64{"recommendations": 1, "reviews": 1, "gallery": 1}, p.Levels, "a %s: b's levels at %v", fault, p.Time)
				require.Equal(t, "auto", p.Mode, "a %s: b's mode at %v", fault, p.Time)
			}
			require.NotEmpty(t, b.Sources)
			assert.True(t, b.Sources[0].OK, "a %s: b's source", fault)
			live := 0
			for _, in := range b.Sources[0].Instances {
				if in.OK {
					live++
				}
			}
			assert.Equal(t, 50, live, "a %s: every instance of b is live", fault)
			switch fault {
			case "failing":
				assert.False(t, a.Sources[0].OK, "a's source fails")
			case "flooding":
				assert.Less(t, a.Features[0].Level, 1.0, "a takes its flood, and dims")
			}
			if run.lagP99["b"] <= maxTickLag {
				break
			}
		}
		assert.LessOrEqual(t, slices.Min(lags), maxTickLag, "a %s: b's tick lag p99 (runs: %v)", fault, lags)
	}
}
