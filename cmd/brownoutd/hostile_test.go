package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/internal/hostile"
	"github.com/brownout/brownout/internal/server"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
)

// keyBytes is the size of a hostile client key: near the servers' header
// cap (server.MaxHeaderBytes, which net/http enforces with 4 KiB of
// slack), and within the API's 64 KiB body cap with OFREP's JSON around it.
const keyBytes = 60 << 10

// pushBuckets is the number of native buckets in a hostile instance's
// push: about what a Recorder's latency holds under a varied load.
const pushBuckets = 100

// TestHostileClients runs `brownoutd serve` on its defaults over
// 127.0.0.1 (the push source, no tokens: the local operator writes
// without one) — but for one origin allowed to evaluate from a browser,
// the page of another local port that the attacks use, so that they show
// its writes refused as any other site's — and attacks it as a page in
// the operator's browser, a slow
// client and a noisy neighbour would; then floods it with many client
// keys, addresses, pushing instances and unread streams, each bounded in
// its live heap.
func TestHostileClients(t *testing.T) {
	const allowed = "http://127.0.0.1:1" // hostile.Attacks' page of another local port
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", t.TempDir(), "--cors-origin", allowed)
	push := `{"v":1,"instance":"evil","classes":{"default":{"arrived":1000000,"completed":0,"failed":1000000}}}`
	state := func(tb testing.TB) string {
		st := stateOf(t, d.base)
		var audited []any // the operators' changes (the controller's own events come and go)
		for _, e := range getJSON(t, d.base+"/v1/events")["events"].([]any) {
			if who := e.(map[string]any)["who"]; who != nil {
				audited = append(audited, e)
			}
		}
		b, _ := json.Marshal(struct {
			Frozen, Shadow bool
			Overrides      []any
			Instances      int
			PushErrors     uint64
			Audited        []any
		}{st.Frozen, st.Shadow, overrides(st.Features), len(st.Sources[0].Instances), st.Sources[0].Errors, audited})
		return string(b)
	}
	alive := func(tb testing.TB) {
		resp, err := hostile.Client().Get(d.base + "/v1/state")
		require.NoError(tb, err)
		resp.Body.Close()
		require.Equal(tb, 200, resp.StatusCode)
	}
	hostile.Target{
		Base: d.base,
		Writes: []hostile.Write{
			{Method: "POST", Path: "/v1/freeze", Body: `{"reason":"pwned"}`},
			{Method: "PUT", Path: "/v1/features/recommendations/override", Body: `{"level":0,"ttl":"168h","reason":"pwned"}`},
			{Method: "PUT", Path: "/v1/shadow", Body: `{"on":true}`},
			{Method: "POST", Path: "/v1/signals", Body: push},
		},
		State:       state,
		CORSOrigins: []string{allowed},
		Stalls: []hostile.Stall{
			{Method: "POST", Path: "/v1/freeze", Sent: "{", Length: 100, Want: http.StatusRequestTimeout},
			{Method: "POST", Path: "/v1/signals", Sent: `{"v":1,`, Length: 1000, Want: http.StatusRequestTimeout},
			{Method: "POST", Path: "/ofrep/v1/evaluate/flags", Sent: `{"context":`, Length: 1000, Want: http.StatusRequestTimeout, OFREP: true},
			{Method: "POST", Path: "/v1/freeze", Header: http.Header{"Origin": {"https://evil.example"}}, Sent: "{", Length: 100, Want: http.StatusForbidden},
		},
		BodyTimeout:    server.BodyTimeout,
		HeaderTimeout:  server.ReadHeaderTimeout,
		MaxHeaderBytes: server.MaxHeaderBytes,
		Stream:         "/v1/stream",
		Streams:        200,
		Alive:          alive,
		Reads:          append(apiReads(), hostile.Read{Method: "GET", Path: "/metrics"}, hostile.Read{Method: "GET", Path: "/"}, hostile.Read{Method: "GET", Path: "/healthz"}),

		GC: runtime.GC,
		Floods: []hostile.Flood{
			{
				Name: "distinct client keys near the header cap",
				N:    300,
				Request: func(tb testing.TB, i int) *http.Request {
					key := hostile.Key(i, keyBytes)
					req := newRequest(tb, "POST", d.base+"/ofrep/v1/evaluate/flags", `{"context":{"targetingKey":"`+key+`"}}`)
					req.Header.Set("X-User-ID", key)
					return req
				},
				Allow: []int{http.StatusOK},
				OFREP: true,
				Keep:  1 << 10,
				Why:   "nothing is kept per client: OFREP answers from the published state, counted by endpoint and status only",
			},
			{
				Name:    "rotating addresses",
				N:       500,
				From:    hostile.Loopback,
				Request: func(tb testing.TB, i int) *http.Request { return newRequest(tb, "GET", d.base+"/v1/state", "") },
				Allow:   []int{http.StatusOK},
				Keep:    1 << 10,
				Why:     "nothing is kept per address",
			},
			{
				Name: "many pushing instances",
				N:    fleet.DefaultMaxInstances + 50,
				Request: func(tb testing.TB, i int) *http.Request {
					return newRequest(tb, "POST", d.base+"/v1/signals", pushOf(fmt.Sprintf("hostile-%04d", i), time.Now(), pushBuckets))
				},
				Allow: []int{http.StatusNoContent, http.StatusTooManyRequests},
				Keep:  8 << 10,
				Why:   fmt.Sprintf("the source keeps at most %d instances, each here one reading of %d buckets (~35 B each: 4 KB) and its bookkeeping", fleet.DefaultMaxInstances, pushBuckets+16),
				Check: func(tb testing.TB, statuses []int, _ time.Duration) {
					assert.Equal(tb, fleet.DefaultMaxInstances, hostile.Count(statuses, http.StatusNoContent), "instances taken")
					assert.Equal(tb, 50, hostile.Count(statuses, http.StatusTooManyRequests), "instances past the cap refused")
					st := stateOf(t, d.base)
					var names []string
					for _, in := range st.Sources[0].Instances {
						names = append(names, in.Name)
					}
					assert.Len(tb, names, fleet.DefaultMaxInstances, "the source keeps its cap")
					assert.NotContains(tb, names, fmt.Sprintf("hostile-%04d", fleet.DefaultMaxInstances), "a refused instance is not kept")
				},
			},
		},
		FloodStreams: []hostile.StreamPath{{Path: "/v1/stream"}, {Path: "/ofrep/v1/events", OFREP: true}},
		MaxStreams:   api.DefaultMaxStreams,
		PerClient:    server.DefaultPerClient,
		StreamKeep:   streamKeep,
		StreamWhy:    streamWhy,
	}.Run(t)
}

// streamKeep is what an unread stream may keep in the server's heap, and
// streamWhy says why: net/http's buffers for its connection (4 KiB read,
// 4 KiB write, 2 KiB chunking), its request and response (~4 KiB), the
// stream's first state event (~3 KiB), subscriber and timers, and the
// test's own end of the connection (the server runs in the test's
// process): about 19 KiB measured.
const (
	streamKeep = 24 << 10
	streamWhy  = "a connection's buffers (10 KiB), request and response, the stream's state event, subscriber and timers, and the test's end: ~19 KiB measured"
)

// apiReads are the API's reads, which a loopback server without tokens
// must refuse to a rebound page or another site's.
func apiReads() []hostile.Read {
	ctx := `{"context":{"targetingKey":"u1"}}`
	return []hostile.Read{
		{Method: "GET", Path: "/v1/state"},
		{Method: "GET", Path: "/v1/history"},
		{Method: "GET", Path: "/v1/events"},
		{Method: "GET", Path: "/v1/stream"},
		{Method: "POST", Path: "/v1/stream/token"},
		{Method: "GET", Path: "/ofrep/v1/events", OFREP: true},
		{Method: "POST", Path: "/ofrep/v1/evaluate/flags", Body: ctx, OFREP: true},
		{Method: "POST", Path: "/ofrep/v1/evaluate/flags/recommendations", Body: ctx, OFREP: true},
	}
}

func newRequest(tb testing.TB, method, url, body string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(tb, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// pushOf is a push of instance at time at, as a Pusher sends it: a
// latency histogram of the default classic buckets and n native ones, and
// one class's counts.
func pushOf(instance string, at time.Time, n int) string {
	var b strings.Builder
	ts := at.UTC().Format(time.RFC3339Nano)
	fmt.Fprintf(&b, `{"v":1,"instance":%q,"time":%q,"start":%q,"latency":{"count":%d,"sum":1,"buckets":[`, instance, ts, ts, n)
	for i, ub := range signals.DefaultBuckets() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "[%g,0]", ub)
	}
	b.WriteString(`],"native":{"schema":4,"buckets":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "[%d,1]", i-n/2)
	}
	fmt.Fprintf(&b, `]}},"classes":{"default":{"arrived":%d,"completed":%d,"good":%d}}}`, n, n, n)
	return b.String()
}

func overrides(fs []api.FeatureJSON) []any {
	var out []any
	for _, f := range fs {
		if f.Override != nil {
			out = append(out, fmt.Sprintf("%s %v %v", f.Name, f.Override.Level, f.Override.Until))
		}
	}
	return out
}
