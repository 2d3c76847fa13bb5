package api

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

// fakeStore records changes; down makes it unreachable, and applied
// says whether this replica serves them (at generation gen).
type fakeStore struct {
	mu      sync.Mutex
	changes []Change
	notes   []Event
	down    bool
	applied bool
	gen     uint64
}

func (s *fakeStore) Change(ctx context.Context, c Change) (ChangeResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return ChangeResult{}, ErrStoreDown
	}
	if c.Kind == "release" {
		return ChangeResult{}, dimmer.ErrNotPinned
	}
	s.changes = append(s.changes, c)
	return ChangeResult{Version: uint64(len(s.changes)), Until: t0.Add(c.TTL)}, nil
}

func (s *fakeStore) Applied(ctx context.Context, v uint64) (uint64, error) {
	s.mu.Lock()
	ok, gen := s.applied, s.gen
	s.mu.Unlock()
	if ok {
		return gen, nil
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

func (s *fakeStore) Note(ctx context.Context, e Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, e)
	return nil
}

// TestStoreWrites: with a store, an operator's write is recorded there,
// not applied to the local controller, and answered with the generation
// that serves it; a write of an unknown feature never reaches it.
func TestStoreWrites(t *testing.T) {
	st := &fakeStore{applied: true, gen: 42}
	f := newFixture(t, Config{Store: st, Loopback: true, StateDir: t.TempDir()})
	resp, body := f.do(t, "PUT", "/v1/features/reviews/override", `{"level":0.3,"ttl":"10m","reason":"incident"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%v", body)
	assert.Equal(t, 42.0, body["generation"])
	assert.Equal(t, true, body["applied"])
	require.Len(t, st.changes, 1)
	assert.Equal(t, Change{Kind: "override", Feature: "reviews", Level: 0.3, TTL: 10 * time.Minute, Who: "local", What: "level 0.30 for 10m0s", Reason: "incident"}, st.changes[0])
	_, pinned := f.ctl.State().PinReason(1)
	assert.False(t, pinned, "the leader applies it, not the write's handler")

	resp, _ = f.do(t, "PUT", "/v1/features/nosuch/override", `{"level":0.3}`)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = f.do(t, "DELETE", "/v1/features/reviews/override", ``)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a release of no override")
	for _, w := range [][2]string{{"/v1/freeze", `{"reason":"r"}`}, {"/v1/unfreeze", `{}`}} {
		resp, _ = f.do(t, "POST", w[0], w[1])
		assert.Equal(t, http.StatusOK, resp.StatusCode, w[0])
	}
	resp, _ = f.do(t, "PUT", "/v1/shadow", `{"on":true}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	var kinds []string
	for _, c := range st.changes {
		kinds = append(kinds, c.Kind)
	}
	assert.Equal(t, []string{"override", "freeze", "unfreeze", "shadow"}, kinds)
	f.api.Note("reload", "configuration reloaded")
	assert.Len(t, st.notes, 1, "a reload's event goes to the store")
}

// TestStoreDownRefusesWrites: with the store unreachable a write answers
// 503 problem+json with Retry-After, and reads still answer.
func TestStoreDownRefusesWrites(t *testing.T) {
	st := &fakeStore{down: true}
	f := newFixture(t, Config{Store: st, Loopback: true})
	resp, body := f.do(t, "POST", "/v1/freeze", `{}`)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Equal(t, "urn:brownout:api:store-unavailable", body["type"])
	resp, _ = f.do(t, "GET", "/v1/state", "")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestStoreWriteNotYetApplied: a recorded write that no leader applied
// within applyWait ticks answers 202, applied false.
func TestStoreWriteNotYetApplied(t *testing.T) {
	ctl, err := dimmer.New(dimmer.Config{Tick: 100 * time.Millisecond, Targets: []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}}, Features: []dimmer.Feature{{Name: "reviews"}}})
	require.NoError(t, err)
	f := newFixture(t, Config{Controller: ctl, Store: &fakeStore{}, Loopback: true})
	resp, body := f.do(t, "POST", "/v1/freeze", `{}`)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, false, body["applied"])
	assert.Equal(t, true, body["saved"])
}

// TestClusterEpochAndSecret: two APIs given the same epoch and secret
// give the same ETags and accept each other's stream tokens.
func TestClusterEpochAndSecret(t *testing.T) {
	secret := make([]byte, 32)
	secret[0] = 7
	a := newFixture(t, Config{Epoch: 1234, Secret: secret, EvalTokens: map[string]string{"app": "0123456789abcdef"}})
	b := newFixture(t, Config{Epoch: 1234, Secret: secret, EvalTokens: map[string]string{"app": "0123456789abcdef"}})
	assert.Equal(t, a.api.BulkETag(5), b.api.BulkETag(5))
	resp, body := a.do(t, "POST", "/v1/stream/token", "", "Authorization", "Bearer 0123456789abcdef")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, _, ok := b.api.checkStreamToken(body["token"].(string))
	assert.True(t, ok, "a stream token of one replica is good at another")
	_, err := New(Config{Controller: newController(t), Secret: []byte("short")})
	assert.Error(t, err)
}

// TestReplicaEvents: a replica's /v1/stream says first, before the
// state, whether the replica is current, and then again every tick from
// its API loop (Mirror), with the generation it serves and the lease; a
// lone daemon's stream has no replica events.
func TestReplicaEvents(t *testing.T) {
	ctl, err := dimmer.New(dimmer.Config{Tick: 100 * time.Millisecond,
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}}})
	require.NoError(t, err)
	var mu sync.Mutex
	current := true
	f := newFixture(t, Config{Controller: ctl, Now: time.Now, Store: &fakeStore{}, Epoch: 7, Cluster: func() *ClusterJSON {
		mu.Lock()
		defer mu.Unlock()
		return &ClusterJSON{Replica: "b", Role: "follower", Leader: "a", Term: 3, Store: "ok", Current: current, LeaseSeconds: 3}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.api.Mirror(ctx)
	ch, _ := follow(t, ctx, f.srv.URL+"/v1/stream")
	first := <-ch
	require.Equal(t, "replica", first.event, "the replica's word comes first")
	var r ReplicaJSON
	require.NoError(t, json.Unmarshal([]byte(first.data), &r))
	assert.Equal(t, ReplicaJSON{V: 1, ClusterJSON: &ClusterJSON{Replica: "b", Role: "follower", Leader: "a", Term: 3, Store: "ok", Current: true, LeaseSeconds: 3},
		Generation: ctl.State().Generation}, r)
	assert.Empty(t, first.id, "replica events do not move the resume point")
	assert.Equal(t, "state", (<-ch).event)
	next(t, ch, "replica", 5*time.Second)
	mu.Lock()
	current = false
	mu.Unlock()
	ev := next(t, ch, "replica", 5*time.Second)
	require.NoError(t, json.Unmarshal([]byte(ev.data), &r))
	assert.False(t, r.Current, "a replica that is no longer current says so within a tick")

	lone := newFixture(t, Config{Controller: ctl, Now: time.Now})
	go lone.api.Mirror(ctx)
	lch, _ := follow(t, ctx, lone.srv.URL+"/v1/stream")
	assert.Equal(t, "state", (<-lch).event)
	select {
	case ev := <-lch:
		t.Errorf("a lone daemon's stream sent %q", ev.event)
	case <-time.After(300 * time.Millisecond):
	}
}
