package api

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
)

// TestShedSeedInTheStreamOnly: the stream's state events carry the shed
// seed the fleet's shedders key their choice with, the same in every
// event of a boot and on every connection; GET /v1/state, which anyone
// reaching the daemon may read, does not.
func TestShedSeedInTheStreamOnly(t *testing.T) {
	f := newFixture(t, Config{EvalTokens: map[string]string{"shop": "eval-token-0123456789"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seedOf := func() dimmer.ShedSeed {
		ch, resp := follow(t, ctx, f.srv.URL+"/v1/stream", "Authorization", "Bearer eval-token-0123456789")
		require.Equal(t, 200, resp.StatusCode)
		var ev struct {
			ShedSeed *dimmer.ShedSeed `json:"shed_seed"`
		}
		require.NoError(t, json.Unmarshal([]byte(next(t, ch, "state", 5*time.Second).data), &ev))
		require.NotNil(t, ev.ShedSeed, "the state event carries the seed")
		return *ev.ShedSeed
	}
	a, b := seedOf(), seedOf()
	assert.Equal(t, a, b, "one seed per boot")
	assert.NotEqual(t, dimmer.ShedSeed{}, a)

	_, st := f.do(t, "GET", "/v1/state", "")
	assert.NotContains(t, st, "shed_seed", "not in the state anyone may read")
	assert.Contains(t, st, "shed", "the state itself is there")

	other := newFixture(t, Config{})
	ch, _ := follow(t, ctx, other.srv.URL+"/v1/stream")
	var ev struct {
		ShedSeed dimmer.ShedSeed `json:"shed_seed"`
	}
	require.NoError(t, json.Unmarshal([]byte(next(t, ch, "state", 5*time.Second).data), &ev))
	assert.NotEqual(t, a, ev.ShedSeed, "another daemon (or boot), another seed")
}
