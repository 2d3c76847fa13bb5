package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// t0 is the tests' epoch: the start of the sale, 11 November.
var t0 = time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)

// clock is a settable time for a PushSource.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newPushSource(c *clock) *PushSource {
	return NewPushSource(PushConfig{Now: c.now})
}

// body encodes rec as a Pusher would, with the instance's clock at now.
func body(t testing.TB, rec *signals.Recorder, instance string, start, now time.Time) []byte {
	t.Helper()
	b := pushOf(rec, now, signals.DefaultBuckets())
	b.V, b.Instance = 1, instance
	b.Start, b.Time = start.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)
	out, err := json.Marshal(b)
	require.NoError(t, err)
	return out
}

// post sends a body to src and returns the response.
func post(src http.Handler, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/signals", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	src.ServeHTTP(w, req)
	return w
}

func mustPush(t *testing.T, src http.Handler, body []byte) {
	t.Helper()
	w := post(src, body)
	require.Equal(t, http.StatusNoContent, w.Code, "push refused: %s", w.Body)
}

// serve records n requests of class c lasting d (every k-th one slow
// instead, when k > 0), each having queued q.
func serve(rec *signals.Recorder, now time.Time, c signals.Class, n int, d time.Duration, k int, slow time.Duration) {
	for i := range n {
		rec.Arrive(c)
		rec.Queued(c, time.Millisecond, now)
		s := rec.Start(now)
		dd := d
		if k > 0 && i%k == k-1 {
			dd = slow
		}
		rec.Done(c, s, s.Add(dd), false, time.Time{})
	}
}

// goldenRecorder is a small, fixed activity: three classes, a gate, a few
// slow, failed and refused requests.
func goldenRecorder() *signals.Recorder {
	rec := signals.NewRecorder(signals.Config{})
	rec.SetGate(func() signals.GateReading {
		return signals.GateReading{Limit: 8, InFlight: 3, Queued: 1, Standing: [signals.NumClasses]bool{signals.Sheddable: true}}
	})
	for i := range 30 {
		c := signals.Class(i % 3)
		rec.Arrive(c)
		if i%10 == 9 {
			rec.Reject(c, signals.ReasonCoDel)
			continue
		}
		rec.Queued(c, time.Duration(i%4)*time.Millisecond, t0)
		s := rec.Start(t0)
		d := 20 * time.Millisecond
		if i%15 == 0 {
			d = 400 * time.Millisecond
		}
		rec.Done(c, s, s.Add(d), i%8 == 0, time.Time{})
	}
	rec.Start(t0) // two requests still in flight
	rec.Start(t0)
	return rec
}

// numberPairs puts the [a, b] pairs of an indented body on one line.
var numberPairs = regexp.MustCompile(`\[\s*(-?[0-9.e+-]+),\s*(-?[0-9.e+-]+)\s*\]`)

func normalise(t *testing.T, body []byte) []byte {
	t.Helper()
	var compact, out bytes.Buffer
	require.NoError(t, json.Compact(&compact, body))
	require.NoError(t, json.Indent(&out, compact.Bytes(), "", "  "))
	return append(numberPairs.ReplaceAll(out.Bytes(), []byte("[$1, $2]")), '\n')
}

// TestPushGolden pins the wire format: a Recorder's push, normalised,
// is testdata/push_v1.json, and that file decodes into the Recorder's
// numbers.
func TestPushGolden(t *testing.T) {
	const golden = "testdata/push_v1.json"
	start := t0.Add(-time.Hour)
	at := t0.Add(600 * time.Millisecond) // the CoDel interval after the requests: sojourn_min is known
	got := normalise(t, body(t, goldenRecorder(), "shop-1", start, at))
	if *update {
		require.NoError(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(normalise(t, want)), string(got), "the wire format changed: if on purpose, go test ./signals -run TestPushGolden -update (and think of v)")

	p, err := decodePush(want)
	require.NoError(t, err)
	assert.Equal(t, "shop-1", p.instance)
	assert.True(t, p.run.Equal(start), "start %v", p.run)
	assert.True(t, p.clock.Equal(at), "time %v", p.clock)
	st := p.st
	assert.Equal(t, 27.0, st.latency.count, "27 requests done")
	assert.True(t, st.latency.native, "native buckets")
	assert.Equal(t, 2.0, st.inFlight)
	assert.Equal(t, signals.GateReading{Limit: 8, InFlight: 3, Queued: 1}, st.gate)
	assert.True(t, st.standing, "the gate says the sheddable queue stands")
	assert.Equal(t, uint64(10), st.classes[signals.Critical].Arrived)
	assert.Equal(t, uint64(1), st.classes[signals.Sheddable].Rejected[signals.ReasonCoDel])
	assert.Equal(t, 27.0, st.sojourn.count, "sojourn summed over the classes")
	assert.True(t, st.hasSojMin)
	p99, ok := st.latency.quantile(0.99)
	require.True(t, ok)
	assert.InEpsilon(t, 0.400, p99, 0.05)
}

// TestPushSourceMergedP99: two instances push; the fleet's p99 is the p99
// of the merged histogram, not an average of the instances' p99s.
func TestPushSourceMergedP99(t *testing.T) {
	c := &clock{t: t0}
	src := newPushSource(c)
	a, b := signals.NewRecorder(signals.Config{}), signals.NewRecorder(signals.Config{})
	start := t0.Add(-time.Minute)
	mustPush(t, src, body(t, a, "a", start, c.t))
	mustPush(t, src, body(t, b, "b", start, c.t))
	snap, err := src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	assert.False(t, snap.Has(signals.LatencyP99), "one push each: no difference yet")

	// a: 1000 fast. b: 960 fast and 40 slow (4 %). Merged: 40 slow in
	// 2000 (2 %), so the p99 is slow; the instances' p99s are 10 ms and
	// 500 ms, averaging 255 ms.
	all := signals.NewWindow(signals.WindowConfig{})
	all.Summary(c.t)
	serve(a, c.t, signals.Default, 1000, 10*time.Millisecond, 0, 0)
	serve(b, c.t, signals.Default, 1000, 10*time.Millisecond, 25, 500*time.Millisecond)
	for i := range 2000 {
		d := 10 * time.Millisecond
		if i >= 1000 && (i-1000)%25 == 24 {
			d = 500 * time.Millisecond
		}
		all.Record(d)
	}
	c.t = c.t.Add(5 * time.Second)
	bodyA, bodyB := body(t, a, "a", start, c.t), body(t, b, "b", start, c.t)
	mustPush(t, src, bodyA)
	mustPush(t, src, bodyB)
	snap, err = src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	got, ok := snap.Get(signals.LatencyP99)
	require.True(t, ok)

	// The p99 of the two instances' histograms merged by hand.
	var merged hist
	for _, pair := range [][2][]byte{{body(t, signals.NewRecorder(signals.Config{}), "a", start, t0), bodyA}, {body(t, signals.NewRecorder(signals.Config{}), "b", start, t0), bodyB}} {
		old, err := decodePush(pair[0])
		require.NoError(t, err)
		cur, err := decodePush(pair[1])
		require.NoError(t, err)
		d, ok := cur.st.latency.sub(old.st.latency)
		require.True(t, ok)
		require.NoError(t, merged.add(d))
	}
	want, _ := merged.quantile(0.99)
	assert.Equal(t, want, got, "the fleet p99 is the merged histogram's")
	exact, _ := all.Quantile(c.t, 0.99)
	assert.InEpsilon(t, exact.Seconds(), got, 0.05, "and the p99 of every sample: %v", exact)
	assert.Greater(t, got, 0.4, "not the average of the instances' p99s (255 ms)")

	arr, _ := snap.Get(signals.ArrivalRate)
	assert.InDelta(t, 400, arr, 1e-9, "2000 arrivals in 5 s")
	inf, _ := snap.Get(signals.InFlight)
	assert.Equal(t, 0.0, inf)
	sp99, ok := snap.Get(signals.SojournP99)
	require.True(t, ok)
	assert.InEpsilon(t, 0.001, sp99, 0.05)
	assert.Equal(t, "push", snap.Source)
}

// TestPushSourceExpire: an instance that goes silent leaves the fleet
// after Expire; with none left, Snapshot fails with ErrNoInstances.
func TestPushSourceExpire(t *testing.T) {
	c := &clock{t: t0}
	src := NewPushSource(PushConfig{Now: c.now, Expire: 5 * time.Second})
	a, b := signals.NewRecorder(signals.Config{}), signals.NewRecorder(signals.Config{})
	a.Start(t0) // a has 1 in flight, b 2
	b.Start(t0)
	b.Start(t0)
	start := t0.Add(-time.Minute)
	for i := range 10 {
		if i < 3 { // a pushes until t0+2s
			mustPush(t, src, body(t, a, "a", start, c.t))
		}
		mustPush(t, src, body(t, b, "b", start, c.t))
		c.t = c.t.Add(time.Second)
	}
	// Now t0+10s; a last pushed at t0+2s, b at t0+9s.
	inFlight := func(now time.Time) (float64, error) {
		snap, err := src.Snapshot(context.Background(), now)
		v, _ := snap.Get(signals.InFlight)
		return v, err
	}
	v, err := inFlight(t0.Add(6 * time.Second))
	require.NoError(t, err)
	assert.Equal(t, 3.0, v, "both live at t0+6s")
	v, err = inFlight(t0.Add(7 * time.Second))
	require.NoError(t, err)
	assert.Equal(t, 2.0, v, "a expired 5 s after its last push")

	h := src.Health()
	assert.True(t, h.OK)
	require.Len(t, h.Instances, 2)
	assert.Equal(t, signals.InstanceHealth{Name: "a", OK: false, LastSeen: t0.Add(2 * time.Second)}, h.Instances[0])
	assert.Equal(t, signals.InstanceHealth{Name: "b", OK: true, LastSeen: t0.Add(9 * time.Second)}, h.Instances[1])
	assert.Equal(t, t0.Add(9*time.Second), h.LastSuccess)

	// a comes back: its history is gone, so its first push gives only
	// gauges.
	mustPush(t, src, body(t, a, "a", start, c.t))
	v, err = inFlight(c.t)
	require.NoError(t, err)
	assert.Equal(t, 3.0, v)

	// Everyone silent.
	c.t = c.t.Add(5 * time.Second)
	snap, err := src.Snapshot(context.Background(), c.t)
	require.ErrorIs(t, err, ErrNoInstances)
	assert.True(t, snap.Empty(), "no instance, no signal: %v", snap)
	assert.False(t, src.Health().OK)
	assert.Len(t, src.Health().Instances, 2, "expired instances are still listed")
	c.t = c.t.Add(50 * time.Second)
	assert.Empty(t, src.Health().Instances, "and forgotten after 10 × Expire")
}

// TestPushSourceCounterReset: an instance restarts, its counters go down;
// that is a reset, as in Prometheus, never a negative rate.
func TestPushSourceCounterReset(t *testing.T) {
	c := &clock{t: t0}
	src := newPushSource(c)
	old := signals.NewRecorder(signals.Config{})
	serve(old, t0, signals.Default, 5000, 900*time.Millisecond, 0, 0)
	mustPush(t, src, body(t, old, "a", t0.Add(-time.Hour), c.t))
	c.t = c.t.Add(2 * time.Second)
	mustPush(t, src, body(t, old, "a", t0.Add(-time.Hour), c.t))

	// The process restarts: a new Recorder and a new run, fewer counts.
	c.t = c.t.Add(2 * time.Second)
	fresh := signals.NewRecorder(signals.Config{})
	serve(fresh, c.t, signals.Default, 100, 10*time.Millisecond, 0, 0)
	mustPush(t, src, body(t, fresh, "a", c.t.Add(-time.Second), c.t))

	snap, err := src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	p99, ok := snap.Get(signals.LatencyP99)
	require.True(t, ok)
	assert.InEpsilon(t, 0.010, p99, 0.05, "counts since the restart")
	arr, ok := snap.Get(signals.ArrivalRate)
	require.True(t, ok)
	assert.InDelta(t, 100.0/4, arr, 1e-9, "the new counts over the window, not a negative rate")
	assert.Equal(t, uint64(100), snap.Classes[signals.Default].Arrived)
}

// TestPushSourceOrder: pushes of one run are ordered by their time; a run
// older than the one pushing is another process under the same id.
func TestPushSourceOrder(t *testing.T) {
	c := &clock{t: t0}
	src := newPushSource(c)
	rec := signals.NewRecorder(signals.Config{})
	start := t0.Add(-time.Minute)
	mustPush(t, src, body(t, rec, "a", start, t0))
	late := body(t, rec, "a", start, t0.Add(-time.Millisecond))
	serve(rec, t0, signals.Default, 10, time.Millisecond, 0, 0)
	c.t = t0.Add(time.Second)
	mustPush(t, src, body(t, rec, "a", start, c.t))
	before, _ := src.Snapshot(context.Background(), c.t)

	for _, tc := range []struct {
		name, kind, detail string
		body               []byte
	}{
		{"late", "stale", "is not after the last accepted push's", late},
		{"repeated", "stale", "a late or repeated push", body(t, rec, "a", start, c.t)},
		{"older run", "duplicate-instance", "give each process its own instance id", body(t, rec, "a", start.Add(-time.Second), c.t.Add(time.Second))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := post(src, tc.body)
			assert.Equal(t, http.StatusConflict, w.Code)
			p := problemOf(t, w)
			assert.Equal(t, "urn:brownout:push:"+tc.kind, p.Type)
			assert.Contains(t, p.Detail, tc.detail)
			after, _ := src.Snapshot(context.Background(), c.t)
			assert.Equal(t, before, after, "a refused push changes nothing")
		})
	}
	h := src.Health()
	assert.Equal(t, uint64(3), h.Errors)
	assert.Contains(t, h.LastError, `instance "a"`)
	assert.Contains(t, h.Instances[0].LastError, "give each process its own instance id")

	// A newer run is accepted (a restart), and clears the instance's error.
	mustPush(t, src, body(t, rec, "a", start.Add(time.Second), c.t.Add(time.Second)))
	assert.Empty(t, src.Health().Instances[0].LastError)
}

// TestPushSourceRefusesTheFuture: a push whose time or start is more
// than MaxClockAhead ahead of the source's clock is refused (400, saying
// how far ahead) and changes nothing; the instance's honest pushes go on
// being taken. Before, a push an hour ahead was taken and every honest
// push after it refused as stale until the instance expired.
func TestPushSourceRefusesTheFuture(t *testing.T) {
	c := &clock{t: t0}
	src := newPushSource(c)
	rec := signals.NewRecorder(signals.Config{})
	start := t0.Add(-time.Minute)
	mustPush(t, src, body(t, rec, "a", start, t0))
	before, _ := src.Snapshot(context.Background(), c.t)
	for _, tc := range []struct {
		name, detail string
		body         []byte
	}{
		{"time an hour ahead", `"time" 2026-11-11T01:00:00Z is 1h0m0s ahead of this server's clock`, body(t, rec, "a", start, t0.Add(time.Hour))},
		{"time just past the skew", "ahead of this server's clock", body(t, rec, "a", start, t0.Add(MaxClockAhead+time.Millisecond))},
		{"start ahead", `"start" 2026-11-11T01:00:00Z is 1h0m0s ahead`, body(t, rec, "a", t0.Add(time.Hour), t0.Add(time.Second))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := post(src, tc.body)
			assert.Equal(t, http.StatusBadRequest, w.Code)
			p := problemOf(t, w)
			assert.Equal(t, "urn:brownout:push:invalid", p.Type)
			assert.Contains(t, p.Detail, tc.detail)
			assert.Contains(t, p.Detail, "at most 10s")
			after, _ := src.Snapshot(context.Background(), c.t)
			assert.Equal(t, before, after, "a refused push changes nothing")
		})
	}
	for i := 1; i <= 3; i++ { // the instance's own pushes go on
		c.t = t0.Add(time.Duration(i) * time.Second)
		mustPush(t, src, body(t, rec, "a", start, c.t))
	}
	mustPush(t, src, body(t, rec, "a", start, c.t.Add(MaxClockAhead))) // a clock ahead within the skew is taken
}

type problem struct {
	Type, Title, Detail string
	Status              int
}

func problemOf(t *testing.T, w *httptest.ResponseRecorder) problem {
	t.Helper()
	assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	var p problem
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p), "body %s", w.Body)
	assert.Equal(t, w.Code, p.Status)
	assert.NotEmpty(t, p.Title)
	return p
}

// TestPushBadBodies: every refusal says exactly what is wrong, and changes
// nothing.
func TestPushBadBodies(t *testing.T) {
	const timed = `{"v":1,"instance":"x","time":"2026-11-11T00:00:05Z",`
	hist := func(s string) string { return timed + `"latency":` + s + `}` }
	class := func(s string) string { return timed + `"classes":{"default":` + s + `}}` }
	for _, tc := range []struct {
		name, body, kind, detail string
	}{
		{"empty", "  ", "malformed", "empty body"},
		{"truncated", `{"v":1,"instance":"x"`, "malformed", "malformed JSON"},
		{"trailing data", `{"v":1,"instance":"x"} {}`, "malformed", "malformed JSON at byte"},
		{"not an object", `[1,2]`, "malformed", "the body is a JSON array: want an object"},
		{"no version", `{"instance":"x"}`, "version", `"v" missing: this server reads version 1`},
		{"version 2", `{"v":2,"instance":"x","latency":[1,2,3]}`, "version", "version 2 is not supported: this server reads version 1"},
		{"version string", `{"v":"1","instance":"x"}`, "version", `"v" is "1": want the number 1`},
		{"no instance", `{"v":1}`, "invalid", `"instance" missing`},
		{"instance spaces", `{"v":1,"instance":" x"}`, "invalid", "leading or trailing space"},
		{"instance control", `{"v":1,"instance":"x\u0007"}`, "invalid", "control character"},
		{"instance long", `{"v":1,"instance":"` + strings.Repeat("x", 129) + `"}`, "invalid", "129 bytes long: at most 128"},
		{"instance number", `{"v":1,"instance":7}`, "invalid", "instance: number is not a string"},
		{"bad time", `{"v":1,"instance":"x","time":"yesterday"}`, "invalid", `"time" "yesterday" is not an RFC 3339 time`},
		{"no time", `{"v":1,"instance":"x"}`, "invalid", `"time" missing`},
		{"bad start", timed + `"start":"2026-13-01T00:00:00Z"}`, "invalid", `"start"`},
		{"NaN", hist(`{"count":NaN}`), "malformed", "JSON has no NaN or Infinity"},
		{"Infinity", hist(`{"count":1,"sum":-Infinity}`), "malformed", "JSON has no NaN or Infinity"},
		{"huge", hist(`{"count":1e999}`), "invalid", "latency.count: number 1e999 is out of range"},
		{"negative count", hist(`{"count":-1}`), "invalid", "latency.count: -1 is negative"},
		{"fractional count", hist(`{"count":1.5}`), "invalid", "latency.count: 1.5 is not a whole number"},
		{"too large count", hist(`{"count":1e17}`), "invalid", "latency.count: 1e+17 is too large"},
		{"negative sum", hist(`{"count":1,"sum":-0.5}`), "invalid", "latency.sum: -0.5 is negative"},
		{"bounds not ascending", hist(`{"count":3,"buckets":[[0.1,1],[0.05,2]]}`), "invalid",
			"latency.buckets[1]: upper bound 0.05 is not above the previous bucket's 0.1: bounds must ascend"},
		{"equal bounds", hist(`{"count":3,"buckets":[[0.1,1],[0.1,2]]}`), "invalid", "latency.buckets[1]: upper bound 0.1 is not above"},
		{"negative bound", hist(`{"count":3,"buckets":[[-1,1]]}`), "invalid", "latency.buckets[0]: upper bound -1 is negative"},
		{"counts not cumulative", hist(`{"count":3,"buckets":[[0.1,2],[0.2,1]]}`), "invalid",
			"latency.buckets[1]: cumulative count 1 is below the previous bucket's 2"},
		{"bucket triple", hist(`{"count":3,"buckets":[[0.1,2,3]]}`), "invalid", "latency.buckets[0]: want [upper bound, cumulative count], got 3 numbers"},
		{"bucket string", hist(`{"count":3,"buckets":[[0.1,"2"]]}`), "invalid", "latency.buckets[0][1]: string is not a number"},
		{"count below buckets", hist(`{"count":1,"buckets":[[0.1,2]]}`), "invalid", "latency.count: 1 is below the last bucket's cumulative count 2"},
		{"schema", hist(`{"count":1,"native":{"schema":9}}`), "invalid", "latency.native.schema: 9 is not a native-histogram schema"},
		{"schema fraction", hist(`{"count":1,"native":{"schema":4.5}}`), "invalid", "latency.native.schema: number 4.5 is not a whole number"},
		{"native order", hist(`{"count":3,"native":{"schema":4,"buckets":[[5,1],[5,1]]}}`), "invalid",
			"latency.native.buckets[1]: index 5 is not above the previous bucket's 5: indices must ascend"},
		{"native index", hist(`{"count":3,"native":{"schema":0,"buckets":[[5000,1]]}}`), "invalid", "index 5000 is out of range at schema 0"},
		{"native fraction", hist(`{"count":3,"native":{"schema":0,"buckets":[[1.5,1]]}}`), "invalid", "index 1.5 is not a whole number"},
		{"native total", hist(`{"count":3,"native":{"schema":0,"zero":2,"buckets":[[1,2]]}}`), "invalid",
			"latency.native: the buckets hold 4 observations, more than count 3"},
		{"class count", class(`{"arrived":-1}`), "invalid", `classes["default"].arrived: -1 is negative`},
		{"class rejected", class(`{"rejected":{"codel":0.5}}`), "invalid", `classes["default"].rejected["codel"]: 0.5 is not a whole number`},
		{"class sojourn", class(`{"sojourn":{"count":-2}}`), "invalid", `classes["default"].sojourn.count: -2 is negative`},
		{"class sojourn min", class(`{"sojourn_min":-0.1}`), "invalid", `classes["default"].sojourn_min: -0.1 is negative`},
		{"sojourn bounds differ", timed + `"classes":{"critical":{"sojourn":{"count":1,"buckets":[[0.1,1]]}},"default":{"sojourn":{"count":1,"buckets":[[0.2,1]]}}}}`,
			"invalid", `classes["default"].sojourn: bucket bounds differ from the other classes'`},
		{"gate", timed + `"gate":{"limit":-1}}`, "invalid", "gate.limit: -1 is negative"},
		{"gate queued", timed + `"gate":{"limit":1,"queued":0.5}}`, "invalid", "gate.queued: 0.5 is not a whole number"},
		{"in flight", timed + `"in_flight":"3"}`, "invalid", "in_flight: string is not a number"},
		{"in flight negative", timed + `"in_flight":-3}`, "invalid", "in_flight: -3 is negative"},
		{"too many features", timed + `"features":{` + manyFeatures(signals.MaxFeatures+1) + `}}`, "invalid", "features: 65 features: at most 64 per push"},
		{"feature name", timed + `"features":{" recs":{}}}`, "invalid", `features: feature name " recs" has leading or trailing space`},
		{"feature empty name", timed + `"features":{"":{}}}`, "invalid", "features: empty feature name"},
		{"feature n", timed + `"features":{"recs":{"on":{"n":-1}}}}`, "invalid", `features["recs"].on.n: -1 is negative`},
		{"feature n fraction", timed + `"features":{"recs":{"off":{"n":1.5,"sum":1}}}}`, "invalid", `features["recs"].off.n: 1.5 is not a whole number`},
		{"feature sum", timed + `"features":{"recs":{"on":{"n":1,"sum":-1}}}}`, "invalid", `features["recs"].on.sum: -1 is negative`},
		{"feature sum without n", timed + `"features":{"recs":{"off":{"sum_sq":2}}}}`, "invalid", `features["recs"].off.sum_sq: 2 with n 0`},
		{"feature unattributed", timed + `"features":{"recs":{"unattributed":0.5}}}`, "invalid", `features["recs"].unattributed: 0.5 is not a whole number`},
		{"features not an object", timed + `"features":[1]}`, "invalid", "features: array is not an object"},
		{"feature sum a string", timed + `"features":{"recs":{"on":{"n":1,"sum":"1"}}}}`, "invalid", `features["recs"].on.sum: string is not a number`},
		{"feature not an object", timed + `"features":{"recs":3}}`, "invalid", `features["recs"]: number is not an object`},
		{"class arrived a string", class(`{"arrived":"4"}`), "invalid", `classes["default"].arrived: string is not a number`},
		{"classes not an object", timed + `"classes":"default"}`, "invalid", "classes: string is not an object"},
		{"a reason's count a string", class(`{"rejected":{"codel":"1"}}`), "invalid", `classes["default"].rejected["codel"]: string is not a number`},
		{"a sojourn bucket's bound an object", class(`{"sojourn":{"count":2,"buckets":[[0.1,1],[{},2]]}}`), "invalid",
			`classes["default"].sojourn.buckets[1][0]: object is not a number`},
		{"a native bucket's index a string", hist(`{"count":2,"native":{"schema":0,"buckets":[[1,1],["2",1]]}}`), "invalid",
			"latency.native.buckets[1][0]: string is not a number"},
		{"a bucket not an array", hist(`{"count":2,"buckets":[[0.1,1],7]}`), "invalid", "latency.buckets[1]: number is not an array"},
		{"a field matched without regard to case", timed + `"Latency":{"count":2,"Buckets":[[0.1,"x"]]}}`, "invalid",
			"latency.buckets[0][1]: string is not a number"},
		{"first bad feature in the body's order", timed + `"features":{"c":{"on":{"n":"1"}},"a":{"on":{"n":"1"}},"b":{"on":{"n":"1"}}}}`, "invalid",
			`features["c"].on.n: string is not a number`},
		{"an earlier type error first", `{"v":1,"instance":7,"time":"2026-11-11T00:00:05Z","features":{"a":{"on":{"n":"1"}}}}`, "invalid",
			"instance: number is not a string"},
		{"a duplicate key's bad value", timed + `"features":{"a":{"on":{"n":"x"}},"a":{}}}`, "invalid", `features["a"].on.n: string is not a number`},
		{"a second features object", timed + `"features":{"a":{}},"Features":{"b":{"off":{"n":[]}}}}`, "invalid", `features["b"].off.n: array is not a number`},
		{"a key with a dot and a newline", timed + `"features":{"a.on\nb":{"on":{"n":"1"}}}}`, "invalid", `features["a.on\nb"].on.n: string is not a number`},
		{"an empty key", timed + `"features":{"":3}}`, "invalid", `features[""]: number is not an object`},
		{"a long number", timed + `"features":{"banner":{"on":{"n":1` + strings.Repeat("0", 250000) + `}}}}`, "invalid",
			`features["banner"].on.n: number 1` + strings.Repeat("0", maxQuoted-len("number 1")) + `… is out of range`},
		{"a long class name cut between characters", timed + `"classes":{"` + strings.Repeat("€", 100) + `":{"arrived":"x"}}}`, "invalid",
			`classes["` + strings.Repeat("€", maxQuoted/len("€")) + `…"].arrived`},
		{"a long class name", timed + `"classes":{"` + strings.Repeat("k", 250000) + `":{"arrived":"x"}}}`, "invalid",
			`classes["` + strings.Repeat("k", maxQuoted) + `…"].arrived: string is not a number`},
		{"feature sum huge", timed + `"features":{"recs":{"on":{"n":50,"sum":1e300,"sum_sq":1e308}}}}`, "invalid",
			`features["recs"].on.sum: 1e+300 s over 50 requests is 2e+298 s a request: over an hour`},
		{"feature sum_sq huge", timed + `"features":{"recs":{"on":{"n":2,"sum":2,"sum_sq":1e10}}}}`, "invalid",
			`features["recs"].on.sum_sq: 1e+10 s² over 2 requests`},
		{"feature squares too small", timed + `"features":{"recs":{"on":{"n":5000,"sum":1000,"sum_sq":0}}}}`, "invalid",
			`features["recs"].on: sum 1000 and sum_sq 0 cannot come from 5000 requests`},
		{"work squares too small", timed + `"work":{"n":4,"sum":2,"sum_sq":0.9}}`, "invalid",
			"work: sum 2 and sum_sq 0.9 cannot come from 4 requests"},
		{"tallies over work", timed + `"features":{"recs":{"on":{"n":7,"sum":0.7,"sum_sq":0.07},"off":{"n":5,"sum":0.5,"sum_sq":0.05}}},"work":{"n":10,"sum":2,"sum_sq":0.4}}`, "invalid",
			`features["recs"]: 12 requests tallied (on and off), more than the 10 of work`},
		{"tallied time over work", timed + `"features":{"recs":{"on":{"n":2,"sum":3,"sum_sq":4.5}}},"work":{"n":10,"sum":2,"sum_sq":0.4}}`, "invalid",
			`features["recs"]: 3 s tallied (on and off), more than work's 2 s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: t0}
			src := newPushSource(c)
			rec := signals.NewRecorder(signals.Config{})
			mustPush(t, src, body(t, rec, "x", t0, t0))
			serve(rec, t0, signals.Default, 10, time.Millisecond, 0, 0)
			c.t = t0.Add(time.Second)
			mustPush(t, src, body(t, rec, "x", t0, c.t))
			before, err := src.Snapshot(context.Background(), c.t)
			require.NoError(t, err)
			require.True(t, before.Has(signals.LatencyP99))

			w := post(src, []byte(tc.body))
			assert.Equal(t, http.StatusBadRequest, w.Code)
			p := problemOf(t, w)
			assert.Equal(t, "urn:brownout:push:"+tc.kind, p.Type)
			assert.Contains(t, p.Detail, tc.detail)
			assert.Less(t, len(p.Detail), 1024, "a detail under 1 KiB, whatever the body quotes (the Pusher reads at most maxAnswer)")

			after, err := src.Snapshot(context.Background(), c.t)
			require.NoError(t, err)
			assert.Equal(t, before, after, "a refused push changes nothing")
			h := src.Health()
			assert.Equal(t, uint64(1), h.Errors)
			assert.Contains(t, h.LastError, tc.detail)
		})
	}
}

// manyFeatures returns n valid feature entries of a push body.
func manyFeatures(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"f%d":{"on":{"n":1,"sum":0.5,"sum_sq":0.25}}`, i)
	}
	return b.String()
}

func TestPushHTTP(t *testing.T) {
	src := NewPushSource(PushConfig{MaxBody: 1 << 10})
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "POST", resp.Header.Get("Allow"))
	assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))

	for _, tc := range []struct {
		name, ct, body string
		status         int
		kind           string
	}{
		{"too large", "application/json", `{"v":1,"instance":"x","pad":"` + strings.Repeat("x", 2<<10) + `"}`, http.StatusRequestEntityTooLarge, "too-large"},
		{"media type", "text/plain", `{"v":1,"instance":"x"}`, http.StatusUnsupportedMediaType, "media-type"},
		{"ok with charset", "application/json; charset=utf-8", `{"v":1,"instance":"x","time":"2026-11-11T00:00:00Z","unknown":{"future":[1,2]}}`, http.StatusNoContent, ""},
		{"ok without type", "", `{"v":1,"instance":"y","time":"2026-11-11T00:00:00Z"}`, http.StatusNoContent, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(tc.body))
			require.NoError(t, err)
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tc.status, resp.StatusCode)
			if tc.kind != "" {
				var p problem
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
				assert.Equal(t, "urn:brownout:push:"+tc.kind, p.Type)
				assert.Equal(t, tc.status, p.Status)
			}
		})
	}
	h := src.Health()
	assert.Equal(t, uint64(2), h.Errors, "the two refused pushes")
	assert.Len(t, h.Instances, 2)
	assert.True(t, h.OK)
}

// tiny is the smallest valid push: an instance and its time.
func tiny(instance string, at time.Time) []byte {
	return []byte(`{"v":1,"instance":"` + instance + `","time":"` + at.Format(time.RFC3339Nano) + `"}`)
}

// TestPushSourceMaxInstances: a new instance past MaxInstances is refused
// with 429, ErrTooManyInstances and a Retry-After of when the
// longest-silent instance will be forgotten; known ones still push.
func TestPushSourceMaxInstances(t *testing.T) {
	c := &clock{t: t0}
	src := NewPushSource(PushConfig{Now: c.now, MaxInstances: 2, Expire: time.Second})
	mustPush(t, src, tiny("a", c.t))
	c.t = c.t.Add(3 * time.Second)
	mustPush(t, src, tiny("b", c.t))
	w := post(src, tiny("c", c.t))
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "urn:brownout:push:too-many-instances", problemOf(t, w).Type)
	assert.Equal(t, "7", w.Header().Get("Retry-After"), "a is forgotten 10 s after its push, 7 s from now")
	require.ErrorIs(t, src.Push(tiny("c", c.t)), ErrTooManyInstances)
	mustPush(t, src, tiny("a", c.t)) // known instances still push
	c.t = c.t.Add(10 * time.Second)  // a and b forgotten
	mustPush(t, src, tiny("c", c.t))
}

// FuzzPushBody: no body panics the decoder, a refusal is problem+json
// and changes nothing, and an accepted body gives finite signals.
func FuzzPushBody(f *testing.F) {
	rec := goldenRecorder()
	f.Add(body(f, rec, "shop-1", t0, t0.Add(time.Second)))
	f.Add([]byte(`{"v":1,"instance":"x","latency":{"count":3,"sum":1,"buckets":[[0.1,1],[0.2,2]],"native":{"schema":4,"zero":0,"buckets":[[-50,1],[-30,2]]}}}`))
	f.Add([]byte(`{"v":1,"instance":"x","classes":{"default":{"arrived":5,"completed":1,"rejected":{"codel":1}}},"gate":{"limit":1}}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`{"v":1,"instance":"shop-1","time":"2026-11-11T00:00:00Z","start":"2026-11-11T00:00:00Z"}`))
	f.Add([]byte(`{"v":1,"instance":"x","latency":{"count":1,"native":{"schema":-4,"buckets":[[63,1]]}}}`))
	f.Add([]byte(`{"v":1,"instance":"x","time":"2026-11-11T00:00:02Z","features":{"recs":{"on":{"n":3,"sum":0.3,"sum_sq":0.03},"off":{"n":1,"sum":0.1,"sum_sq":0.01},"unattributed":2}}}`))
	f.Add([]byte(`{"v":1,"instance":"x","time":"2026-11-11T00:00:02Z","features":{` + manyFeatures(signals.MaxFeatures+1) + `}}`))
	f.Add([]byte(`{"v":1,"instance":"x","time":"2026-11-11T00:00:02Z","features":{"recs":{"on":{"n":3,"sum":0.3,"sum_sq":0.03}}},"work":{"n":5,"sum":0.5,"sum_sq":0.05}}`))
	f.Add([]byte(`{"v":1,"instance":"shop-1","time":"2026-11-11T00:00:02Z","start":"2026-11-11T00:00:00Z","work":{"n":0,"sum":0,"sum_sq":0}}`))
	// Type errors under map keys and in arrays, which the refusal names.
	f.Add([]byte(`{"v":1,"instance":"x","time":"2026-11-11T00:00:02Z","classes":{"default":{"rejected":{"codel":"1"},"sojourn":{"count":1,"buckets":[[0.1,1],[0.2,{}]]}}}}`))
	f.Add([]byte(`{"v":1,"instance":"x","time":"2026-11-11T00:00:02Z","Latency":{"count":2,"native":{"schema":0,"buckets":[[1,1],["2",1]]}},"features":{"a\u0000b":{"On":{"n":true}}}}`))
	// Two instances with two pushes each: the state a refusal must keep.
	start := t0.Add(-time.Hour)
	r := signals.NewRecorder(signals.Config{})
	if err := r.Features("recs", "reviews"); err != nil {
		f.Fatal(err)
	}
	tally(r, "recs", true, 10*time.Millisecond)
	var setup [][]byte
	for _, id := range []string{"shop-1", "x"} {
		setup = append(setup, body(f, r, id, start, t0))
	}
	serve(r, t0, signals.Default, 100, 3*time.Millisecond, 10, 30*time.Millisecond)
	tally(r, "reviews", false, 20*time.Millisecond)
	for _, id := range []string{"shop-1", "x"} {
		setup = append(setup, body(f, r, id, start, t0.Add(time.Second)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &clock{t: t0}
		src := newPushSource(c)
		for i, s := range setup {
			c.t = t0.Add(time.Duration(i/2) * time.Second)
			mustPush(t, src, s)
		}
		c.t = t0.Add(2 * time.Second)
		before, _ := src.Snapshot(context.Background(), c.t)
		instances := func() string {
			var s strings.Builder
			for _, in := range src.Health().Instances {
				fmt.Fprintf(&s, "%s %v %v;", in.Name, in.OK, in.LastSeen)
			}
			return s.String()
		}
		was := instances()

		w := post(src, b)
		after, _ := src.Snapshot(context.Background(), c.t)
		if w.Code != http.StatusNoContent {
			if w.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("refusal %d without problem+json", w.Code)
			}
			if !reflect.DeepEqual(after, before) || instances() != was {
				t.Fatalf("refused push (%d %s) changed the state:\n%v\n%v", w.Code, w.Body, before, after)
			}
			if w.Body.Len() > 2048 {
				t.Fatalf("a refusal of %d bytes: it quotes the body unbounded", w.Body.Len())
			}
			return
		}
		for k := range signals.NumKeys {
			if v, ok := after.Get(k); ok && v < 0 {
				t.Fatalf("%s = %v after an accepted push", k, v)
			}
		}
		if w := after.Work; w.N < 0 || !(w.Sum >= 0) || !(w.SumSq >= 0) {
			t.Fatalf("work %+v after an accepted push", w)
		}
		if len(after.Tallies) > signals.MaxFeatures*2 {
			t.Fatalf("%d tallies from 2 instances", len(after.Tallies))
		}
		for _, tl := range after.Tallies {
			for _, m := range []signals.Moments{tl.On, tl.Off} {
				if m.N < 0 || m.Sum < 0 || m.SumSq < 0 || tl.Unattributed < 0 {
					t.Fatalf("negative tally after an accepted push: %+v", tl)
				}
			}
		}
	})
}

// TestPushNamesTheSameBadReasonEachTime: of two reasons whose counts are
// bad, the refusal names the first in the reasons' order each time, not
// the first in a map's random order.
func TestPushNamesTheSameBadReasonEachTime(t *testing.T) {
	const body = `{"v":1,"instance":"x","time":"2026-11-11T00:00:05Z","classes":{"default":{"rejected":{"canceled":0.5,"max_wait":-1,"codel":0.5}}}}`
	for range 50 {
		src := newPushSource(&clock{t: t0})
		w := post(src, []byte(body))
		require.Equal(t, http.StatusBadRequest, w.Code)
		assert.Contains(t, problemOf(t, w).Detail, `classes["default"].rejected["max_wait"]: -1 is negative`)
	}
}

// TestPushAndScrapeAgree: the same Recorders, scraped through Collector or
// pushed, give the same fleet snapshot — one computation, one export.
func TestPushAndScrapeAgree(t *testing.T) {
	now := t0
	c := &clock{t: now}
	push := newPushSource(c)
	var recs []*signals.Recorder
	var urls []string
	for i := range 2 {
		rec := signals.NewRecorder(signals.Config{})
		rec.SetGate(func() signals.GateReading { return signals.GateReading{Limit: 10, InFlight: float64(3 + i), Queued: i} })
		recs, urls = append(recs, rec), append(urls, serveCollector(t, rec, func() time.Time { return now }))
	}
	scrape, err := NewScrapeSource(ScrapeConfig{Targets: urls})
	require.NoError(t, err)
	start := t0.Add(-time.Hour)
	read := func() (signals.Snapshot, signals.Snapshot) {
		c.t = now
		for i, rec := range recs {
			mustPush(t, push, body(t, rec, fmt.Sprint("shop-", i), start, now))
		}
		ps, err := push.Snapshot(context.Background(), now)
		require.NoError(t, err)
		ss, err := scrape.Snapshot(context.Background(), now)
		require.NoError(t, err)
		ps.Source, ss.Source = "", ""
		return ps, ss
	}
	ps, ss := read()
	assert.Equal(t, ss, ps, "first read: gauges only")
	for step := range 12 {
		for i, rec := range recs {
			serve(rec, now, signals.Class(step%3), 100*(i+1), time.Duration(5+step)*time.Millisecond, 20-i*10, 300*time.Millisecond)
			rec.Reject(signals.Sheddable, signals.ReasonCoDel)
		}
		now = now.Add(time.Second)
		ps, ss = read()
		require.True(t, ps.Has(signals.LatencyP99))
		assert.Equal(t, ss, ps, "step %d:\npush   %v\nscrape %v", step, ps, ss)
	}
}

func TestHistSubSumDown(t *testing.T) {
	old := hist{count: 2, sum: 1, bounds: []float64{math.Inf(1)}, classic: []float64{2}}
	cur := hist{count: 3, sum: 0.5, bounds: []float64{math.Inf(1)}, classic: []float64{3}}
	_, ok := cur.sub(old)
	assert.False(t, ok, "a sum of durations that went down is a reset")
}

// stalled is a body that ends in the read deadline's error, as a
// connection's body does when its client stops sending.
type stalled struct{ sent bool }

func (s *stalled) Read(p []byte) (int, error) {
	if !s.sent {
		s.sent = true
		return copy(p, `{"v":1,`), nil
	}
	return 0, os.ErrDeadlineExceeded
}

// TestPushStalledBody: a push whose body stops before the server's read
// deadline is answered 408 (it was a 400 "malformed"), and changes
// nothing.
func TestPushStalledBody(t *testing.T) {
	src := newPushSource(&clock{t: t0})
	req := httptest.NewRequest(http.MethodPost, "/v1/signals", &stalled{})
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	src.ServeHTTP(w, req)
	assert.Equal(t, http.StatusRequestTimeout, w.Code)
	p := problemOf(t, w)
	assert.Equal(t, "urn:brownout:push:timeout", p.Type)
	assert.Equal(t, "the body did not arrive in time", p.Detail)
	assert.Empty(t, src.Health().Instances)
}

// tally records one request that marked feature on or off and took d.
func tally(rec *signals.Recorder, feature string, on bool, d time.Duration) {
	var rt signals.RequestTally
	if !rec.BeginTally(&rt, context.Background()) || !signals.Evaluated(&rt, feature, on) {
		panic("tally: " + feature + " is not registered")
	}
	rec.EndTally(&rt, d)
}

// The push carries each feature's cumulative tally; the source reports,
// summed over the instances, each one's increase over its last push
// interval.
func TestPushTallies(t *testing.T) {
	c := &clock{t: t0}
	src := newPushSource(c)
	start := t0.Add(-time.Minute)
	a, b := signals.NewRecorder(signals.Config{}), signals.NewRecorder(signals.Config{})
	require.NoError(t, a.Features("recs", "reviews"))
	require.NoError(t, b.Features("recs"))
	tally(a, "recs", true, 100*time.Millisecond)
	tally(b, "recs", false, 50*time.Millisecond)
	mustPush(t, src, body(t, a, "a", start, c.t))
	mustPush(t, src, body(t, b, "b", start, c.t))
	snap, err := src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	assert.Empty(t, snap.Tallies, "a first push is a base, not an increase")

	for range 3 {
		tally(a, "recs", true, 200*time.Millisecond)
	}
	tally(a, "reviews", false, 300*time.Millisecond)
	a.Unattributed("recs")
	tally(b, "recs", true, 400*time.Millisecond)
	tally(b, "recs", false, 10*time.Millisecond)
	c.t = c.t.Add(time.Second)
	mustPush(t, src, body(t, a, "a", start, c.t))
	mustPush(t, src, body(t, b, "b", start, c.t))
	want := []signals.Tally{
		{Feature: "recs", On: signals.Moments{N: 4, Sum: 1.0, SumSq: 3*.04 + .16}, Off: signals.Moments{N: 1, Sum: .01, SumSq: .0001}, Unattributed: 1},
		{Feature: "reviews", Off: signals.Moments{N: 1, Sum: .3, SumSq: .09}},
	}
	for range 2 { // idempotent: the same interval until the next push
		snap, err = src.Snapshot(context.Background(), c.t)
		require.NoError(t, err)
		require.Len(t, snap.Tallies, 2)
		for i, w := range want {
			got := snap.Tallies[i]
			assert.Equal(t, w.Feature, got.Feature)
			assert.Equal(t, w.Unattributed, got.Unattributed, w.Feature)
			for j, m := range [][2]signals.Moments{{w.On, got.On}, {w.Off, got.Off}} {
				assert.Equal(t, m[0].N, m[1].N, "%s %d", w.Feature, j)
				assert.InDelta(t, m[0].Sum, m[1].Sum, 1e-9, "%s %d", w.Feature, j)
				assert.InDelta(t, m[0].SumSq, m[1].SumSq, 1e-9, "%s %d", w.Feature, j)
			}
		}
	}

	// b restarts (a new run): its new counts are its increase.
	b2 := signals.NewRecorder(signals.Config{})
	require.NoError(t, b2.Features("recs"))
	tally(b2, "recs", true, time.Second)
	c.t = c.t.Add(time.Second)
	mustPush(t, src, body(t, a, "a", start, c.t))
	mustPush(t, src, body(t, b2, "b", c.t.Add(-time.Second), c.t))
	snap, err = src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	assert.Equal(t, []signals.Tally{{Feature: "recs", On: signals.Moments{N: 1, Sum: 1, SumSq: 1}}, {Feature: "reviews"}}, snap.Tallies)
}

// A Pusher's body carries the features; a Recorder without features
// pushes none.
func TestPushBodyFeatures(t *testing.T) {
	rec := signals.NewRecorder(signals.Config{})
	assert.NotContains(t, string(body(t, rec, "a", t0, t0)), `"features"`)
	require.NoError(t, rec.Features("recs"))
	tally(rec, "recs", true, 500*time.Millisecond)
	rec.Unattributed("recs")
	assert.Contains(t, string(body(t, rec, "a", t0, t0)),
		`"features":{"recs":{"on":{"n":1,"sum":0.5,"sum_sq":0.25},"off":{"n":0,"sum":0,"sum_sq":0},"unattributed":1}}`)
	p, err := decodePush(body(t, rec, "a", t0, t0))
	require.NoError(t, err)
	assert.Equal(t, []signals.Tally{{Feature: "recs", On: signals.Moments{N: 1, Sum: .5, SumSq: .25}, Unattributed: 1}}, p.st.tallies)
}

// TestPushRecent: a snapshot's Recent sums each live instance's counts
// over its latest push interval, and RecentSpan is that interval — what
// a controller reads as one period of the fleet (the model law's load
// tracker); an instance's first push gives none. RecentAt tells a new
// interval from one reported again.
func TestPushRecent(t *testing.T) {
	c := &clock{t: t0}
	src := newPushSource(c)
	start := t0.Add(-time.Minute)
	a, b := signals.NewRecorder(signals.Config{}), signals.NewRecorder(signals.Config{})
	serve(a, c.t, signals.Default, 50, time.Millisecond, 0, 0)
	mustPush(t, src, body(t, a, "a", start, c.t))
	mustPush(t, src, body(t, b, "b", start, c.t))
	snap, err := src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	assert.Zero(t, snap.RecentSpan, "first pushes are bases")

	c.t = c.t.Add(time.Second)
	serve(a, c.t, signals.Default, 30, time.Millisecond, 0, 0)
	serve(b, c.t, signals.Critical, 12, time.Millisecond, 0, 0)
	mustPush(t, src, body(t, a, "a", start, c.t))
	mustPush(t, src, body(t, b, "b", start, c.t))
	snap, err = src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	assert.Equal(t, time.Second, snap.RecentSpan)
	assert.Equal(t, uint64(42), snap.Recent.Arrived, "30 + 12 in the interval, not the 50 before it")
	assert.Equal(t, uint64(42), snap.Recent.Completed)
	require.False(t, snap.RecentAt.IsZero(), "the interval's end")

	// A snapshot taken before the next push reports the same interval,
	// and says so; one after a push of either instance, a new one.
	at := snap.RecentAt
	c.t = c.t.Add(250 * time.Millisecond)
	snap, err = src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	assert.Equal(t, at, snap.RecentAt, "no push since: the same interval")
	c.t = c.t.Add(750 * time.Millisecond)
	serve(a, c.t, signals.Default, 20, time.Millisecond, 0, 0)
	mustPush(t, src, body(t, a, "a", start, c.t))
	snap, err = src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	assert.True(t, snap.RecentAt.After(at), "a push: a new interval (%v after %v)", snap.RecentAt, at)
}

// TestPushWork: a push carries the work of every tallied request
// (Recorder.Work), features or none, and the source's Snapshot.Work sums
// each live instance's increase over its last push interval — nothing
// from a first push, the new counts of a restarted run, none at all
// while an instance pushes its tallies without it (an older Pusher). A
// malformed work is
// refused with a problem that names it.
func TestPushWork(t *testing.T) {
	c := &clock{t: t0}
	src := newPushSource(c)
	start := t0.Add(-time.Minute)
	a, b := signals.NewRecorder(signals.Config{}), signals.NewRecorder(signals.Config{})
	require.NoError(t, a.Features("recs"))
	require.NoError(t, b.Features("recs"))
	plain := func(rec *signals.Recorder, d time.Duration) { // a checkout: no feature evaluated
		var rt signals.RequestTally
		require.True(t, rec.BeginTally(&rt, context.Background()))
		rec.EndTally(&rt, d)
	}
	tally(a, "recs", true, 100*time.Millisecond)
	plain(b, 50*time.Millisecond)
	assert.Contains(t, string(body(t, a, "a", start, c.t)), `"work":{"n":1,"sum":0.1,"sum_sq":0.010000000000000002}`)
	mustPush(t, src, body(t, a, "a", start, c.t))
	mustPush(t, src, body(t, b, "b", start, c.t))
	snap, err := src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	assert.Zero(t, snap.Work, "a first push is a base, not an increase")

	plain(a, 200*time.Millisecond)
	tally(a, "recs", false, 300*time.Millisecond)
	plain(b, 400*time.Millisecond)
	c.t = c.t.Add(time.Second)
	mustPush(t, src, body(t, a, "a", start, c.t))
	mustPush(t, src, body(t, b, "b", start, c.t))
	for range 2 { // the same interval until the next push
		snap, err = src.Snapshot(context.Background(), c.t)
		require.NoError(t, err)
		assert.Equal(t, int64(3), snap.Work.N)
		assert.InDelta(t, 0.9, snap.Work.Sum, 1e-9)
		assert.InDelta(t, .04+.09+.16, snap.Work.SumSq, 1e-9)
		assert.Equal(t, int64(1), snap.Tallies[0].Off.N, "the tallies count only the requests that evaluated the feature")
	}

	// b restarts: its new counts are the increase.
	b2 := signals.NewRecorder(signals.Config{})
	require.NoError(t, b2.Features("recs"))
	plain(b2, time.Second)
	c.t = c.t.Add(time.Second)
	mustPush(t, src, body(t, a, "a", start, c.t))
	mustPush(t, src, body(t, b2, "b", c.t.Add(-time.Second), c.t))
	snap, err = src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	assert.Equal(t, signals.Moments{N: 1, Sum: 1, SumSq: 1}, snap.Work)

	// a pushes without work (an older Pusher): its tallies would be
	// summed without it, and the source gives none.
	c.t = c.t.Add(time.Second)
	old := pushOf(a, c.t, signals.DefaultBuckets())
	old.V, old.Instance, old.Start, old.Time, old.Work = 1, "a", start.Format(time.RFC3339Nano), c.t.Format(time.RFC3339Nano), nil
	raw, err := json.Marshal(old)
	require.NoError(t, err)
	mustPush(t, src, raw)
	mustPush(t, src, body(t, b2, "b", c.t.Add(-2*time.Second), c.t))
	snap, err = src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	assert.Zero(t, snap.Work, "a's tallies are summed without its work (TestPushWorkMixedFleet)")

	for _, tc := range []struct{ work, detail string }{
		{`{"n":-1,"sum":0,"sum_sq":0}`, "work.n"},
		{`{"n":0,"sum":1,"sum_sq":0}`, "work.sum: 1 with n 0"},
		{`{"n":1.5,"sum":1,"sum_sq":1}`, "work.n"},
	} {
		c.t = c.t.Add(time.Second)
		w := post(src, []byte(fmt.Sprintf(`{"v":1,"instance":"a","start":%q,"time":%q,"work":%s}`,
			start.Format(time.RFC3339Nano), c.t.Format(time.RFC3339Nano), tc.work)))
		assert.Equal(t, http.StatusBadRequest, w.Code, tc.work)
		assert.Contains(t, w.Body.String(), tc.detail, tc.work)
	}
}

// TestPushInstances: the snapshot says how many instances carry the load,
// weighted by their shares of the arrivals — two that share it evenly
// are two queues, one that takes nine tenths of it makes the pair count
// as 1.22.
func TestPushInstances(t *testing.T) {
	for _, tc := range []struct {
		a, b int
		want float64
	}{{30, 30, 2}, {90, 10, 100.0 * 100 / (90*90 + 10*10)}, {40, 0, 1}} {
		c := &clock{t: t0}
		src := newPushSource(c)
		start := t0.Add(-time.Minute)
		a, b := signals.NewRecorder(signals.Config{}), signals.NewRecorder(signals.Config{})
		mustPush(t, src, body(t, a, "a", start, c.t))
		mustPush(t, src, body(t, b, "b", start, c.t))
		c.t = c.t.Add(time.Second)
		serve(a, c.t, signals.Default, tc.a, time.Millisecond, 0, 0)
		serve(b, c.t, signals.Default, tc.b, time.Millisecond, 0, 0)
		mustPush(t, src, body(t, a, "a", start, c.t))
		mustPush(t, src, body(t, b, "b", start, c.t))
		snap, err := src.Snapshot(context.Background(), c.t)
		require.NoError(t, err)
		assert.InDelta(t, tc.want, snap.Instances, 1e-9, "%d and %d requests", tc.a, tc.b)
	}
}

// TestPushTallyGrowth: within one run an instance's tallies and work only
// grow, and no push tallies more requests for a feature than its work
// counts — a feature first named in a later push included, whose whole
// tally is taken for the interval's. A request that ended between a
// Recorder's reads of its tallies and of its work is in one push's work
// and the next one's tallies: that push is taken. Each refused push
// changes nothing, and says why in the instance's health.
func TestPushTallyGrowth(t *testing.T) {
	start := t0.Add(-time.Minute)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	raw := func(i int, features, work string) []byte {
		return []byte(fmt.Sprintf(`{"v":1,"instance":"a","start":%q,"time":%q,"features":{%s},"work":%s}`,
			start.Format(time.RFC3339Nano), at(i).Format(time.RFC3339Nano), features, work))
	}
	const (
		recs10 = `"recs":{"on":{"n":6,"sum":0.6,"sum_sq":0.06},"off":{"n":4,"sum":0.4,"sum_sq":0.04}}`
		work10 = `{"n":10,"sum":1,"sum_sq":0.1}`
		recs20 = `"recs":{"on":{"n":12,"sum":1.2,"sum_sq":0.12},"off":{"n":8,"sum":0.8,"sum_sq":0.08}}`
		work20 = `{"n":20,"sum":2,"sum_sq":0.2}`
	)
	for _, tc := range []struct {
		name, features, work, detail string
	}{
		{"a new feature's lifetime in one interval", recs20 + `,"gallery":{"on":{"n":1000000,"sum":1,"sum_sq":0.000001},"off":{"n":0}}`, `{"n":1000020,"sum":3,"sum_sq":0.2000011}`, ""},
		{"a new feature over the work", recs20 + `,"gallery":{"on":{"n":21,"sum":0.021,"sum_sq":0.000021},"off":{"n":0}}`, work20,
			`features["gallery"]: 21 requests tallied (on and off), more than the 20 of work`},
		{"a feature's counts down", `"recs":{"on":{"n":5,"sum":0.5,"sum_sq":0.05},"off":{"n":4,"sum":0.4,"sum_sq":0.04}}`, work20,
			`features["recs"]: counts lower than the last push's in the same run`},
		{"work down", "", `{"n":9,"sum":0.9,"sum_sq":0.09}`, "work: 9 requests and 0.9 s, fewer than the last push's 10 and 1 s in the same run"},
		{"more tallied than the work grew", `"recs":{"on":{"n":14,"sum":1.4,"sum_sq":0.14},"off":{"n":8,"sum":0.8,"sum_sq":0.08}}`, `{"n":22,"sum":2.2,"sum_sq":0.22}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: at(0)}
			src := newPushSource(c)
			mustPush(t, src, raw(0, recs10, work10))
			c.t = at(1)
			w := post(src, raw(1, tc.features, tc.work))
			if tc.detail == "" {
				require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
				return
			}
			require.Equal(t, http.StatusBadRequest, w.Code)
			assert.Contains(t, problemOf(t, w).Detail, tc.detail)
			h := src.Health()
			require.Len(t, h.Instances, 1)
			assert.Contains(t, h.Instances[0].LastError, tc.detail, "the instance's health says why")
			// Nothing changed: the next honest push measures the interval
			// from the last accepted one.
			c.t = at(2)
			mustPush(t, src, raw(2, recs20, work20))
			snap, err := src.Snapshot(context.Background(), c.t)
			require.NoError(t, err)
			require.Len(t, snap.Tallies, 1)
			assert.Equal(t, int64(6), snap.Tallies[0].On.N)
			assert.Equal(t, int64(10), snap.Work.N)
		})
	}
}

// TestRecorderMomentsHoldCauchySchwarz: however a read of a Recorder's
// tallies interleaves with the requests that add to them, the moments it
// returns pass the push source's check (sum² ≤ n·sum_sq): a request's time
// is never read without its square.
func TestRecorderMomentsHoldCauchySchwarz(t *testing.T) {
	rec := signals.NewRecorder(signals.Config{})
	require.NoError(t, rec.Features("recs"))
	stop := tallying(rec, func(int) time.Duration { return 10 * time.Millisecond }) // equal times: the tightest case
	for range 2000 {
		for _, tl := range rec.Tallies() {
			for _, m := range []signals.Moments{tl.On, tl.Off} {
				_, err := pushMomentsOf(m).decode("x")
				require.NoError(t, err)
			}
		}
		_, err := pushMomentsOf(rec.Work()).decode("work")
		require.NoError(t, err)
	}
	stop()
}

// TestPushTakesARequestBetweenReads: a Recorder reads its tallies before
// its work, so a request that ends between the two reads is in one push's
// work and only the next push's tallies — which then tallies more since
// the last push than the work grew. Both pushes are taken, and so are the
// pushes after them.
func TestPushTakesARequestBetweenReads(t *testing.T) {
	start := t0.Add(-time.Minute)
	c := &clock{t: t0}
	src := newPushSource(c)
	push := func(i int, on, off, work int) *httptest.ResponseRecorder {
		c.t = t0.Add(time.Duration(i) * time.Second)
		m := func(n int) string {
			return fmt.Sprintf(`{"n":%d,"sum":%g,"sum_sq":%g}`, n, 0.01*float64(n), 0.0001*float64(n))
		}
		return post(src, []byte(fmt.Sprintf(`{"v":1,"instance":"a","start":%q,"time":%q,"features":{"recs":{"on":%s,"off":%s}},"work":%s}`,
			start.Format(time.RFC3339Nano), c.t.Format(time.RFC3339Nano), m(on), m(off), m(work))))
	}
	require.Equal(t, http.StatusNoContent, push(0, 6, 4, 11).Code, "the eleventh request's work read, not yet its tally")
	w := push(1, 7, 4, 11)
	require.Equal(t, http.StatusNoContent, w.Code, "its tally now: one more tallied, no more work — %s", w.Body.String())
	require.Equal(t, http.StatusNoContent, push(2, 8, 5, 13).Code)
	snap, err := src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	require.Len(t, snap.Tallies, 1)
	assert.Equal(t, int64(1), snap.Tallies[0].On.N)
	assert.Equal(t, int64(1), snap.Tallies[0].Off.N)
}

// TestPushTakesARecorderUnderLoad: a Recorder whose requests end while
// its pushes are read — some between its reads of the tallies and of the
// work — has every push taken.
func TestPushTakesARecorderUnderLoad(t *testing.T) {
	c := &clock{t: t0}
	src := newPushSource(c)
	start := t0.Add(-time.Minute)
	rec := signals.NewRecorder(signals.Config{})
	require.NoError(t, rec.Features("recs", "reviews"))
	stop := tallying(rec, func(i int) time.Duration { return time.Duration(1+i%7) * time.Millisecond })
	refused := 0
	for range 300 {
		c.t = c.t.Add(10 * time.Millisecond)
		if w := post(src, body(t, rec, "a", start, c.t)); w.Code != http.StatusNoContent {
			if refused++; refused == 1 {
				t.Log(w.Body.String())
			}
		}
	}
	stop()
	assert.Zero(t, refused, "honest pushes refused")
}

// tallying has four goroutines end requests on rec, recs on for every
// other one, the i-th of each taking d(i), until the returned stop.
func tallying(rec *signals.Recorder, d func(i int) time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				tally(rec, "recs", (i+w)%2 == 0, d(i))
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}
