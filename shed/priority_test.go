package shed

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// TestClientCannotClaimCritical: under a cascade that sheds every
// sheddable and default request, a client's "X-Priority: critical" gets
// it nothing — on a Shedder's defaults or on a route that is not critical
// — but it may lower its class; with TrustPriority (callers that are our
// own services) the header decides, raising a route's class too.
func TestClientCannotClaimCritical(t *testing.T) {
	routes, err := NewRoutes(
		Route{Pattern: "POST /checkout", Class: signals.Critical},
		Route{Pattern: "GET /inventory", Class: signals.Default},
	)
	require.NoError(t, err)
	for _, tc := range []struct {
		name         string
		routes       bool
		method, path string
		header       string
		plain, trust int // status without and with TrustPriority
	}{
		{"no route, critical", false, "GET", "/", "critical", 503, 200},
		{"no route, none", false, "GET", "/", "", 503, 503},
		{"no route, sheddable", false, "GET", "/", "sheddable", 503, 503},
		{"default route, critical", true, "GET", "/inventory", "critical", 503, 200},
		{"unmatched, critical", true, "GET", "/else", "critical", 503, 200},
		{"critical route, none", true, "POST", "/checkout", "", 200, 200},
		{"critical route, lowered", true, "POST", "/checkout", "sheddable", 503, 503},
	} {
		for _, trust := range []bool{false, true} {
			cfg := Config{ShedLevel: func() float64 { return 2 }, TrustPriority: trust}
			if tc.routes {
				cfg.Classify = routes.Classify
			}
			s, err := New(cfg)
			require.NoError(t, err)
			h := s.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			req := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.header != "" {
				req.Header.Set(signals.PriorityHeader, tc.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			want := tc.plain
			if trust {
				want = tc.trust
			}
			assert.Equal(t, want, w.Code, "%s, TrustPriority %v", tc.name, trust)
		}
	}
}
