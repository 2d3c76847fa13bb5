package shed

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/brownout/brownout/internal/hostile"
	"github.com/brownout/brownout/internal/race"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeapRateLimitKeys: 60 clients with unique 800 KB user ids through
// the middleware's rate limit (and a RateLimiter keyed by them) leave a
// few KB behind, not the ids (they kept 85 MB when the limits kept their
// keys verbatim). Without -race, whose allocations would blur the figure.
func TestHeapRateLimitKeys(t *testing.T) {
	if race.Enabled {
		t.Skip("heap figures are meaningless under -race")
	}
	s, err := New(Config{Now: fixedNow, RateLimit: &RateLimitConfig{}})
	require.NoError(t, err)
	h := s.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rl, err := NewRateLimiter(RateLimitConfig{})
	require.NoError(t, err)
	ids := make([]string, 60)
	for i := range ids {
		ids[i] = fmt.Sprintf("%03d", i) + strings.Repeat("x", 800<<10)
	}
	grew := hostile.HeapGrowth(func() {
		for _, id := range ids {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set("X-User-ID", id)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			require.Equal(t, http.StatusOK, w.Code)
			rl.Allow(nil, "u:"+id, t0)
		}
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(rl)
	runtime.KeepAlive(ids)
	t.Logf("heap grew %.1f KB for 2 × 60 clients with 800 KB keys", float64(grew)/1e3)
	assert.Less(t, grew, int64(256<<10), "about 250 bytes a client, not its key")
}
