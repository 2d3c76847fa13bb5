package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/internal/testsrv"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/signals"
)

// hostileState is a state event of a daemon that does not keep to a
// valid configuration's bounds.
func hostileState(features, segments, featureSegments int) string {
	st := map[string]any{"v": 1, "boot": 1, "generation": 5, "mode": "auto", "reason": "hostile"}
	names := []string{}
	for j := range segments {
		names = append(names, fmt.Sprint("s", j))
	}
	st["segment_names"] = names
	fs := []map[string]any{}
	for i := range features {
		f := map[string]any{"name": fmt.Sprint("f", i), "level": 0.5}
		if i == 0 {
			seg := map[string]float64{}
			for j := range featureSegments {
				seg[fmt.Sprint("s", j)] = 0.5
			}
			f["segments"] = seg
		}
		fs = append(fs, f)
	}
	st["features"] = fs
	b, _ := json.Marshal(st)
	return "id: 1-5\nevent: state\ndata: " + string(b) + "\n\n"
}

// TestRemoteRefusesWhatNoDaemonPublishes: an event over the largest state
// a valid daemon publishes (sent as many data lines), or a state with
// more features or segments than a configuration may declare, ends the
// connection as a bad state does: the follower keeps what it had (here
// the defaults), is not connected, and reads no more of it.
func TestRemoteRefusesWhatNoDaemonPublishes(t *testing.T) {
	line := "data: " + strings.Repeat("x", 1<<20) + "\n"
	var wrote atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /datalines/v1/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: tick\n")
		// Twice the bound: a follower without one takes it all.
		for n := 0; n < 2*dimmer.MaxStateBytes>>20; n++ {
			if _, err := fmt.Fprint(w, line); err != nil {
				return
			}
			wrote.Add(int64(len(line)))
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	for path, ev := range map[string]string{
		"/features":        hostileState(dimmer.MaxFeatures+1, 0, 0),
		"/segments":        hostileState(1, dimmer.MaxSegments+1, 0),
		"/featuresegments": hostileState(1, 0, dimmer.MaxSegments+1),
	} {
		mux.HandleFunc("GET "+path+"/v1/stream", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ev)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for path, want := range map[string]string{
		"/datalines":       "an event over 33554432 bytes",
		"/features":        "features: more than 1000",
		"/segments":        "segment names: more than 32",
		"/featuresegments": "segments: more than 32",
	} {
		logs := &testsrv.Buffer{}
		r, err := provider.NewRemote(provider.RemoteOptions{URL: "http://" + ln.Addr().String() + path,
			Defaults: map[string]bool{"f0": false}, MinBackoff: time.Hour, MaxBackoff: time.Hour,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		require.NoError(t, err)
		rctx, stop := context.WithCancel(ctx)
		go r.Run(rctx)
		require.Eventually(t, func() bool { return strings.Contains(logs.String(), "disconnected") }, 20*time.Second, 10*time.Millisecond, path+": the connection ends")
		stop()
		assert.Contains(t, logs.String(), want, path)
		assert.Equal(t, 0.0, level(r, "f0"), "%s: the default, not the bad state", path)
		assert.False(t, r.Connected(), path)
	}
	assert.Less(t, wrote.Load(), int64(dimmer.MaxStateBytes+8<<20), "the follower stopped reading at the bound (and the sockets' buffers)")
}

// TestRemoteAcceptsTheLargestValidState: a daemon at every bound of its
// configuration — MaxFeatures features and MaxSegments segments, every
// name MaxName bytes long, every reason MaxReason, all of it text that
// JSON escapes six-fold, every feature pinned or capped by its own
// schedule entry — publishes a state its followers take whole.
func TestRemoteAcceptsTheLargestValidState(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a state of ~20 MB")
	}
	if race.Enabled {
		t.Skip("encodes and decodes ~20 MB of JSON, 20 s under -race: make test runs it without, with the heap bounds")
	}
	worst := func(prefix string, n, size int) string {
		s := fmt.Sprintf("%s%d", prefix, n)
		return s + strings.Repeat("<", size-len(s))
	}
	now := time.Now()
	cfg := dimmer.Config{Targets: []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}}}
	for i := range dimmer.MaxFeatures {
		name := worst("f", i, dimmer.MaxName)
		cfg.Features = append(cfg.Features, dimmer.Feature{Name: name, Rank: i})
		cfg.Schedule = append(cfg.Schedule, dimmer.Cap{Feature: name, Max: 0.5, From: now.Add(-time.Minute), For: time.Hour,
			Reason: worst("cap", i, dimmer.MaxReason)})
	}
	for j := range dimmer.MaxSegments {
		cfg.Segments = append(cfg.Segments, dimmer.Segment{Name: worst("s", j, dimmer.MaxName), Offset: 0.1})
	}
	ctl, err := dimmer.New(cfg)
	require.NoError(t, err)
	for i := 0; i < dimmer.MaxFeatures; i += 2 {
		_, err := ctl.PinAt(now, cfg.Features[i].Name, 0.25, time.Hour, worst("pin", i, dimmer.MaxReason))
		require.NoError(t, err)
	}
	ctl.Step(now, signals.Snapshot{Time: now})
	a, err := api.New(api.Config{Controller: ctl})
	require.NoError(t, err)
	b, err := json.Marshal(a.State())
	require.NoError(t, err)
	t.Logf("the largest valid state: %d bytes", len(b))
	assert.Greater(t, len(b), 16<<20, "the test is near the bound")
	assert.LessOrEqual(t, len(b), dimmer.MaxStateBytes)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: a.Handler()}
	go srv.Serve(ln)
	defer srv.Close()
	defer a.Shutdown()
	r, err := provider.NewRemote(provider.RemoteOptions{URL: "http://" + ln.Addr().String()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	require.Eventually(t, r.Connected, 30*time.Second, 10*time.Millisecond, "the follower takes the state")
	st := r.State()
	assert.Equal(t, dimmer.MaxFeatures, st.NumFeatures())
	assert.Equal(t, dimmer.MaxSegments, st.NumSegments())
	assert.Equal(t, 0.25, level(r, cfg.Features[0].Name), "pinned")
	assert.Equal(t, 0.5, level(r, cfg.Features[1].Name), "capped")
}
