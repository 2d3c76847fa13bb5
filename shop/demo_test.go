package shop

import (
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/hostile"
)

// TestDemoEndpointsAreLocal: what a page in a browser on the shop's
// machine could send — another site's fetch or form, a name re-pointed at
// 127.0.0.1, an untyped body — gets 403 problem+json from every demo
// endpoint and slows nothing down; curl and the sale's own calls pass.
func TestDemoEndpointsAreLocal(t *testing.T) {
	s, srv := newShop(t, Brownout)
	_, port, _ := net.SplitHostPort(hostile.Addr(t, srv.URL))
	c := hostile.Client()
	for _, a := range hostile.Attacks(port) {
		resp, err := c.Do(a.Request(t, "PUT", srv.URL+"/api/demo/slowdown", `{"factor":100}`))
		require.NoError(t, err)
		p := hostile.RequireProblem(t, resp, http.StatusForbidden, a.Name+": PUT /api/demo/slowdown")
		assert.Regexp(t, "cross-site|json-required|proxied", p.Type, a.Name)
	}
	assert.Equal(t, 1.0, s.pool.Slowdown(), "nothing slowed down")
	for _, a := range hostile.Attacks(port) {
		if _, typed := a.Header["Content-Type"]; typed || a.Body != "" || a.Empty {
			continue // a read has no body to type
		}
		for _, path := range []string{"/api/demo/deps", "/api/demo/state", "/api/demo/report"} {
			resp, err := c.Do(a.Request(t, "GET", srv.URL+path, ""))
			require.NoError(t, err)
			hostile.RequireProblem(t, resp, http.StatusForbidden, a.Name+": GET "+path)
		}
	}

	resp, _ := send(t, srv, call{"PUT", "/api/demo/slowdown", `{"factor":2}`, nil})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 2.0, s.pool.Slowdown())
	resp, _ = send(t, srv, call{"GET", "/api/demo/deps", "", map[string]string{"Sec-Fetch-Site": "none"}})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "typed in by the user")
}

// TestSaleReportSince: a report over a run is the counts' increase, the
// sections' shares of the run's pages alone, the state as it is.
func TestSaleReportSince(t *testing.T) {
	base := SaleReport{Orders: 80, Replays: 3, DealsRefused: 18, Absorbed: 17, Queued: 60,
		Sections: map[string]SectionShare{"reviews": sectionShare([4]int64{10, 0, 0, 0}), "gallery": sectionShare([4]int64{4, 0, 0, 0})}}
	now := SaleReport{Orders: 100, Replays: 5, DealsRefused: 20, Absorbed: 17, Queued: 2, Delivered: 20, StockOK: true,
		Sections: map[string]SectionShare{"reviews": sectionShare([4]int64{12, 2, 6, 0}), "gallery": sectionShare([4]int64{4, 0, 0, 0})}}
	r := now.Since(base)
	assert.Equal(t, SaleReport{Orders: 20, Replays: 2, DealsRefused: 2, Queued: 2, Delivered: 20, StockOK: true,
		Sections: map[string]SectionShare{"reviews": {Served: 0.4, Stale: 0.2, Dimmed: 0.6, Pages: [4]int64{2, 2, 6, 0}}}}, r)
	old := SaleReport{Sections: map[string]SectionShare{"reviews": {Served: 0.5, Dimmed: 0.5}}} // no counts
	assert.Equal(t, old.Sections, old.Since(base).Sections, "a shop without counts keeps its shares")
}
