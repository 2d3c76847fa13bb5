package api

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-feature/go-sdk-contrib/providers/ofrep"
	"github.com/open-feature/go-sdk/openfeature"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/signals"
)

var t0 = time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)

func newController(t testing.TB) *dimmer.Controller {
	t.Helper()
	c, err := dimmer.New(dimmer.Config{
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
		Segments: []dimmer.Segment{{Name: "vip", Offset: 0.2}},
	})
	require.NoError(t, err)
	return c
}

// dim steps the controller under pressure until recommendations is
// partly dimmed.
func dim(t *testing.T, c *dimmer.Controller) *dimmer.State {
	t.Helper()
	now := t0
	for range 30 {
		now = now.Add(time.Second)
		var s signals.Snapshot
		s.Time = now
		s.Set(signals.LatencyP99, 0.95)
		st := c.Step(now, s)
		if l := st.LevelAt(0, -1); l > 0 && l < 1 {
			return st
		}
	}
	t.Fatal("never partly dimmed")
	return nil
}

type fixture struct {
	ctl *dimmer.Controller
	api *API
	srv *httptest.Server
	now time.Time
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	f := &fixture{now: t0}
	if cfg.Controller == nil {
		cfg.Controller = newController(t)
	}
	f.ctl = cfg.Controller
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return f.now }
	}
	a, err := New(cfg)
	require.NoError(t, err)
	f.api = a
	f.srv = httptest.NewServer(a.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) do(t *testing.T, method, path, body string, hdr ...string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" || (method != http.MethodGet && method != http.MethodHead) {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

func TestOFREPSingle(t *testing.T) {
	f := newFixture(t, Config{})
	st := dim(t, f.ctl)
	lvl := st.LevelAt(0, -1)
	for _, user := range []string{"u1", "u2", "u3", "u4", "u5", "u6"} {
		resp, m := f.do(t, "POST", "/ofrep/v1/evaluate/flags/recommendations", `{"context":{"targetingKey":"`+user+`"}}`)
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, provider.On("recommendations", user, lvl), m["value"], "the in-process provider's bucket for %s", user)
		assert.Equal(t, "SPLIT", m["reason"])
		md := m["metadata"].(map[string]any)
		assert.Equal(t, lvl, md["level"])
		assert.Equal(t, "auto", md["mode"])
		assert.EqualValues(t, st.Generation, md["generation"])
	}
	resp, m := f.do(t, "POST", "/ofrep/v1/evaluate/flags/recommendations.level", `{"context":{"targetingKey":"u1","segment":"vip"}}`)
	require.Equal(t, 200, resp.StatusCode)
	assert.Greater(t, m["value"], lvl, "the VIP segment's level")
	assert.Equal(t, "TARGETING_MATCH", m["reason"])

	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"unknown flag", "/ofrep/v1/evaluate/flags/nope", `{"context":{"targetingKey":"u"}}`, 404, "FLAG_NOT_FOUND"},
		{"malformed", "/ofrep/v1/evaluate/flags/reviews", `{"context":`, 400, "PARSE_ERROR"},
		{"no context", "/ofrep/v1/evaluate/flags/reviews", `{}`, 400, "INVALID_CONTEXT"},
		{"context not an object", "/ofrep/v1/evaluate/flags/reviews", `{"context":[1]}`, 400, "INVALID_CONTEXT"},
		{"targeting key a number", "/ofrep/v1/evaluate/flags/reviews", `{"context":{"targetingKey":7}}`, 400, "INVALID_CONTEXT"},
		{"two values", "/ofrep/v1/evaluate/flags/reviews", `{"context":{}} {}`, 400, "PARSE_ERROR"},
		{"oversized", "/ofrep/v1/evaluate/flags/reviews", `{"context":{"x":"` + strings.Repeat("a", maxBody) + `"}}`, 413, "PARSE_ERROR"},
	} {
		resp, m := f.do(t, "POST", tc.path, tc.body)
		assert.Equal(t, tc.status, resp.StatusCode, tc.name)
		assert.Equal(t, tc.code, m["errorCode"], tc.name)
		assert.NotEmpty(t, m["errorDetails"], tc.name)
	}
}

func TestOFREPBulkETag(t *testing.T) {
	f := newFixture(t, Config{EventStreams: []EventStream{{Type: "sse", URL: "/ofrep/v1/events", InactivityDelaySec: 120}}})
	body := `{"context":{"targetingKey":"u1"}}`
	resp, m := f.do(t, "POST", "/ofrep/v1/evaluate/flags", body)
	require.Equal(t, 200, resp.StatusCode)
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	flags := m["flags"].([]any)
	keys := []string{}
	for _, fl := range flags {
		fm := fl.(map[string]any)
		keys = append(keys, fm["key"].(string))
		assert.Contains(t, fm, "value", "always a value")
	}
	assert.Equal(t, []string{"recommendations", "recommendations.level", "reviews", "reviews.level", provider.FeaturesFlag}, keys)
	assert.Equal(t, "sse", m["eventStreams"].([]any)[0].(map[string]any)["type"])

	resp, _ = f.do(t, "POST", "/ofrep/v1/evaluate/flags", body, "If-None-Match", etag)
	assert.Equal(t, http.StatusNotModified, resp.StatusCode, "same state, same context")
	resp, _ = f.do(t, "POST", "/ofrep/v1/evaluate/flags", `{"context":{"targetingKey":"u2"}}`, "If-None-Match", etag)
	assert.Equal(t, 200, resp.StatusCode, "another context is another answer")
	dim(t, f.ctl)
	resp, _ = f.do(t, "POST", "/ofrep/v1/evaluate/flags", body, "If-None-Match", etag)
	assert.Equal(t, 200, resp.StatusCode, "the state changed")

	// A restarted daemon (another boot epoch) never answers 304 to an old tag.
	f2 := newFixture(t, Config{Controller: f.ctl})
	f2.api.boot++
	resp, _ = f2.do(t, "POST", "/ofrep/v1/evaluate/flags", body, "If-None-Match", resp.Header.Get("ETag"))
	assert.Equal(t, 200, resp.StatusCode)

	resp, m = f.do(t, "POST", "/ofrep/v1/evaluate/flags", `nope`)
	assert.Equal(t, 400, resp.StatusCode)
	assert.Equal(t, "PARSE_ERROR", m["errorCode"])
}

func TestOFREPAuth(t *testing.T) {
	f := newFixture(t, Config{EvalTokens: map[string]string{"shop": "eval-token-0123456789"}})
	body := `{"context":{"targetingKey":"u1"}}`
	resp, _ := f.do(t, "POST", "/ofrep/v1/evaluate/flags/reviews", body)
	assert.Equal(t, 401, resp.StatusCode)
	resp, _ = f.do(t, "POST", "/ofrep/v1/evaluate/flags/reviews", body, "Authorization", "Bearer wrong")
	assert.Equal(t, 401, resp.StatusCode)
	resp, _ = f.do(t, "POST", "/ofrep/v1/evaluate/flags/reviews", body, "Authorization", "Bearer eval-token-0123456789")
	assert.Equal(t, 200, resp.StatusCode)
	resp, _ = f.do(t, "POST", "/ofrep/v1/evaluate/flags", body, "X-API-Key", "eval-token-0123456789")
	assert.Equal(t, 200, resp.StatusCode)
}

// TestOFREPGoProvider: the OpenFeature OFREP provider for Go, a real
// client, gets the in-process provider's answers.
func TestOFREPGoProvider(t *testing.T) {
	f := newFixture(t, Config{EvalTokens: map[string]string{"shop": "eval-token-0123456789"}})
	st := dim(t, f.ctl)
	p := ofrep.NewProvider(f.srv.URL, ofrep.WithBearerToken("eval-token-0123456789"))
	require.NoError(t, openfeature.SetNamedProviderAndWait("ofrep-test", p))
	c := openfeature.NewClient("ofrep-test")
	ctx := context.Background()
	for _, user := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		ec := openfeature.NewEvaluationContext(user, nil)
		d, err := c.BooleanValueDetails(ctx, "recommendations", !provider.On("recommendations", user, st.LevelAt(0, -1)), ec)
		require.NoError(t, err)
		assert.Equal(t, provider.On("recommendations", user, st.LevelAt(0, -1)), d.Value, user)
		assert.Equal(t, openfeature.SplitReason, d.Reason)
	}
	lvl, err := c.FloatValue(ctx, "recommendations.level", -1, openfeature.NewEvaluationContext("a", nil))
	require.NoError(t, err)
	assert.Equal(t, st.LevelAt(0, -1), lvl)
	_, err = c.BooleanValueDetails(ctx, "nope", true, openfeature.NewEvaluationContext("a", nil))
	assert.ErrorContains(t, err, "FLAG_NOT_FOUND")
}

func TestOperatorWrites(t *testing.T) {
	dir := t.TempDir()
	tok := "operator-token-0123456789"
	f := newFixture(t, Config{OperatorTokens: map[string]string{"alice": tok}, StateDir: dir})
	auth := []string{"Authorization", "Bearer " + tok}

	resp, _ := f.do(t, "PUT", "/v1/features/reviews/override", `{"level":0.25,"ttl":"30m","reason":"<script>alert(1)</script>"}`)
	assert.Equal(t, 401, resp.StatusCode, "no token")
	resp, _ = f.do(t, "PUT", "/v1/features/reviews/override", `{"level":0.25,"ttl":"30m"}`, "Authorization", "Bearer nope")
	assert.Equal(t, 401, resp.StatusCode, "wrong token")
	gen := f.ctl.State().Generation
	for _, tc := range []struct{ name, path, body string }{
		{"level over 1", "/v1/features/reviews/override", `{"level":1.5,"ttl":"30m"}`},
		{"negative level", "/v1/features/reviews/override", `{"level":-0.1}`},
		{"no level", "/v1/features/reviews/override", `{"ttl":"30m"}`},
		{"negative ttl", "/v1/features/reviews/override", `{"level":0.5,"ttl":"-5m"}`},
		{"absurd ttl", "/v1/features/reviews/override", `{"level":0.5,"ttl":"9000h"}`},
		{"bad ttl", "/v1/features/reviews/override", `{"level":0.5,"ttl":"soon"}`},
		{"unknown field", "/v1/features/reviews/override", `{"level":0.5,"lvl":1}`},
		{"unknown feature", "/v1/features/nope/override", `{"level":0.5}`},
		{"malformed", "/v1/features/reviews/override", `{"level":`},
	} {
		resp, m := f.do(t, "PUT", tc.path, tc.body, auth...)
		assert.Contains(t, []int{400, 404}, resp.StatusCode, tc.name)
		assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), tc.name)
		assert.NotEmpty(t, m["detail"], tc.name)
	}
	assert.Equal(t, gen, f.ctl.State().Generation, "nothing changed on rejected writes")
	resp, _ = f.do(t, "PUT", "/v1/shadow", `{"on":"yes"}`, auth...)
	assert.Equal(t, 400, resp.StatusCode)

	resp, m := f.do(t, "PUT", "/v1/features/reviews/override", `{"level":0.25,"ttl":"30m","reason":"<script>alert(1)</script>"}`, auth...)
	require.Equal(t, 200, resp.StatusCode, "%v", m)
	resp, _ = f.do(t, "POST", "/v1/freeze", `{"reason":"11.11 war room"}`, auth...)
	require.Equal(t, 200, resp.StatusCode)

	_, m = f.do(t, "GET", "/v1/state", "")
	assert.EqualValues(t, 1, m["v"])
	assert.Equal(t, true, m["frozen"])
	feats := m["features"].([]any)
	rv := feats[1].(map[string]any)
	assert.Equal(t, "reviews", rv["name"])
	assert.Equal(t, 0.25, rv["level"])
	assert.Equal(t, "<script>alert(1)</script>", rv["override"].(map[string]any)["reason"], "kept as text")

	_, m = f.do(t, "GET", "/v1/events", "")
	ev := m["events"].([]any)
	require.Len(t, ev, 2)
	assert.Equal(t, "alice", ev[0].(map[string]any)["who"])
	assert.Equal(t, "override", ev[0].(map[string]any)["kind"])
	assert.Equal(t, "freeze", ev[1].(map[string]any)["kind"])

	// One daemon per state dir: a second one is refused while the first
	// holds it.
	_, err := New(Config{Controller: newController(t), StateDir: dir})
	assert.ErrorContains(t, err, "in use by another process")

	// A restart: the override (its end in wall time) and the freeze come back.
	f.api.Close()
	f.now = f.now.Add(10 * time.Minute)
	ctl2 := newController(t)
	f2 := newFixture(t, Config{Controller: ctl2, StateDir: dir, Now: func() time.Time { return t0.Add(10 * time.Minute) }})
	defer f2.api.Close()
	fs, ok := ctl2.State().Feature("reviews")
	require.True(t, ok)
	assert.Equal(t, 0.25, fs.Level)
	require.NotNil(t, fs.Pin)
	assert.Equal(t, t0.Add(30*time.Minute), fs.Pin.Until)
	assert.Equal(t, dimmer.Frozen, ctl2.State().Mode)

	resp, _ = f.do(t, "DELETE", "/v1/features/reviews/override", "", auth...)
	assert.Equal(t, 200, resp.StatusCode)
	resp, _ = f.do(t, "POST", "/v1/unfreeze", "", auth...)
	assert.Equal(t, 400, resp.StatusCode, "a write carries a JSON body, {} at least")
	resp, _ = f.do(t, "POST", "/v1/unfreeze", "{}", auth...)
	assert.Equal(t, 200, resp.StatusCode)
	resp, m = f.do(t, "PUT", "/v1/shadow", `{"on":true}`, auth...)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, true, m["shadow"])
}

func TestWritesWithoutToken(t *testing.T) {
	f := newFixture(t, Config{})
	resp, m := f.do(t, "POST", "/v1/freeze", "{}")
	assert.Equal(t, 403, resp.StatusCode, "no token and not loopback: writes are off")
	assert.Contains(t, m["detail"], "loopback")
	f = newFixture(t, Config{Loopback: true})
	resp, _ = f.do(t, "POST", "/v1/freeze", "{}")
	assert.Equal(t, 200, resp.StatusCode, "loopback only: a local operator")
	_, m = f.do(t, "GET", "/v1/events", "")
	assert.Equal(t, "local", m["events"].([]any)[0].(map[string]any)["who"])
}

func TestUnwritableStateDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes anywhere")
	}
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o500))
	defer os.Chmod(dir, 0o700)
	_, err := New(Config{Controller: newController(t), StateDir: dir})
	assert.Error(t, err, "refused at start, not at the first override")
}

func TestCorruptStateFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "operator.json"), []byte("{not json"), 0o644))
	f := newFixture(t, Config{StateDir: dir, Loopback: true})
	matches, _ := filepath.Glob(filepath.Join(dir, "operator.json.corrupt-*"))
	assert.Len(t, matches, 1, "moved aside")
	resp, _ := f.do(t, "POST", "/v1/freeze", "{}")
	assert.Equal(t, 200, resp.StatusCode)
	b, err := os.ReadFile(filepath.Join(dir, "operator.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"frozen": true`)
}

func TestHistoryAndEvents(t *testing.T) {
	f := newFixture(t, Config{})
	now := t0
	for i := range 40 {
		now = now.Add(time.Second)
		var s signals.Snapshot
		s.Time = now
		s.Set(signals.LatencyP99, 0.2+float64(i)/20)
		s.Set(signals.Goodput, 100)
		s.Set(signals.Throughput, 110)
		s.Set(signals.SojournP99, 0.05)
		prev := f.ctl.State()
		st := f.ctl.Step(now, s)
		f.api.Record(now, s, st, time.Millisecond)
		if st != prev {
			f.api.noteChange(prev, st)
		}
	}
	_, m := f.do(t, "GET", "/v1/history?since="+t0.Add(30*time.Second).Format(time.RFC3339), "")
	pts := m["points"].([]any)
	assert.Len(t, pts, 10)
	p := pts[0].(map[string]any)
	assert.Equal(t, 100.0, p["goodput"])
	assert.Contains(t, p["levels"], "recommendations")
	assert.Contains(t, p["readings"], "latency.p99")
	assert.InDelta(t, 0.2+30.0/20, p["latency_p99"], 1e-9, "the p99 is charted whether or not it is a target")
	assert.Equal(t, 0.05, p["sojourn_p99"], "so is the queue's sojourn")
	resp, _ := f.do(t, "GET", "/v1/history?since=yesterday", "")
	assert.Equal(t, 400, resp.StatusCode)
	_, m = f.do(t, "GET", "/v1/events", "")
	kinds := map[string]bool{}
	for _, e := range m["events"].([]any) {
		kinds[e.(map[string]any)["kind"].(string)] = true
	}
	assert.True(t, kinds["move"], "a big level move is an event: %v", kinds)
	_, m = f.do(t, "GET", "/v1/state", "")
	assert.EqualValues(t, 40, m["tick"].(map[string]any)["ticks"])
	law := m["law"].(map[string]any)
	assert.Equal(t, map[string]any{"kind": "model", "high": 0.85, "low": 0.7, "setpoint": 0.775, "cascade_at": 1.5, "max_shed": 2.0}, law, "the band the dial draws")
}

// TestContentTypesAndEmptyBodies: media types parsed, not prefixed; an
// empty chunked body is an empty body, refused where a body is required
// (freeze: {} at least) and taken where it is optional (a release); "v"
// may ride along.
func TestContentTypesAndEmptyBodies(t *testing.T) {
	f := newFixture(t, Config{Loopback: true})
	for ct, want := range map[string]int{"application/json": 200, "application/json; charset=utf-8": 200,
		"APPLICATION/JSON": 200, "application/jsonfoo": 415, "text/plain": 415} {
		resp, _ := f.do(t, "POST", "/ofrep/v1/evaluate/flags/reviews", `{"context":{"targetingKey":"u"}}`, "Content-Type", ct)
		assert.Equal(t, want, resp.StatusCode, ct)
	}
	chunked := func(method, path, body string) int {
		req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, 400, chunked("POST", "/v1/freeze", ""), "chunked, empty")
	assert.Equal(t, 200, chunked("POST", "/v1/freeze", "{}"), "chunked")
	f.ctl.Pin("reviews", 0.5, time.Hour, "test")
	assert.Equal(t, 200, chunked("DELETE", "/v1/features/reviews/override", ""), "a release's body is optional")
	resp, m := f.do(t, "PUT", "/v1/features/reviews/override", `{"v":1,"level":0.5}`)
	assert.Equal(t, 200, resp.StatusCode, "%v", m)
	assert.Equal(t, true, m["saved"])
	resp, _ = f.do(t, "PUT", "/v1/shadow", `{"on":true,"reason":"`+strings.Repeat("x", 600)+`"}`)
	assert.Equal(t, 400, resp.StatusCode, "reasons are bounded everywhere")
}

func TestReleaseWithoutOverride(t *testing.T) {
	f := newFixture(t, Config{Loopback: true})
	resp, m := f.do(t, "DELETE", "/v1/features/reviews/override", "")
	assert.Equal(t, 404, resp.StatusCode)
	assert.Contains(t, m["type"], "no-override")
	resp, m = f.do(t, "DELETE", "/v1/features/nope/override", "")
	assert.Equal(t, 404, resp.StatusCode)
	assert.Contains(t, m["type"], "unknown-feature")
}

// contrast steps ctl for n ticks whose tallies contrast recommendations:
// 20 requests on, about 5 ms slower than 20 off.
func contrast(ctl *dimmer.Controller, n int) {
	now := time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
	for k := range n {
		now = now.Add(time.Second)
		var on, off signals.Moments
		for j := range 20 {
			on.Add(0.015 + 0.001*float64(j%3))
			off.Add(0.010 + 0.001*float64((j+k)%3))
		}
		ctl.Step(now, signals.Snapshot{Time: now, Tallies: []signals.Tally{{Feature: "recommendations", On: on, Off: off}}})
	}
}

// TestStateShowsLearnedCosts: /v1/state shows a feature's cost once the
// controller has contrasted it, and nothing for one it has not.
func TestStateShowsLearnedCosts(t *testing.T) {
	ctl := newController(t)
	a, err := New(Config{Controller: ctl})
	require.NoError(t, err)
	defer a.Close()
	contrast(ctl, 10)
	st := a.State()
	require.NotNil(t, st.Features[0].Cost)
	assert.InDelta(t, 0.5, st.Features[0].Cost.Value, 0.1)
	assert.Equal(t, 10, st.Features[0].Cost.Contrasted)
	assert.Nil(t, st.Features[1].Cost, "reviews was never contrasted")
}

// TestStateSaysTheLaw: /v1/state names the control law — the model law,
// dimmer's only one — and its band as the controller's config sets it,
// following a reload that moves it.
func TestStateSaysTheLaw(t *testing.T) {
	ctl := newController(t)
	a, err := New(Config{Controller: ctl})
	require.NoError(t, err)
	defer a.Close()
	law := a.State().Law
	assert.Equal(t, LawModel, law.Kind)
	assert.Equal(t, 0.85, law.High)
	assert.Equal(t, 0.7, law.Low)
	cfg := ctl.Config()
	cfg.High, cfg.Low, cfg.Setpoint = 0.9, 0.6, 0.75
	require.NoError(t, ctl.Reconfigure(cfg))
	law = a.State().Law
	assert.Equal(t, LawJSON{Kind: LawModel, High: 0.9, Low: 0.6, Setpoint: 0.75, CascadeAt: law.CascadeAt, MaxShed: law.MaxShed}, law,
		"after a reload that moves the band: still the model law")
}

// TestWriteJSONNeverEmpty: a value JSON cannot encode is a 500 problem,
// never a 200 with an empty body.
func TestWriteJSONNeverEmpty(t *testing.T) {
	w := httptest.NewRecorder()
	writeJSON(w, http.StatusOK, map[string]float64{"x": math.Inf(1)})
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	assert.NotEmpty(t, w.Body.String())
	assert.NotEmpty(t, marshal(map[string]float64{"x": math.NaN()}))
}

// TestMetricsShowLearnedCosts: a contrasted feature's cost and its
// standard error are metrics; an uncontrasted one has none.
func TestMetricsShowLearnedCosts(t *testing.T) {
	ctl := newController(t)
	reg := prometheus.NewRegistry()
	a, err := New(Config{Controller: ctl, Registerer: reg})
	require.NoError(t, err)
	defer a.Close()
	contrast(ctl, 5)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]int{}
	for _, mf := range mfs {
		got[mf.GetName()] = len(mf.GetMetric())
	}
	assert.Equal(t, 1, got["brownout_feature_cost_ratio"], "recommendations only")
	assert.Equal(t, 1, got["brownout_feature_cost_stderr_ratio"])
}

// TestMetricsShowTheRequestCost: the gates' charge of a request is a
// metric — 1 before the law's first step; with recommendations learned at
// half a page and pinned off, under 1 (and what the state says).
func TestMetricsShowTheRequestCost(t *testing.T) {
	ctl := newController(t)
	reg := prometheus.NewRegistry()
	a, err := New(Config{Controller: ctl, Registerer: reg})
	require.NoError(t, err)
	defer a.Close()
	charge := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "brownout_request_cost_ratio" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no brownout_request_cost_ratio")
		return 0
	}
	assert.Equal(t, 1.0, charge(), "before the law's first step")
	_, err = ctl.Pin("recommendations", 0, time.Hour, "test")
	require.NoError(t, err)
	now := time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
	for k := range 10 {
		now = now.Add(time.Second)
		var on, off signals.Moments
		for j := range 20 {
			on.Add(0.015 + 0.001*float64(j%3))
			off.Add(0.010 + 0.001*float64((j+k)%3))
		}
		s := signals.Snapshot{Time: now, Tallies: []signals.Tally{{Feature: "recommendations", On: on, Off: off}}}
		s.Set(signals.LatencyP99, 0.05)
		ctl.Step(now, s)
	}
	assert.Less(t, charge(), 1.0, "recommendations off")
	assert.Equal(t, ctl.RequestCost(), charge())
	assert.InDelta(t, ctl.RequestCost(), a.State().RequestCost, 1e-6, "the state says it too")
}

// TestStateShowsTheModel: /v1/state and the metrics show what the law
// knows of the service — cold before anything is measured; once an
// overload with a measured load and no gate sets the capacity, that
// capacity with what set it, the load's estimate and the all-off
// request's work, each with its standard error.
func TestStateShowsTheModel(t *testing.T) {
	ctl := newController(t)
	reg := prometheus.NewRegistry()
	a, err := New(Config{Controller: ctl, Registerer: reg})
	require.NoError(t, err)
	defer a.Close()
	m := a.State().Model
	assert.Equal(t, ModelJSON{Mode: dimmer.ModelCold, Capacity: CapacityJSON{Unit: "all-off/s"}}, m, "nothing measured yet")

	now := t0
	for k := range 10 {
		now = now.Add(time.Second)
		var s signals.Snapshot
		s.Time, s.RecentSpan, s.RecentAt = now, time.Second, now
		s.Recent.Arrived, s.Recent.Completed = 100, 100
		s.Set(signals.ArrivalRate, 100)
		s.Set(signals.LatencyP99, 1.5) // over target: the cold rule sets K
		var on, off, work signals.Moments
		for j := range 50 {
			x, y := 0.015+0.001*float64(j%3), 0.010+0.001*float64((j+k)%3)
			on.Add(x)
			off.Add(y)
			work.Add(x)
			work.Add(y)
		}
		s.Tallies, s.Work = []signals.Tally{{Feature: "colour", On: on}, {Feature: "recommendations", On: on, Off: off}}, work
		ctl.Step(now, s)
	}
	m = a.State().Model
	assert.Equal(t, dimmer.ModelNoGate, m.Mode, "no gate reports its room")
	assert.Equal(t, "s/s", m.Capacity.Unit, "the requests are tallied: seconds of service a second")
	assert.Greater(t, m.Capacity.Value, 0.0)
	assert.NotEmpty(t, m.Capacity.Source)
	require.NotNil(t, m.Load)
	assert.InDelta(t, 100, m.Load.Value, 5)
	assert.Greater(t, m.Load.SE, 0.0)
	require.NotNil(t, m.AllOff)
	assert.InDelta(t, 0.011, m.AllOff.Value, 0.005, "about the off requests' 11 ms")
	assert.Equal(t, &UnconfiguredJSON{Feature: "colour", Count: 1}, m.Unconfigured, "an app's flag key that names no configured feature")

	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			got[mf.GetName()] = mt.GetGauge().GetValue()
			if mf.GetName() == "brownout_capacity" {
				for _, l := range mt.GetLabel() {
					got["brownout_capacity/"+l.GetName()+"="+l.GetValue()] = 1
				}
			}
		}
	}
	assert.InDelta(t, m.Capacity.Value, got["brownout_capacity"], 1e-5)
	assert.Equal(t, 1.0, got["brownout_capacity/unit=s/s"])
	assert.Equal(t, 1.0, got["brownout_capacity/mode=no-gate"])
	assert.InDelta(t, m.Load.Value, got["brownout_load_estimate_per_second"], 1e-5)
	assert.Contains(t, got, "brownout_load_estimate_stderr_per_second")
	assert.InDelta(t, m.AllOff.Value, got["brownout_all_off_work_seconds"], 1e-9)
	assert.Contains(t, got, "brownout_all_off_work_stderr_seconds")

	// A minute later without that name, it is forgotten.
	for range 61 {
		now = now.Add(time.Second)
		var s signals.Snapshot
		s.Time = now
		s.Set(signals.LatencyP99, 0.5)
		ctl.Step(now, s)
	}
	assert.Nil(t, a.State().Model.Unconfigured)
}

// TestStreamETagIsTheConfigurations: the etag OFREP's event stream
// announces (BulkETag) is the flag configuration's, which the bulk
// answer's metadata names as flagConfigEtag, and with which its HTTP ETag
// (the context's too) begins: a client can tell which announcement an
// answer it holds is for.
func TestStreamETagIsTheConfigurations(t *testing.T) {
	f := newFixture(t, Config{})
	dim(t, f.ctl)
	resp, m := f.do(t, "POST", "/ofrep/v1/evaluate/flags", `{"context":{"targetingKey":"u1"}}`)
	require.Equal(t, 200, resp.StatusCode)
	gen := f.ctl.State().Seq()
	announced := f.api.BulkETag(gen)
	assert.Equal(t, announced, m["metadata"].(map[string]any)["flagConfigEtag"])
	assert.True(t, strings.HasPrefix(resp.Header.Get("ETag"), strings.TrimSuffix(announced, `"`)+"-"), "%s begins with %s", resp.Header.Get("ETag"), announced)
	ev := string(f.api.refetchEvent(gen, t0))
	assert.Contains(t, ev, `"etag":`+strconv.Quote(announced))
}
