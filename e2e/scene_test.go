package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/internal/pgtest"
	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/internal/testsrv"
	"github.com/brownout/brownout/load"
)

// sceneConfig is the replicas' file: two services. The search's signals
// are pushed by its app; its spelling falls back to off, so that an app
// at its defaults shows as a move. The shop's come from Prometheus (%s:
// its URL), which scrapes both shop-demo instances; second in the file,
// its loop starts half a tick after the search's.
const sceneConfig = `tick: 1s
services:
  - name: search
    targets:
      - {signal: latency.p99, target: 1s}
    features:
      - {name: suggestions}
      - {name: spelling, default: false}
    sources:
      push: {window: 5s}
  - name: shop
    targets:
      - {signal: latency.p99, target: 300ms}
      - {signal: reject.ratio, target: "0.01", dim_only: true}
    features:
      - {name: recommendations, cost: 8}
      - {name: reviews, cost: 3}
      - {name: gallery, cost: 2}
    sources:
      promql: {url: %s, range: 10s}
`

const (
	shopSvc   = "/services/shop"
	searchSvc = "/services/search"
)

// shopSample is what a shop's provider held at a moment
// (/api/demo/state).
type shopSample struct {
	at           time.Time
	shop         int
	levels       map[string]float64
	mode, reason string
}

// searchSample is the search's levels as a replica served them.
type searchSample struct {
	at      time.Time
	replica string
	levels  map[string]float64
}

// sceneLog is the sampler's record.
type sceneLog struct {
	mu     sync.Mutex
	shops  []shopSample
	search []searchSample
}

// sample reads both shops' levels and both replicas' search levels every
// 100 ms until ctx ends. A replica that is down is skipped.
func (l *sceneLog) sample(ctx context.Context, shops []string, reps []*replica) {
	c := http.Client{Timeout: time.Second}
	get := func(url string, v any) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(v)
	}
	for ctx.Err() == nil {
		for i, addr := range shops {
			var st struct {
				Levels       map[string]float64
				Mode, Reason string
			}
			if err := get("http://"+addr+"/api/demo/state", &st); err == nil {
				l.mu.Lock()
				l.shops = append(l.shops, shopSample{time.Now(), i, st.Levels, st.Mode, st.Reason})
				l.mu.Unlock()
			}
		}
		for _, r := range reps {
			var st haState
			if err := get("http://"+r.addr+searchSvc+"/v1/state", &st); err == nil {
				levels := map[string]float64{}
				for _, f := range st.Features {
					levels[f.Name] = f.Level
				}
				l.mu.Lock()
				l.search = append(l.search, searchSample{time.Now(), r.name, levels})
				l.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// shopsBetween returns the shops' samples from from to to.
func (l *sceneLog) shopsBetween(from, to time.Time) []shopSample {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []shopSample
	for _, s := range l.shops {
		if !s.at.Before(from) && !s.at.After(to) {
			out = append(out, s)
		}
	}
	return out
}

// lastStateBefore returns the last state on the stream l whose step came
// before at.
func lastStateBefore(l *streamLog, at time.Time) (haState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last haState
	found := false
	for i, e := range l.events {
		var s haState
		if strings.HasPrefix(e, "state ") && json.Unmarshal([]byte(l.data[i]), &s) == nil && s.Time.Before(at) {
			last, found = s, true
		}
	}
	return last, found
}

// eventsOf reads the events of the service under prefix at r.
func eventsOf(r *replica, prefix string) ([]api.Event, error) {
	var ev struct{ Events []api.Event }
	err := getJSON(r.url()+prefix+"/v1/events", &ev)
	return ev.Events, err
}

// full says whether every level is 1.
func full(levels map[string]float64) bool {
	for _, l := range levels {
		if l != 1 {
			return false
		}
	}
	return len(levels) > 0
}

// TestFleetScene: the fleet on real servers, in one scene. Two brownoutd
// replicas on a real PostgreSQL serve two services: the shop — two
// shop-demo instances (--service shop) whose signals a real Prometheus
// scrapes and the replicas query — and the search — an app in this
// process (the root package, Options.Daemons and Service) pushing a
// healthy load. The shops overloaded: the shop dims, at both instances.
// An operator's override written at the follower; then the shop's leader
// SIGKILLed mid-overload: the follower leads within 5 s, from the levels
// last published (a "leader" event in the events, the leader's change in
// the follower's stream, which goes on with the cluster's epoch), never
// full brightness nor the defaults at the shops, the override intact, an
// ETag of before the kill good after it; the killed replica back serves
// the store's state as soon as it says ready, and follows. Then
// PostgreSQL restarted: while it is down, writes answer 503 problem+json,
// reads and OFREP 200 with the levels held, the leader says stale, the
// shops hold their levels marked stale; back, a replica leads each
// service, the override is there, the shops and the search's app are
// current again, writes answer 200. Throughout, the search never moved:
// at its app and at both replicas its levels are full whenever read, its
// history is full at every tick, and its events have no move.
func TestFleetScene(t *testing.T) {
	if race.Enabled {
		t.Skip("timing-sensitive: make test runs it without -race")
	}
	if testing.Short() {
		t.Skip("a one-minute scene on real servers")
	}
	began := time.Now()
	shopBin, daemonBin := build(t)
	srv := pgtest.StartServer(t)
	shops := []string{testsrv.FreeAddr(t), testsrv.FreeAddr(t)}
	prom := testsrv.StartPrometheus(t, shops...)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "brownoutd.yaml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil, sceneConfig, prom), 0o644))
	h := &haRig{t: t, bin: daemonBin, cfg: cfg, store: srv.DSN}
	a, b := h.start("a"), h.start("b")
	reps := []*replica{a, b}
	var shopProcs []*proc
	for i, addr := range shops {
		p := start(t, shopBin, "serve", "--listen", addr, "--state", filepath.Join(dir, fmt.Sprintf("shop%d", i)),
			"--brownoutd", a.url()+","+b.url(), "--service", "shop", "--brownoutd-no-push", "--trusted-proxies", "127.0.0.1")
		waitOK(t, "http://"+addr+"/healthz", p)
		shopProcs = append(shopProcs, p)
	}
	search := startAppWith(t, []string{a.url(), b.url()}, appConfig{Service: "search", Instance: "search-1",
		Features: []string{"suggestions", "spelling"}, Latency: 5 * time.Millisecond, Workers: 2})
	defer func() {
		if t.Failed() {
			for _, r := range h.reps {
				t.Logf("replica %s:\n%s", r.name, r.p.out)
			}
			for i, p := range shopProcs {
				t.Logf("shop %d:\n%s", i, p.out)
			}
			t.Logf("search app:\n%s", search.log)
		}
	}()
	t.Logf("set up in %v", time.Since(began).Round(10*time.Millisecond))

	var log sceneLog
	sctx, stopSampling := context.WithCancel(context.Background())
	var sampling sync.WaitGroup
	sampling.Go(func() { log.sample(sctx, shops, reps) })
	defer sampling.Wait()
	defer stopSampling()

	lead, others, _ := h.leaderOf(shopSvc, 10*time.Second)
	follower := others[0]
	searchLead, _, _ := h.leaderOf(searchSvc, 10*time.Second)
	t.Logf("the shop: %s leads, %s follows; the search: %s leads", lead.name, follower.name, searchLead.name)
	require.True(t, search.until(10*time.Second, func(s appSample) bool {
		return s.following != "" && s.mode != "stale" && full(s.levels)
	}), "the search's app follows a replica: %+v", search.now())
	searchLive := time.Now()

	// The overload: product pages at 1.6× each shop's all-on capacity.
	octx, stopLoad := context.WithCancel(context.Background())
	var loading sync.WaitGroup
	for _, addr := range shops {
		loading.Go(func() {
			load.Run(octx, load.Config{Target: "http://" + addr, Users: 20000, Skip: time.Second,
				Phases: []load.Phase{{Name: "overload", Rate: 256, Duration: 3 * time.Minute}},
				Mix:    []load.Kind{{Name: "page", Share: 1, Path: "/api/products/7"}},
				Addr:   func(u int) string { return fmt.Sprintf("10.%d.%d.%d", u>>16&255, u>>8&255, u&255) }})
		})
	}
	defer loading.Wait()
	defer stopLoad()
	overloaded := time.Now()
	shopsDimmed := func() bool {
		for _, addr := range shops {
			l, _, err := shopLevels("http://" + addr)
			if err != nil || l["recommendations"] >= 1 {
				return false
			}
		}
		return true
	}
	took, ok := until(30*time.Second, func() bool {
		s, err := lead.stateAt(shopSvc)
		return err == nil && s.level("recommendations") < 1 && shopsDimmed()
	})
	require.True(t, ok, "the overload dims the shop, at both instances")
	dimmed := time.Now()
	t.Logf("overload to both shops dimmed: %v", took.Round(10*time.Millisecond))

	// An override, written at the follower: both shops serve it.
	status, body := follower.write("PUT", shopSvc+"/v1/features/gallery/override", `{"level":0.5,"ttl":"10m","reason":"incident 42"}`)
	require.Equal(t, 200, status, "%v", body)
	assert.Equal(t, true, body["applied"])
	_, ok = until(5*time.Second, func() bool {
		for _, addr := range shops {
			if l, _, err := shopLevels("http://" + addr); err != nil || l["gallery"] != 0.5 {
				return false
			}
		}
		return true
	})
	require.True(t, ok, "both shops serve the override")
	overridden := time.Now()

	// One generation, one ETag at both replicas: the epoch is the
	// cluster's.
	var etag string
	var etagGen uint64
	_, ok = until(5*time.Second, func() bool {
		sl, err1 := lead.stateAt(shopSvc)
		sf, err2 := follower.stateAt(shopSvc)
		if err1 != nil || err2 != nil || sl.Generation != sf.Generation {
			return false
		}
		_, el, _ := lead.bulk(shopSvc, "")
		_, ef, _ := follower.bulk(shopSvc, "")
		etag, etagGen = ef, sf.Generation
		return el == ef && el != ""
	})
	require.True(t, ok, "the replicas give one ETag for one generation")
	stream := &streamLog{}
	fctx, stopFollowing := context.WithCancel(context.Background())
	defer stopFollowing()
	var following sync.WaitGroup
	following.Go(func() { followAt(fctx, follower, shopSvc, stream) })

	// The shop's leader SIGKILLed mid-overload.
	before, err := follower.stateAt(shopSvc)
	require.NoError(t, err)
	killed := time.Now()
	lead.p.kill()
	newLead, _, _ := h.leaderOf(shopSvc, 10*time.Second)
	takeover := time.Since(killed)
	t.Logf("SIGKILL of %s: %s leads the shop after %v", lead.name, newLead.name, takeover.Round(10*time.Millisecond))
	assert.Less(t, takeover, 5*time.Second, "the follower leads within 5 s")
	require.Equal(t, follower, newLead)
	if searchLead == lead {
		next, _, _ := h.leaderOf(searchSvc, 10*time.Second)
		t.Logf("the search's leader was %s too: %s leads it %v after the kill", lead.name, next.name, time.Since(killed).Round(10*time.Millisecond))
	}
	after, err := newLead.stateAt(shopSvc)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after.Generation, before.Generation, "generations never go back")
	assert.Equal(t, before.Boot, after.Boot, "the epoch is the cluster's")
	assert.Equal(t, "incident 42", after.override("gallery"), "the override survived the kill")
	assert.Less(t, after.level("recommendations"), 1.0, "no full brightness, no defaults")
	// The new leader's first step is the law's from the last state
	// published (the follower's stream has every state it served; the
	// last stepped before the kill is the dead leader's last) and from
	// its capacity: never brighter, unless that step brightens for the
	// load it measured at the capacity it adopted — not a cold start's
	// full brightness with the capacity unknown.
	last, ok := lastStateBefore(stream, killed)
	if assert.True(t, ok, "the follower's stream had a state of the dead leader's") {
		t.Logf("the last state of %s: generation %d, brightness %.3f (%s); the first of %s: generation %d, brightness %.3f (%s: %s)",
			lead.name, last.Generation, last.Brightness, last.Action, newLead.name, after.Generation, after.Brightness, after.Action, after.Reason)
		switch {
		case !after.Time.After(killed):
			assert.Equal(t, last.Generation, after.Generation, "no step since the kill: the same state")
		case after.Action == "brighten":
			assert.NotContains(t, after.Reason, "capacity not yet known", "a brightening at the adopted capacity, not a cold start's")
		default:
			assert.LessOrEqual(t, after.Brightness, last.Brightness+1e-9, "a step that does not brighten, from the last published")
		}
		for _, f := range []string{"recommendations", "reviews"} {
			if after.Action != "brighten" {
				assert.LessOrEqual(t, after.level(f), last.level(f)+1e-9, "%s: from %.2f", f, last.level(f))
			}
		}
	}
	status, newTag, levels := newLead.bulk(shopSvc, etag)
	if after.Generation == etagGen {
		assert.Equal(t, http.StatusNotModified, status)
	} else {
		assert.Equal(t, http.StatusOK, status, "%v", levels)
		assert.NotEqual(t, etag, newTag)
		assert.Equal(t, strings.SplitN(etag, "-", 2)[0], strings.SplitN(newTag, "-", 2)[0], "an ETag of the same epoch")
	}

	// The follower's stream tells of its own lead (its replica event of
	// the next tick).
	_, ok = until(3*time.Second, func() bool {
		stream.mu.Lock()
		defer stream.mu.Unlock()
		for i := len(stream.events) - 1; i >= 0; i-- {
			if strings.HasPrefix(stream.events[i], "replica ") {
				return strings.Contains(stream.data[i], `"leader":"`+newLead.name+`"`)
			}
		}
		return false
	})
	assert.True(t, ok, "the stream names the new leader")
	stopFollowing()
	following.Wait()

	// The killed replica back: ready, it serves the store's state (not
	// its own fresh one, though its loop of the shop has not started
	// yet), and follows.
	h.start(lead.name)
	if s, err := lead.stateAt(shopSvc); assert.NoError(t, err) {
		assert.GreaterOrEqual(t, s.Generation, after.Generation, "ready, the restarted replica serves the store's state (%s)", s.Reason)
		assert.Less(t, s.level("recommendations"), 1.0, "no full brightness at the restarted replica")
		assert.Equal(t, "incident 42", s.override("gallery"), "the restarted replica serves the override")
	}
	_, ok = until(5*time.Second, func() bool {
		s, err := lead.stateAt(shopSvc)
		return err == nil && s.Cluster.Role == "follower" && s.override("gallery") == "incident 42"
	})
	assert.True(t, ok, "the restarted replica follows")

	// PostgreSQL restarted.
	srv.Stop(t)
	pgDown := time.Now()
	held, err := newLead.stateAt(shopSvc)
	require.NoError(t, err, "reads answer")
	for _, r := range reps {
		status, body = r.write("PUT", shopSvc+"/v1/features/reviews/override", `{"level":0.1,"reason":"during the outage"}`)
		assert.Equal(t, http.StatusServiceUnavailable, status, "%s: %v", r.name, body)
		assert.Equal(t, "application/problem+json", body["content-type"], r.name)
		assert.Equal(t, "urn:brownout:api:store-unavailable", body["type"], r.name)
		s, err := r.stateAt(shopSvc)
		require.NoError(t, err, "%s: reads answer", r.name)
		assert.Equal(t, held.level("recommendations"), s.level("recommendations"), "%s holds the levels", r.name)
		assert.Equal(t, "incident 42", s.override("gallery"), r.name)
		code, _, _ := r.bulk(shopSvc, "")
		assert.Equal(t, 200, code, "%s: OFREP answers", r.name)
	}
	_, stale := until(6*time.Second, func() bool {
		s, err := newLead.stateAt(shopSvc)
		return err == nil && s.Cluster.Role == "stale"
	})
	assert.True(t, stale, "the leader says stale once its lease would have ended")
	_, ok = until(5*time.Second, func() bool {
		for _, s := range log.shopsBetween(pgDown, time.Now()) {
			if s.mode == "stale" {
				return true
			}
		}
		return false
	})
	assert.True(t, ok, "the shops mark their levels stale without the store")
	for _, addr := range shops {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/products/3", nil)
		req.Header.Set("X-User-ID", "during-the-outage")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Contains(t, []int{200, 503}, resp.StatusCode, "%s: served or shed, never an error", addr)
	}
	srv.Start(t)
	pgUp := time.Now()
	back, _, _ := h.leaderOf(shopSvc, 15*time.Second)
	searchBack, _, _ := h.leaderOf(searchSvc, 15*time.Second)
	t.Logf("PostgreSQL down %v; back, %s leads the shop and %s the search after %v", pgUp.Sub(pgDown).Round(10*time.Millisecond),
		back.name, searchBack.name, time.Since(pgUp).Round(10*time.Millisecond))
	s, err := back.stateAt(shopSvc)
	require.NoError(t, err)
	assert.Equal(t, "incident 42", s.override("gallery"), "the override survived the store's restart")
	assert.Empty(t, s.override("reviews"), "no write refused while the store was down took effect")
	// The apps' waits for a current replica grew while the store was
	// down (up to 10 s).
	_, ok = until(20*time.Second, func() bool {
		for _, addr := range shops {
			var st struct{ Mode string }
			if getJSON("http://"+addr+"/api/demo/state", &st) != nil || st.Mode == "stale" {
				return false
			}
		}
		return search.now().mode != "stale"
	})
	assert.True(t, ok, "the shops and the search's app follow a current replica again")
	t.Logf("the shops and the search's app not stale %v after the store's restart", (time.Since(pgUp)).Round(10*time.Millisecond))
	releasing := time.Now()
	status, body = back.write("DELETE", shopSvc+"/v1/features/gallery/override", `{"reason":"incident 42 over"}`)
	assert.Equal(t, 200, status, "writes again: %v", body)
	if s, err := back.stateAt(shopSvc); assert.NoError(t, err) {
		assert.Greater(t, s.Generation, before.Generation, "the leader publishes after the kill and the restart")
		assert.Equal(t, before.Boot, s.Boot, "one epoch across the kill and the restart")
	}

	unloaded := time.Now()
	stopLoad()
	loading.Wait()
	stopSampling()
	sampling.Wait()
	end := time.Now()

	// At the shops, from the dimming to the end of the overload: never
	// full brightness, never the defaults; the override from when both
	// served it to its release.
	var recs []float64
	for _, s := range log.shopsBetween(dimmed, unloaded) {
		recs = append(recs, s.levels["recommendations"])
		if s.levels["recommendations"] >= 1 || strings.Contains(s.reason, "defaults") {
			t.Errorf("shop %d at %v: recommendations %.2f (%s: %s)", s.shop, s.at.Sub(overloaded).Round(time.Millisecond),
				s.levels["recommendations"], s.mode, s.reason)
		}
		if s.at.After(overridden) && s.at.Before(releasing) && s.levels["gallery"] != 0.5 {
			t.Errorf("shop %d at %v: gallery %.2f, not the override's 0.5 (%s)", s.shop, s.at.Sub(overloaded).Round(time.Millisecond),
				s.levels["gallery"], s.mode)
		}
	}
	require.NotEmpty(t, recs)
	t.Logf("the shops' recommendations under the overload, %d samples: %.2f to %.2f", len(recs), slices.Min(recs), slices.Max(recs))

	// The follower's stream across the failover: the leader's change in
	// its replica events, no end, no reauth, one epoch, growing
	// generations.
	stream.mu.Lock()
	var gens []uint64
	var leaders []string
	for i, e := range stream.events {
		kind, id, _ := strings.Cut(e, " ")
		assert.NotContains(t, []string{"shutdown", "reauth"}, kind)
		switch kind {
		case "state":
			epoch, g, _ := strings.Cut(id, "-")
			assert.Equal(t, strconv.FormatInt(before.Boot, 10), epoch, "stream id %s of the cluster's epoch", id)
			n, _ := strconv.ParseUint(g, 10, 64)
			gens = append(gens, n)
		case "replica":
			var r api.ReplicaJSON
			if assert.NoError(t, json.Unmarshal([]byte(stream.data[i]), &r)) && r.ClusterJSON != nil && r.Leader != "" &&
				(len(leaders) == 0 || leaders[len(leaders)-1] != r.Leader) {
				leaders = append(leaders, r.Leader)
			}
		}
	}
	assert.False(t, stream.ended, "the stream did not end")
	assert.True(t, slices.IsSorted(gens), "stream generations %v", gens)
	assert.Equal(t, []string{lead.name, newLead.name}, leaders, "the stream tells of the leader's change")
	stream.mu.Unlock()

	// The shop's events at the replica that took over (a follower again
	// if the other leads since the store's restart: the release reaches
	// it within a tick): the leader's change, the override.
	var events []api.Event
	_, ok = until(3*time.Second, func() bool {
		events, err = eventsOf(newLead, shopSvc)
		return err == nil && slices.ContainsFunc(events, func(e api.Event) bool { return e.Kind == "release" })
	})
	require.NoError(t, err)
	require.True(t, ok, "the release reaches the replica that took over within 3 s: %v", events)
	kinds := map[string]int{}
	var takeoverEvent *api.Event
	for _, e := range events {
		kinds[e.Kind]++
		if e.Kind == "leader" && e.Who == newLead.name && e.Time.After(killed) && takeoverEvent == nil {
			takeoverEvent = &e
		}
	}
	t.Logf("the shop's events: %v", kinds)
	if assert.NotNil(t, takeoverEvent, "a leader event for the takeover: %+v", events) {
		assert.Equal(t, "the lease of "+lead.name+" ended", takeoverEvent.Reason)
	}
	assert.Equal(t, 1, kinds["override"])
	assert.Equal(t, 1, kinds["release"])

	// The search never moved: its app's levels, the replicas', its
	// history and its events.
	var modes []string
	for _, s := range search.between(searchLive, end) {
		if !full(s.levels) || len(s.levels) != 2 {
			t.Errorf("the search's app at %v: %v (%s, following %q: %s)", s.at.Sub(overloaded).Round(time.Millisecond), s.levels, s.mode, s.following, s.reason)
		}
		modes = append(modes, fmt.Sprintf("%s on %s at %v", s.mode, h.name(s.following), s.at.Sub(overloaded).Round(100*time.Millisecond)))
	}
	t.Logf("the search's app (its times from the overload's start): %s", strings.Join(modes, ", "))
	log.mu.Lock()
	for _, s := range log.search {
		if !full(s.levels) || len(s.levels) != 2 {
			t.Errorf("the search at %s at %v: %v", s.replica, s.at.Sub(overloaded).Round(time.Millisecond), s.levels)
		}
	}
	n := len(log.search)
	log.mu.Unlock()
	var hist struct {
		Points []api.Point `json:"points"`
	}
	require.NoError(t, getJSON(newLead.url()+searchSvc+"/v1/history", &hist))
	for _, p := range hist.Points {
		if !full(p.Levels) {
			t.Errorf("the search's history at %v, generation %d: %v (%s)", p.Time, p.Generation, p.Levels, p.Mode)
		}
	}
	events, err = eventsOf(newLead, searchSvc)
	require.NoError(t, err)
	kinds = map[string]int{}
	for _, e := range events {
		kinds[e.Kind]++
		if !slices.Contains([]string{"leader", "stale", "fresh"}, e.Kind) {
			t.Errorf("the search's event: %+v", e)
		}
	}
	t.Logf("the search: full in %d reads at the replicas, %d of its app's states, %d ticks of history; its events %v",
		n, len(search.between(searchLive, end)), len(hist.Points), kinds)
	if assert.NotEmpty(t, hist.Points) {
		assert.True(t, hist.Points[0].Time.Before(dimmed) && hist.Points[len(hist.Points)-1].Time.After(pgUp),
			"the search's history covers the overload, the kill and the store's restart: from %v to %v",
			hist.Points[0].Time.Sub(overloaded), hist.Points[len(hist.Points)-1].Time.Sub(overloaded))
	}

	for _, r := range h.reps {
		assert.NotContains(t, r.p.out.String(), "panic", r.name)
	}
	for i, p := range shopProcs {
		assert.NotContains(t, p.out.String(), "panic", "shop %d", i)
	}
	t.Logf("the scene took %v", time.Since(began).Round(100*time.Millisecond))
}
