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
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brownout/brownout/dimmer"
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
// BROWNOUT_OFREP_P99=1 it also runs the OFREP endpoint open loop at half
// the bare handler's measured rate for 10 s while the control loop ticks
// every 100 ms, and reports the p99 and the tick's lag p99. (The load
// package's vegeta costs too much per request to send 13 000 a second
// beside the server on 2 cores; openLoop is a lean pacer.)
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
	if n, err := strconv.Atoi(os.Getenv("BROWNOUT_OFREP_WORKERS")); err == nil && n > 0 {
		openLoopWorkers = n
	}
	frac := 0.5
	if f, err := strconv.ParseFloat(os.Getenv("BROWNOUT_OFREP_P99"), 64); err == nil && f > 0 && f <= 1 {
		frac = f // BROWNOUT_OFREP_P99=0.25: another share of the bare rate
	}
	half := rates["bare"] * frac
	_, bp50, bp99, bsent := openLoop(client, bareURL+"/", half, 10*time.Second)
	b.Logf("the bare handler at the same rate: p50 %v, p99 %v (from sending: %v)", bp50, bp99, bsent)
	b.ReportMetric(float64(bp99)/1e6, "bare-p99-ms@half")
	sent, p50, p99, psent := openLoop(client, apiURL+"/ofrep/v1/evaluate/flags/recommendations", half, 10*time.Second)
	b.Logf("open loop at %.0f req/s (%.2f of the bare handler's %.0f): answered %.0f/s, p50 %v, p99 %v from each request's due time, %v from sending; tick lag p99 %.1f ms over %d ticks",
		half, frac, rates["bare"], sent, p50, p99, psent, 1000*a.hist.lagP99(), a.hist.ticks())
	b.ReportMetric(float64(psent)/1e6, "p99-sent-ms@half")
	b.ReportMetric(float64(p99)/1e6, "p99-ms@half")
	b.ReportMetric(1000*a.hist.lagP99(), "tick-lag-p99-ms")
}

// openLoopWorkers send openLoop's requests.
var openLoopWorkers = 16

// openLoop sends POSTs at rate for d, each due at its own time whatever
// the answers before it (64 workers with keep-alive connections; a
// request that finds none free waits, and its latency counts from its due
// time, so the generator's own queueing is not hidden). It returns the
// answered rate, the p50 and p99 from the due times, and the p99 from the
// moments the requests were sent (without the pacer's own lateness).
func openLoop(client *http.Client, url string, rate float64, d time.Duration) (rps float64, p50, p99, p99sent time.Duration) {
	n := int(rate * d.Seconds())
	due := make(chan time.Time, n)
	lat := make([]time.Duration, n)
	svc := make([]time.Duration, n)
	var idx atomic.Int64
	var wg sync.WaitGroup
	for range openLoopWorkers {
		wg.Go(func() {
			for at := range due {
				if w := time.Until(at); w > 0 {
					time.Sleep(w)
				}
				sent := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(ofrepBody))
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				i := idx.Add(1) - 1
				lat[i], svc[i] = time.Since(at), time.Since(sent)
			}
		})
	}
	start := time.Now().Add(50 * time.Millisecond)
	for i := range n {
		due <- start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
	}
	close(due)
	wg.Wait()
	got, sv := lat[:idx.Load()], svc[:idx.Load()]
	slices.Sort(got)
	slices.Sort(sv)
	if len(got) == 0 {
		return 0, 0, 0, 0
	}
	return float64(len(got)) / d.Seconds(), got[len(got)/2], got[len(got)*99/100], sv[len(sv)*99/100]
}
