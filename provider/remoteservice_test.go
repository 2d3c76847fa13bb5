package provider_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/provider"
)

// TestRemoteSaysItsService: a Remote with a Service names it on its
// stream (a daemon of several services routes by it) and follows what
// that service's route answers; a name a daemon could not have is
// refused at NewRemote.
func TestRemoteSaysItsService(t *testing.T) {
	d := startDaemon(t, "127.0.0.1:0")
	got := make(chan string, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Get(service.Header):
		default:
		}
		d.api.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	r, err := provider.NewRemote(provider.RemoteOptions{URL: srv.URL, Service: "shop", MaxBackoff: 200 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go r.Run(ctx)
	assert.Equal(t, "shop", <-got)
	d.change(t, 0.25)
	require.Eventually(t, func() bool { return level(r, "recommendations") == 0.25 }, 5*time.Second, 10*time.Millisecond)

	for _, bad := range []string{"Shop", "a/b", "../x"} {
		_, err := provider.NewRemote(provider.RemoteOptions{URL: srv.URL, Service: bad})
		assert.ErrorContains(t, err, "provider: remote: service", "%q", bad)
	}
}
