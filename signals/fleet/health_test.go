package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

func TestScrapeSourceHealth(t *testing.T) {
	good := newInstance(t, true, false)
	var broken atomic.Bool
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		good.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(flaky.Close)
	src, err := NewScrapeSource(ScrapeConfig{Targets: []string{good.srv.URL, flaky.URL}})
	require.NoError(t, err)

	h := src.Health()
	assert.False(t, h.OK, "no Snapshot yet")
	assert.Equal(t, []signals.InstanceHealth{{Name: good.srv.URL}, {Name: flaky.URL}}, h.Instances)

	_, err = src.Snapshot(context.Background(), t0)
	require.NoError(t, err)
	h = src.Health()
	assert.True(t, h.OK)
	assert.Equal(t, t0, h.LastSuccess)
	assert.Equal(t, []signals.InstanceHealth{{Name: good.srv.URL, OK: true, LastSeen: t0}, {Name: flaky.URL, OK: true, LastSeen: t0}}, h.Instances)

	broken.Store(true)
	_, err = src.Snapshot(context.Background(), t0.Add(1e9))
	require.Error(t, err)
	h = src.Health()
	assert.False(t, h.OK)
	assert.Equal(t, t0, h.LastSuccess)
	assert.Equal(t, t0.Add(1e9), h.LastErrorAt)
	assert.Equal(t, uint64(1), h.Errors)
	assert.Contains(t, h.LastError, "HTTP 500")
	assert.True(t, h.Instances[0].OK)
	assert.False(t, h.Instances[1].OK)
	assert.Equal(t, t0, h.Instances[1].LastSeen, "the last scrape that gave signals")
	assert.Contains(t, h.Instances[1].LastError, "HTTP 500")
}

func TestPromQLSourceHealth(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.Form.Get("query"), "broken") {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`))
			return
		}
		if strings.Contains(r.Form.Get("query"), countLabel) {
			w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`)) // the period's counts: none yet
			return
		}
		w.Write([]byte(`{"status":"success","data":{"resultType":"scalar","result":[1700000000,"0.5"]}}`))
	}))
	t.Cleanup(srv.Close)
	src, err := NewPromQLSource(PromQLConfig{Address: srv.URL, Queries: map[signals.Key]string{signals.LatencyP99: "vector(0.5)"}})
	require.NoError(t, err)
	snap, err := src.Snapshot(context.Background(), t0)
	require.NoError(t, err)
	assert.Equal(t, time.Minute, snap.Window, "the queries' range, for the controller's settle")
	h := src.Health()
	assert.Equal(t, signals.SourceHealth{Name: "promql(" + srv.URL + ")", OK: true, LastSuccess: t0}, h)

	src, err = NewPromQLSource(PromQLConfig{Address: srv.URL, Queries: map[signals.Key]string{signals.LatencyP99: "broken("}})
	require.NoError(t, err)
	_, err = src.Snapshot(context.Background(), t0)
	require.Error(t, err)
	h = src.Health()
	assert.False(t, h.OK)
	assert.Equal(t, uint64(1), h.Errors)
	assert.Contains(t, h.LastError, "latency.p99")
}

// TestHealthErrorIsBounded: a source's last error, which may join a part
// per instance, is kept to maxHealthError bytes and says how long it was.
func TestHealthErrorIsBounded(t *testing.T) {
	var h health
	long := strings.Repeat("instance x: bucket bounds differ; ", 1000)
	h.record(time.Unix(1, 0), errors.New(long))
	got := h.report("push").LastError
	assert.LessOrEqual(t, len(got), maxHealthError+32)
	assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(got, fmt.Sprintf("… (%d bytes)", len(long)))))
	assert.True(t, strings.HasSuffix(got, fmt.Sprintf("… (%d bytes)", len(long))))
	h.record(time.Unix(2, 0), errors.New("short"))
	assert.Equal(t, "short", h.report("push").LastError)
}
