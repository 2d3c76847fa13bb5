package deps

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/hostile"
)

// TestRoutesAreLocal: what a page in a browser on the dependencies'
// machine could send — another site's fetch or form, a name re-pointed at
// 127.0.0.1, an untyped body — gets 403 problem+json from the gateway's
// void, its fault knobs and its listing, and voids nothing; the shop's
// own client passes.
func TestRoutesAreLocal(t *testing.T) {
	gw := NewPaymentGateway(Options{})
	srv, err := gw.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer srv.Close()
	ctx := context.Background()
	pc := PaymentClient{BaseURL: srv.URL}
	id, err := pc.Charge(ctx, "o1", 1000, "k1")
	require.NoError(t, err)
	fault := gw.Fault()

	_, port, _ := net.SplitHostPort(hostile.Addr(t, srv.URL))
	c := hostile.Client()
	for _, a := range hostile.Attacks(port) {
		for _, w := range []struct{ method, path, body string }{
			{"POST", "/v1/charges/" + id + "/void", `{}`},
			{"PUT", "/admin/fault", `{"slow":true}`},
			{"POST", "/v1/cancels", `{"idempotency_key":"k1"}`},
		} {
			resp, err := c.Do(a.Request(t, w.method, srv.URL+w.path, w.body))
			require.NoError(t, err)
			hostile.RequireProblem(t, resp, http.StatusForbidden, a.Name+": "+w.method+" "+w.path)
		}
		if _, typed := a.Header["Content-Type"]; typed || a.Body != "" || a.Empty {
			continue // a read has no body to type
		}
		resp, err := c.Do(a.Request(t, "GET", srv.URL+"/admin/charges", ""))
		require.NoError(t, err)
		hostile.RequireProblem(t, resp, http.StatusForbidden, a.Name+": GET /admin/charges")
	}
	assert.Equal(t, fault, gw.Fault(), "no knob changed")
	charges, err := pc.Charges(ctx)
	require.NoError(t, err)
	require.Len(t, charges, 1)
	assert.False(t, charges[0].Voided, "nothing voided")

	require.NoError(t, pc.Void(ctx, id), "the shop's own void")
	charges, err = pc.Charges(ctx)
	require.NoError(t, err)
	assert.True(t, charges[0].Voided)
}
