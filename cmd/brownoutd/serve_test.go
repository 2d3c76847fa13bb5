package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/testsrv"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
)

// getJSON decodes a GET of url; t may be an Eventually's collector.
func getJSON(t require.TestingT, url string) map[string]any {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	return m
}

func send(t *testing.T, method, url, token, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestServe runs `brownoutd serve` on 127.0.0.1: an app pushes its
// signals, the daemon evaluates over OFREP, an operator overrides, SIGHUP
// reloads a changed file (the override stays) and refuses a broken one,
// and SIGTERM's context ends it with the state saved.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	opTok, pushTok := "operator-secret-0123456789", "push-secret-0123456789"
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o600))
		return p
	}
	cfg := write("brownoutd.yaml", `tick: 100ms
features:
  - {name: recommendations}
  - {name: reviews}
  - {name: gallery}
cors_origins: [http://127.0.0.1:8081]
auth:
  operator_tokens_file: `+write("ops", "alice "+opTok+"\n")+`
  push_tokens_file: `+write("push", "shop "+pushTok+"\n")+`
`)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errs testsrv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--state-dir", dir, "--config", cfg}, &out, &errs)
	}()
	re := regexp.MustCompile(`serving on (http://[0-9.:]+)`)
	var base string
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(out.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, 10*time.Second, 50*time.Millisecond, "the daemon prints its URL")
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}, 5*time.Second, 50*time.Millisecond, "ready")
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		req, _ := http.NewRequest(http.MethodHead, base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode, "HEAD %s: health checks use it", path)
	}

	// An app pushes its signals: slow answers.
	rec := signals.NewRecorder(signals.Config{})
	p, err := fleet.NewPusher(rec, fleet.PusherConfig{URL: base + "/v1/signals", Instance: "shop-1", Interval: 100 * time.Millisecond, Token: pushTok})
	require.NoError(t, err)
	pctx, pcancel := context.WithCancel(ctx)
	go p.Run(pctx)
	stopLoad := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopLoad:
				return
			case <-time.After(2 * time.Millisecond):
			}
			now := time.Now()
			rec.Arrive(signals.Default)
			rec.Done(signals.Default, now.Add(-900*time.Millisecond), now, false, time.Time{})
		}
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := getJSON(c, base+"/v1/state")
		src := st["sources"].([]any)[0].(map[string]any)
		assert.Equal(c, true, src["ok"])
		assert.Less(c, st["features"].([]any)[0].(map[string]any)["level"].(float64), 1.0)
	}, 10*time.Second, 50*time.Millisecond, "the pushed latency dims recommendations")
	assert.Equal(t, 401, send(t, "POST", base+"/v1/signals", "", `{"v":1,"instance":"x"}`).StatusCode, "pushes need the push token")

	resp := send(t, "POST", base+"/ofrep/v1/evaluate/flags/reviews", "", `{"context":{"targetingKey":"u1"}}`)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, out.String(), "pages of http://127.0.0.1:8081 may evaluate")
	preflight := func() *http.Response {
		req, _ := http.NewRequest("OPTIONS", base+"/ofrep/v1/evaluate/flags", nil)
		req.Header.Set("Origin", "http://127.0.0.1:8081")
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	resp = preflight()
	assert.Equal(t, 204, resp.StatusCode, "the configured origin's preflight")
	assert.Equal(t, "http://127.0.0.1:8081", resp.Header.Get("Access-Control-Allow-Origin"))

	assert.Equal(t, 401, send(t, "PUT", base+"/v1/features/reviews/override", "", `{"level":0.3}`).StatusCode)
	assert.Equal(t, 200, send(t, "PUT", base+"/v1/features/reviews/override", opTok, `{"level":0.3,"ttl":"1h","reason":"war room"}`).StatusCode)

	// SIGHUP with gallery removed and a schedule added: applied, the
	// override kept.
	write("brownoutd.yaml", `tick: 100ms
features:
  - {name: recommendations}
  - {name: reviews}
schedule:
  - {feature: recommendations, from: "2020-01-01 00:00", for: 87600h, max: 0.2, reason: "long sale"}
auth:
  operator_tokens_file: `+filepath.Join(dir, "ops")+`
  push_tokens_file: `+filepath.Join(dir, "push")+`
`)
	// The tokens and origins change before the features, and the
	// defaults after them: wait for the reload's last line, not for one
	// of its effects.
	reloads := strings.Count(errs.String(), `msg="brownoutd: configuration reloaded"`)
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Count(errs.String(), `msg="brownoutd: configuration reloaded"`) > reloads },
		5*time.Second, 50*time.Millisecond, "reloaded")
	assert.Len(t, getJSON(t, base+"/v1/state")["features"].([]any), 2)
	st := getJSON(t, base+"/v1/state")
	rv := st["features"].([]any)[1].(map[string]any)
	assert.Equal(t, 0.3, rv["level"], "the override survived the reload")
	assert.LessOrEqual(t, st["features"].([]any)[0].(map[string]any)["level"].(float64), 0.2, "the schedule caps")
	resp = preflight()
	assert.Equal(t, 403, resp.StatusCode, "the reload withdrew the origin")
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))

	// A broken file: refused, the running configuration kept.
	write("brownoutd.yaml", "features: [{name: a, floor: 7}]\n")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(errs.String(), "reload refused") }, 5*time.Second, 50*time.Millisecond, "the refusal is logged")
	assert.Len(t, getJSON(t, base+"/v1/state")["features"].([]any), 2)

	resp, err = http.Get(base + "/metrics")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"brownout_feature_level", "brownout_ofrep_requests_total", "brownout_source_up", "brownout_flag_evaluations_total"} {
		assert.Contains(t, string(b), m)
	}

	close(stopLoad)
	pcancel()
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("no graceful shutdown")
	}
	saved, err := os.ReadFile(filepath.Join(dir, "operator.json"))
	require.NoError(t, err)
	assert.Contains(t, string(saved), "war room")
}
