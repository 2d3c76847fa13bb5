package provider_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/provider"
)

// TestRemoteChargesTheDaemonsRequestCost: a follower charges a request
// what the daemon's state says (request_cost), at least a hundredth; 1
// from a daemon that does not say; a state whose request_cost is outside
// 0..1 is refused as a whole, as one with a level outside it.
func TestRemoteChargesTheDaemonsRequestCost(t *testing.T) {
	var served atomic.Int32
	mux := http.NewServeMux()
	for path, cost := range map[string]string{"/half": `,"request_cost":0.4`, "/old": ``, "/tiny": `,"request_cost":0.0001`, "/bad": `,"request_cost":1.5`, "/negative": `,"request_cost":-1`} {
		mux.HandleFunc("GET "+path+"/v1/stream", func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: state\ndata: {\"v\":1,\"boot\":1,\"generation\":2%s,\"features\":[{\"name\":\"x\",\"level\":0.5}]}\n\n", cost)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base := srv.URL
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range []struct {
		path     string
		followed bool
		want     float64
	}{{"/half", true, 0.4}, {"/old", true, 1}, {"/tiny", true, 0.01}, {"/bad", false, 1}, {"/negative", false, 1}} {
		r, err := provider.NewRemote(provider.RemoteOptions{URL: base + tc.path, Defaults: map[string]bool{"x": true},
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond})
		require.NoError(t, err)
		assert.Equal(t, 1.0, r.RequestCost(), "%s: nothing heard yet", tc.path)
		before := served.Load()
		go r.Run(ctx)
		if tc.followed {
			require.Eventually(t, r.Connected, 5*time.Second, 5*time.Millisecond, tc.path)
		} else {
			require.Eventually(t, func() bool { return served.Load() >= before+2 }, 5*time.Second, 5*time.Millisecond, "%s: tried again", tc.path)
			assert.False(t, r.Connected(), "%s: refused", tc.path)
		}
		assert.Equal(t, tc.want, r.RequestCost(), tc.path)
	}
}
