package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/load"
	"github.com/brownout/brownout/signals"
)

var ofrepBody = []byte(`{"context":{"targetingKey":"user-123456","segment":"vip"}}`)

// BenchmarkOFREPHandler: one single-flag evaluation through the handler,
// in memory (allocations per request), beside a bare handler that decodes
// the same body and writes a small JSON answer (the anchor).
func BenchmarkOFREPHandler(b *testing.B) {
	a, err := New(Config{Controller: newController(b)})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		h          http.Handler
		hdr        string
	}{
		{"bare", "/", bare{}, ""},
		{"single", "/ofrep/v1/evaluate/flags/recommendations", a.Handler(), ""},
		{"bulk", "/ofrep/v1/evaluate/flags", a.Handler(), ""},
		{"bulk-304", "/ofrep/v1/evaluate/flags", a.Handler(), "etag"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			etag := ""
			if tc.hdr != "" {
				rec := httptest.NewRecorder()
				tc.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, tc.path, bytes.NewReader(ofrepBody)))
				etag = rec.Header().Get("ETag")
			}
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, tc.path, bytes.NewReader(ofrepBody))
				if etag != "" {
					req.Header.Set("If-None-Match", etag)
				}
				rec := httptest.NewRecorder()
				tc.h.ServeHTTP(rec, req)
				if rec.Code != 200 && rec.Code != 304 {
					b.Fatal(rec.Code, rec.Body)
				}
			}
		})
	}
}

// bare is the anchor: decode the evaluation body, answer a small JSON.
type bare struct{}

func (bare) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Context map[string]any `json:"context"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	key, _ := req.Context["targetingKey"].(string)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"key": "recommendations", "value": len(key)%2 == 0, "reason": "SPLIT"})
}

// BenchmarkOFREPLoopback: throughput over 127.0.0.1 with keep-alive
// clients (the same generator for both), reported as req/s; with
// BROWNOUT_OFREP_P99=1 it also runs the OFREP endpoint open loop
// (vegeta, the load package) at half the bare handler's measured rate for
// 10 s while the control loop ticks every 100 ms, and reports the p99 and
// the tick's lag p99.
func BenchmarkOFREPLoopback(b *testing.B) {
	ctl, err := dimmer.New(dimmer.Config{Tick: 100 * time.Millisecond,
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}, {Name: "gallery", Rank: 2}},
		Segments: []dimmer.Segment{{Name: "vip", Offset: 0.2}}})
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(Config{Controller: ctl})
	if err != nil {
		b.Fatal(err)
	}
	serve := func(h http.Handler) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: h}
		go srv.Serve(ln)
		b.Cleanup(func() { srv.Close() })
		return "http://" + ln.Addr().String()
	}
	bareURL, apiURL := serve(bare{}), serve(a.Handler())
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	rates := map[string]float64{}
	for _, tc := range []struct{ name, url string }{
		{"bare", bareURL + "/"},
		{"single", apiURL + "/ofrep/v1/evaluate/flags/recommendations"},
		{"bulk", apiURL + "/ofrep/v1/evaluate/flags"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var n atomic.Int64
			start := time.Now()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Post(tc.url, "application/json", bytes.NewReader(ofrepBody))
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					n.Add(1)
				}
			})
			rate := float64(n.Load()) / time.Since(start).Seconds()
			rates[tc.name] = rate
			b.ReportMetric(rate, "req/s")
			if tc.name != "bare" && rates["bare"] > 0 {
				b.ReportMetric(rate/rates["bare"], "x-bare")
			}
		})
	}
	if os.Getenv("BROWNOUT_OFREP_P99") == "" || rates["bare"] == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx, dimmer.Local(signals.NewRecorder(signals.Config{})))
	half := rates["bare"] / 2
	rep, err := load.Run(ctx, load.Config{Target: apiURL, Skip: 2 * time.Second,
		Phases: []load.Phase{{Name: "half", Rate: half, Duration: 12 * time.Second}},
		Mix:    []load.Kind{{Name: "single", Share: 1, Method: http.MethodPost, Path: "/ofrep/v1/evaluate/flags/recommendations", Body: ofrepBody, Header: http.Header{"Content-Type": {"application/json"}}}}})
	if err != nil {
		b.Fatal(err)
	}
	ph := rep.Phases[0]
	b.Logf("open loop at %.0f req/s (half the bare handler's %.0f): sent %.0f/s, good %.0f/s, p50 %v, p99 %v; tick lag p99 %.1f ms over %d ticks",
		half, rates["bare"], ph.Sent, ph.Goodput, ph.P50, ph.P99, 1000*a.hist.lagP99(), a.hist.ticks())
	b.ReportMetric(float64(ph.P99)/1e6, "p99-ms@half")
	b.ReportMetric(1000*a.hist.lagP99(), "tick-lag-p99-ms")
}
