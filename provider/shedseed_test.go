package provider_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
)

// TestFleetShedsTheSameClients: two instances follow one daemon; each
// shedder keys its choice with the seed the daemon published, so the
// cascade refuses the same users on both — and the seed outlives a
// restart of the app in its state file.
func TestFleetShedsTheSameClients(t *testing.T) {
	d := startDaemon(t, "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	file := filepath.Join(t.TempDir(), "state.json")
	var remotes []*provider.Remote
	for i := range 2 {
		o := provider.RemoteOptions{URL: "http://" + d.addr, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
		if i == 0 {
			o.StateFile = file
		}
		r, err := provider.NewRemote(o)
		require.NoError(t, err)
		_, ok := r.ShedSeed()
		assert.False(t, ok, "no seed before the daemon is heard")
		go r.Run(ctx)
		remotes = append(remotes, r)
	}
	for _, r := range remotes {
		require.Eventually(t, func() bool { _, ok := r.ShedSeed(); return ok }, 5*time.Second, 10*time.Millisecond, "the seed arrives")
	}
	a, _ := remotes[0].ShedSeed()
	b, _ := remotes[1].ShedSeed()
	assert.Equal(t, a, b, "one daemon, one seed")

	// Two instances' shedders, the cascade at half the sheddable clients.
	served := func(r *provider.Remote, user string) bool {
		s, err := shed.New(shed.Config{ShedLevel: func() float64 { return 0.5 }, ShedSeed: r.ShedSeed,
			Classify: func(*http.Request) signals.Class { return signals.Sheddable }})
		require.NoError(t, err)
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-User-ID", user)
		w := httptest.NewRecorder()
		s.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, req)
		return w.Code == http.StatusOK
	}
	shedOn := 0
	for i := range 200 {
		user := "user-" + strconv.Itoa(i)
		one := served(remotes[0], user)
		require.Equal(t, one, served(remotes[1], user), "%s: the same decision on both instances", user)
		if !one {
			shedOn++
		}
	}
	assert.InDelta(t, 100, shedOn, 40, "about half the users shed")

	// The app restarts with the daemon away: the seed comes from its file.
	d.kill()
	r, err := provider.NewRemote(provider.RemoteOptions{URL: "http://" + d.addr, StateFile: file})
	require.NoError(t, err)
	c, ok := r.ShedSeed()
	assert.True(t, ok)
	assert.Equal(t, a, c, "the last-known seed")
}
