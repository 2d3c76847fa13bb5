package brownout_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout"
	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
)

// TestFleetService: in fleet mode with a Service, the app's stream and
// pushes name it (a daemon of several services routes by it), its
// provider is registered under the OpenFeature domain of that name, and
// its GET /v1/state says the service. Service without a daemon, or a name
// a daemon could not have, is refused.
func TestFleetService(t *testing.T) {
	ctl, err := dimmer.New(dimmer.Config{Targets: []dimmer.Target{{Signal: signals.LatencyP99, Target: 0.3}},
		Features: []dimmer.Feature{{Name: "suggestions"}, {Name: "spelling", Rank: 1}}})
	require.NoError(t, err)
	push := fleet.NewPushSource(fleet.PushConfig{})
	a, err := api.New(api.Config{Controller: ctl, Push: push, Loopback: true, Service: "search"})
	require.NoError(t, err)
	defer a.Close()
	var mu sync.Mutex
	named := map[string]string{} // path → the service it named
	daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		named[r.URL.Path] = r.Header.Get(service.Header)
		mu.Unlock()
		a.Handler().ServeHTTP(w, r)
	}))
	defer daemon.Close()

	b, err := brownout.New(brownout.Options{Daemon: daemon.URL, Service: "search", Instance: "app-1"})
	require.NoError(t, err)
	_, stop := run(t, b)
	defer stop()
	require.NoError(t, b.RegisterProvider())
	_, err = ctl.Pin("spelling", 0, time.Hour, "test")
	require.NoError(t, err)
	a.Publish(ctl.State())
	client := openfeature.NewClient("search")
	require.Eventually(t, func() bool {
		on, _ := client.BooleanValue(t.Context(), "spelling", true, openfeature.NewEvaluationContext("u1", nil))
		return !on
	}, 10*time.Second, 20*time.Millisecond, "the daemon's pin reaches the app's client of domain search")
	require.Eventually(t, func() bool {
		for _, in := range push.Health().Instances {
			if in.Name == "app-1" && in.OK {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the app pushes its signals")
	mu.Lock()
	assert.Equal(t, map[string]string{"/v1/stream": "search", "/v1/signals": "search"}, named, "the stream and the pushes name the service")
	mu.Unlock()
	ops := httptest.NewServer(b.Handler())
	defer ops.Close()
	assert.Equal(t, "search", fleetState(t, ops.URL).Service)

	for name, o := range map[string]brownout.Options{
		"no daemon":  {Service: "search", Features: features()},
		"a bad name": {Service: "Search/x", Daemon: daemon.URL},
	} {
		_, err := brownout.New(o)
		assert.Error(t, err, name)
	}
}
