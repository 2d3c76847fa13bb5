package fleet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/signals"
)

// TestPusherSaysItsService: a Pusher with a Service says it in the
// header on every push (a daemon of several services routes by it); one
// without sends no header; a name a daemon could not have is refused at
// NewPusher.
func TestPusherSaysItsService(t *testing.T) {
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(service.Header)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	rec := signals.NewRecorder(signals.Config{})
	for _, name := range []string{"shop", ""} {
		p, err := NewPusher(rec, PusherConfig{URL: srv.URL + "/v1/signals", Instance: "shop-1", Service: name})
		require.NoError(t, err)
		require.NoError(t, p.Push(context.Background()))
		assert.Equal(t, name, <-got, "the header says the service")
	}
	for _, bad := range []string{"Shop", "a/b", "-a"} {
		_, err := NewPusher(rec, PusherConfig{URL: srv.URL + "/v1/signals", Instance: "shop-1", Service: bad})
		assert.ErrorContains(t, err, "fleet: pusher: service", "%q", bad)
	}
}
