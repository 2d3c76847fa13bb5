package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/internal/hostile"
	"github.com/brownout/brownout/internal/server"
)

// TestHostileClients runs `brownoutd serve` on its defaults over
// 127.0.0.1 (the push source, no tokens: the local operator writes
// without one) and attacks it as a page in the operator's browser, a slow
// client and a noisy neighbour would.
func TestHostileClients(t *testing.T) {
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", t.TempDir())
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
	hostile.Target{
		Base: d.base,
		Writes: []hostile.Write{
			{Method: "POST", Path: "/v1/freeze", Body: `{"reason":"pwned"}`},
			{Method: "PUT", Path: "/v1/features/recommendations/override", Body: `{"level":0,"ttl":"168h","reason":"pwned"}`},
			{Method: "PUT", Path: "/v1/shadow", Body: `{"on":true}`},
			{Method: "POST", Path: "/v1/signals", Body: push},
		},
		State: state,
		Stalls: []hostile.Stall{
			{Method: "POST", Path: "/v1/freeze", Sent: "{", Length: 100, Want: http.StatusRequestTimeout},
			{Method: "POST", Path: "/v1/signals", Sent: `{"v":1,`, Length: 1000, Want: 0},
			{Method: "POST", Path: "/ofrep/v1/evaluate/flags", Sent: `{"context":`, Length: 1000, Want: http.StatusRequestTimeout, OFREP: true},
			{Method: "POST", Path: "/v1/freeze", Header: http.Header{"Origin": {"https://evil.example"}}, Sent: "{", Length: 100, Want: http.StatusForbidden},
		},
		BodyTimeout:    server.BodyTimeout,
		HeaderTimeout:  server.ReadHeaderTimeout,
		MaxHeaderBytes: server.MaxHeaderBytes,
		Stream:         "/v1/stream",
		Streams:        200,
		Alive: func(tb testing.TB) {
			resp, err := http.Get(d.base + "/v1/state")
			require.NoError(tb, err)
			resp.Body.Close()
			require.Equal(tb, 200, resp.StatusCode)
		},
	}.Run(t)
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
