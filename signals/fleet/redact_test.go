package fleet

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSourcesHideURLPasswords: a scrape target's or a Prometheus'
// password in its URL (http://user:password@host, basic auth) is in no
// name, health report or error of the source: /v1/state shows these to
// whoever reaches the daemon. Before, the source's name carried the URL
// whole.
func TestSourcesHideURLPasswords(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pw, ok := r.BasicAuth(); !ok || pw != "s3cret" {
			http.Error(w, "who", http.StatusUnauthorized)
			return
		}
		http.Error(w, "not today", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	withPW := strings.Replace(srv.URL, "http://", "http://scraper:s3cret@", 1)

	sc, err := NewScrapeSource(ScrapeConfig{Targets: []string{withPW + "/metrics", "http://u:s3cret@127.0.0.1:1/metrics"}, Timeout: time.Second})
	require.NoError(t, err)
	_, err1 := sc.Snapshot(context.Background(), time.Now())
	require.Error(t, err1)
	pq, err := NewPromQLSource(PromQLConfig{Address: withPW, Timeout: time.Second})
	require.NoError(t, err)
	_, err2 := pq.Snapshot(context.Background(), time.Now())
	require.Error(t, err2)
	for _, shown := range []any{sc.Name(), sc.Health(), err1.Error(), pq.Name(), pq.Health(), err2.Error()} {
		b, _ := json.Marshal(shown)
		assert.NotContains(t, string(b), "s3cret")
	}
	assert.Contains(t, sc.Name(), "scraper:xxxxx@", "the user still named")
}
