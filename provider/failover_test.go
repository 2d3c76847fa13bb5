package provider_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/provider"
)

// step advances fake time by d and lets the bubble settle.
func step(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// moved waits, in steps of 10 ms up to limit, until r follows a replica
// other than from; it fails the test if r's level of recommendations is
// ever other than held meanwhile, and returns how long it took.
func moved(t *testing.T, r *provider.Remote, from string, held float64, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		step(10 * time.Millisecond)
		if f := r.Following(); f != "" && f != from {
			return time.Since(start)
		}
		require.Equal(t, held, level(r, "recommendations"), "the level held while moving")
	}
	t.Fatalf("still not following another replica than %s after %v", from, limit)
	return 0
}

// TestRemoteMovesToAnotherReplicaWhenOneDies: the replica followed dies;
// within one backoff (at most 2 × MinBackoff) the Remote follows
// another, the levels held meanwhile, and follows the leader's next
// change there; with every replica down it holds the levels, marked
// stale, and tries them in turn with growing waits.
func TestRemoteMovesToAnotherReplicaWhenOneDies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3)
		c.publish(0.4)
		r := c.remote(t, provider.RemoteOptions{}) // MinBackoff 100 ms, MaxBackoff 10 s
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		step(time.Second)
		first := r.Following()
		require.NotEmpty(t, first, "following a replica")
		assert.Equal(t, 0.4, level(r, "recommendations"))

		// Ten kills, each replica back after the next: each time one
		// backoff of at most 2 × MinBackoff (here in steps of 10 ms).
		from := first
		for range 10 {
			c.at(from).kill()
			took := moved(t, r, from, 0.4, time.Second)
			assert.LessOrEqual(t, took, 210*time.Millisecond, "one backoff of at most 2 × MinBackoff, in steps of 10 ms")
			c.at(from).restart()
			from = r.Following()
		}
		first = from
		c.at(first).kill()
		moved(t, r, first, 0.4, time.Second)
		c.publish(0.7)
		synctest.Wait()
		assert.Equal(t, 0.7, level(r, "recommendations"), "the leader's next change, from the replica followed now")
		assert.Equal(t, dimmer.Auto, r.State().StateMode())

		second := r.Following()
		health := r.HealthByURL()
		require.Len(t, health, 3)
		for i, u := range c.urls() {
			h := health[i]
			assert.Equal(t, "stream "+u+"/v1/stream", h.Name)
			assert.Equal(t, u == second, h.OK, "%s: OK is the replica followed", u)
			if u == first {
				assert.NotZero(t, h.Errors, "%s: its stream ended", u)
				assert.True(t, h.LastErrorAt.After(h.LastSuccess), "%s: it failed after its last state", u)
			}
		}
		all := r.Health()
		assert.True(t, all.OK)
		assert.Equal(t, "stream "+strings.Join(c.urls(), "/v1/stream, ")+"/v1/stream", all.Name)

		c.at(second).kill()
		moved(t, r, second, 0.7, time.Second)
		third := r.Following()
		assert.NotContains(t, []string{first, second}, third)

		// Every replica down: the levels held, stale; the replicas tried
		// in turn, never more than one attempt per backoff.
		c.at(third).kill()
		step(time.Second)
		assert.False(t, r.Connected())
		assert.Equal(t, 0.7, level(r, "recommendations"), "last-known level held")
		assert.Equal(t, dimmer.Stale, r.State().StateMode())
		before := c.dials.Load()
		step(2 * time.Minute)
		attempts := c.dials.Load() - before
		// The waits grow to MaxBackoff (10 s, full jitter: 5 s on
		// average), so 2 minutes hold about 24 attempts once capped.
		assert.LessOrEqual(t, attempts, int64(45), "never hammered")
		assert.GreaterOrEqual(t, attempts, int64(8), "still trying")
		for _, h := range r.HealthByURL() {
			assert.False(t, h.OK, h.Name)
			assert.Greater(t, h.Errors, uint64(2), "%s: each replica tried in turn", h.Name)
		}
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
}

// TestRemoteSkipsDeadAndRefusingReplicasAtStart: wherever a Remote
// starts, it follows the one replica that answers within a few backoffs;
// the others' health says why not. Started many times, the Remotes
// spread over the replicas that answer.
func TestRemoteSkipsDeadAndRefusingReplicasAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3)
		c.publish(0.3)
		c.replicas[0].kill()
		c.replicas[1].refuse(http.StatusServiceUnavailable)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		for range 10 {
			r := c.remote(t, provider.RemoteOptions{})
			go r.Run(ctx)
			step(700 * time.Millisecond) // two failures: waits of at most 200 and 400 ms
			assert.Equal(t, c.replicas[2].url, r.Following())
			assert.Equal(t, 0.3, level(r, "recommendations"))
			h := r.HealthByURL()
			if h[1].Errors > 0 {
				assert.Contains(t, h[1].LastError, "503", "the refusing replica's answer")
			}
			if h[0].Errors > 0 {
				assert.Contains(t, h[0].LastError, "connection refused")
			}
		}
		c.replicas[1].refuse(0)
		c.replicas[0].srv.Close()
		seen := map[string]int{}
		for range 30 {
			r := c.remote(t, provider.RemoteOptions{})
			go r.Run(ctx)
			step(300 * time.Millisecond) // at most one failure first
			seen[r.Following()]++
		}
		assert.Len(t, seen, 2, "started at random, the Remotes spread over the two replicas up: %v", seen)
		assert.Zero(t, seen[""], "each follows one")
	})
}

// TestRemoteLeavesAReplicaThatLags: a replica that stops hearing its
// leader (no newer state, no tick) is left after LagTimeout, not
// before, for one that has the leader's newest state; a replica behind
// the state held is never taken from — the levels never go back — and is
// followed again once it has caught up.
func TestRemoteLeavesAReplicaThatLags(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3)
		c.publish(0.4)
		r := c.remote(t, provider.RemoteOptions{LagTimeout: 5 * time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go r.Run(ctx)
		step(time.Second)
		stuck := r.Following()
		require.NotEmpty(t, stuck)
		c.at(stuck).lag(true)
		c.publish(0.6) // the others relay it, the stuck one does not
		step(4900 * time.Millisecond)
		assert.Equal(t, stuck, r.Following(), "not left before LagTimeout")
		assert.Equal(t, 0.4, level(r, "recommendations"))
		took := moved(t, r, stuck, 0.4, time.Second)
		assert.LessOrEqual(t, took, 310*time.Millisecond, "left at LagTimeout, then one backoff")
		synctest.Wait()
		assert.Equal(t, 0.6, level(r, "recommendations"), "the newest state, from another replica")
		h := r.HealthByURL()[slices.Index(c.urls(), stuck)]
		assert.Contains(t, h.LastError, "lags: no news of the control loop (tick events, current replica events) within 5s")

		// Only the lagging replica is left: its older state is never
		// taken; the levels hold, stale.
		for _, o := range c.others(stuck) {
			o.kill()
		}
		step(30 * time.Second)
		assert.Equal(t, 0.6, level(r, "recommendations"), "never the older generation")
		assert.False(t, r.Connected())
		assert.Equal(t, dimmer.Stale, r.State().StateMode())
		assert.Contains(t, r.HealthByURL()[slices.Index(c.urls(), stuck)].LastError, "lags: no state as new as the one held")

		// It catches up: followed again.
		c.at(stuck).lag(false)
		// Tried in turn with the two dead ones, after waits capped at
		// MaxBackoff (10 s): within three of them.
		step(35 * time.Second)
		assert.Equal(t, stuck, r.Following())
		assert.Equal(t, 0.6, level(r, "recommendations"))
		c.publish(0.8)
		synctest.Wait()
		assert.Equal(t, 0.8, level(r, "recommendations"))
	})
}

// TestRemoteRidesOutAChangeOfLeader: while the leader changes, every
// replica's ticks pause; a pause shorter than LagTimeout moves no stream
// and marks nothing stale, and the new leader's first change is followed
// at once from the same replica.
func TestRemoteRidesOutAChangeOfLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3)
		c.publish(0.4)
		r := c.remote(t, provider.RemoteOptions{})
		ch, stop := r.Subscribe()
		defer stop()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go r.Run(ctx)
		step(time.Second)
		followed := r.Following()
		require.NotEmpty(t, followed)
		dials := c.dials.Load()

		c.pause(true)
		step(5 * time.Second) // the failover: under LagTimeout (10 s)
		c.publish(0.5)        // the new leader's first change
		c.pause(false)
		synctest.Wait()
		assert.Equal(t, 0.5, level(r, "recommendations"), "followed at once")
		assert.Equal(t, followed, r.Following(), "no stream moved")
		assert.Equal(t, dials, c.dials.Load(), "no reconnection")
		step(30 * time.Second)
		assert.Equal(t, followed, r.Following(), "ticks again: still followed")

		// Ticks paused long, but the leader's changes still come: a
		// replica that relays them hears its leader, and is kept.
		c.pause(true)
		for i := range 8 {
			step(3 * time.Second)
			c.publish(0.1 * float64(i))
		}
		synctest.Wait()
		assert.Equal(t, followed, r.Following(), "states are news too")
		assert.Equal(t, dials, c.dials.Load(), "no reconnection")
		c.pause(false)
		for {
			select {
			case st := <-ch:
				assert.NotEqual(t, dimmer.Stale, st.StateMode(), "never stale")
				continue
			default:
			}
			break
		}
	})
}

// TestRemoteLeavesAStoppedReplicaWithinTheLease: replicas that announce
// their lease (3 s) in their replica events. The replica followed stops
// — a SIGSTOPped process: its connection open, nothing written — and the
// Remote follows another a lease after the stopped one's last word, plus
// one backoff: not LagTimeout's 10 s, and no later than the cluster
// replaces a stopped leader. The levels hold meanwhile, marked stale
// only while it reconnects.
func TestRemoteLeavesAStoppedReplicaWithinTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3)
		c.announce(3 * time.Second)
		c.publish(0.4)
		r := c.remote(t, provider.RemoteOptions{})
		ch, unsubscribe := r.Subscribe()
		defer unsubscribe()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go r.Run(ctx)
		step(time.Second) // the replica's tick and replica event at 1 s: its last word
		stopped := r.Following()
		require.NotEmpty(t, stopped)
		c.at(stopped).stop(true)
		step(2900 * time.Millisecond)
		assert.Equal(t, stopped, r.Following(), "not left before the lease")
		took := moved(t, r, stopped, 0.4, time.Second)
		assert.LessOrEqual(t, took, 310*time.Millisecond, "left at the lease, then one backoff")
		h := r.HealthByURL()[slices.Index(c.urls(), stopped)]
		assert.Contains(t, h.LastError, "lags: no news of the control loop (tick events, current replica events) within 3s")
		stale := 0
		for len(ch) > 0 {
			if (<-ch).StateMode() == dimmer.Stale {
				stale++
			}
		}
		assert.LessOrEqual(t, stale, 1, "stale only while reconnecting")
		assert.Equal(t, dimmer.Auto, r.State().StateMode())
		c.publish(0.6)
		synctest.Wait()
		assert.Equal(t, 0.6, level(r, "recommendations"), "the leader's next change")
	})
}

// TestRemoteHoldsLevelsStaleWhileNoLeaderHolds: replicas that say they
// are not current — no leader's lease holds as they know: a change of
// leader, a store out of reach. The levels held are marked stale at the
// replica's first word, and fresh again at its word that it is current;
// a change of leader shorter than the lease moves no stream. Longer, the
// Remote tries the other replicas — one attempt per growing backoff —,
// the levels held and stale meanwhile, and follows as soon as one is
// current.
func TestRemoteHoldsLevelsStaleWhileNoLeaderHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3)
		c.announce(3 * time.Second)
		c.publish(0.4)
		r := c.remote(t, provider.RemoteOptions{})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go r.Run(ctx)
		step(time.Second)
		followed := r.Following()
		require.NotEmpty(t, followed)
		dials := c.dials.Load()

		// A change of leader: a tick and a half without one.
		c.pause(true)
		c.noLeader(true)
		step(time.Second)
		assert.Equal(t, dimmer.Stale, r.State().StateMode(), "the replica says no leader holds: stale")
		assert.Equal(t, 0.4, level(r, "recommendations"), "the levels held")
		assert.Contains(t, r.State().Why(), "says no leader's lease holds")
		step(500 * time.Millisecond)
		c.publish(0.5) // the new leader's first commit, then its ticks
		c.noLeader(false)
		c.pause(false)
		step(time.Second)
		assert.Equal(t, dimmer.Auto, r.State().StateMode())
		assert.Equal(t, 0.5, level(r, "recommendations"))
		assert.Equal(t, followed, r.Following(), "no stream moved")
		assert.Equal(t, dials, c.dials.Load(), "no reconnection")

		// The store out of reach of every replica for long: the levels held,
		// stale; the replicas tried in turn, waits growing.
		c.pause(true)
		c.noLeader(true)
		step(40 * time.Second)
		assert.Equal(t, dimmer.Stale, r.State().StateMode())
		assert.Equal(t, 0.5, level(r, "recommendations"))
		attempts := c.dials.Load() - dials
		assert.GreaterOrEqual(t, attempts, int64(3), "other replicas tried")
		assert.LessOrEqual(t, attempts, int64(12), "a lease each, then growing waits")
		var said bool
		for _, h := range r.HealthByURL() {
			said = said || strings.Contains(h.LastError, "says no leader's lease holds")
		}
		assert.True(t, said, "the health says why: %+v", r.HealthByURL())
		c.noLeader(false)
		c.pause(false)
		step(15 * time.Second) // within one wait (MaxBackoff) and a tick
		assert.True(t, r.Connected())
		assert.Equal(t, dimmer.Auto, r.State().StateMode())
		assert.Equal(t, 0.5, level(r, "recommendations"))
	})
}

// TestRemoteOfOneURLReconnectsAStoppedReplica: one URL, a replica behind
// it (or a load balancer over replicas) that announces its lease, then
// stops: the stream is dropped at the lease and reconnected, not held for
// ReadTimeout; a lone daemon, which announces none, keeps its quiet
// stream.
func TestRemoteOfOneURLReconnectsAStoppedReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, announced := range []bool{true, false} {
			c := newCluster(t, 1)
			if announced {
				c.announce(3 * time.Second)
			}
			c.publish(0.4)
			r := c.remote(t, provider.RemoteOptions{})
			ctx, cancel := context.WithCancel(t.Context())
			go r.Run(ctx)
			step(time.Second)
			require.True(t, r.Connected())
			dials := c.dials.Load()
			c.replicas[0].stop(true)
			step(3500 * time.Millisecond)
			if announced {
				assert.Greater(t, c.dials.Load(), dials, "reconnected at the lease")
				assert.Contains(t, r.Health().LastError, "lags")
			} else {
				assert.Equal(t, dials, c.dials.Load(), "a lone daemon's quiet stream is kept (ReadTimeout)")
				assert.True(t, r.Connected())
			}
			c.replicas[0].stop(false)
			c.publish(0.5)
			step(15 * time.Second)
			assert.True(t, r.Connected())
			assert.Equal(t, 0.5, level(r, "recommendations"))
			cancel()
			c.replicas[0].kill()
		}
	})
}

// TestNewRemoteRefusesBadURLs: a clear error at construction for an
// empty list, a bad URL, a replica twice, or URL and URLs both.
func TestNewRemoteRefusesBadURLs(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    provider.RemoteOptions
		want string
	}{
		{"none", provider.RemoteOptions{}, "provider: remote: no URL"},
		{"empty list", provider.RemoteOptions{URLs: []string{}}, "provider: remote: no URL"},
		{"not a URL", provider.RemoteOptions{URL: "localhost:8080"}, "want an http or https URL"},
		{"bad among good", provider.RemoteOptions{URLs: []string{"http://a:8080", "http://b:8080?x=1"}}, `URL "http://b:8080?x=1": a query`},
		{"twice", provider.RemoteOptions{URLs: []string{"http://a:8080", "http://A:8080/"}}, "the same replica twice"},
		{"both", provider.RemoteOptions{URL: "http://a:8080", URLs: []string{"http://b:8080"}}, "URL and URLs both set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := provider.NewRemote(tc.o)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	r, err := provider.NewRemote(provider.RemoteOptions{URLs: []string{"http://a:8080/"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"http://a:8080"}, r.URLs())
	assert.Equal(t, []string{r.Health().Name}, []string{r.HealthByURL()[0].Name}, "one URL: HealthByURL is Health")
	assert.Equal(t, "stream http://a:8080/v1/stream", r.Health().Name, "as with URL")
}

// TestRemoteFailoverTimeOnRealHTTP kills the replica followed ten times,
// on 127.0.0.1 with the default backoff, and measures how long the
// Remote takes to follow another: at most 2 × MinBackoff and a
// connection. go test ./provider -run FailoverTime -v prints the figures.
func TestRemoteFailoverTimeOnRealHTTP(t *testing.T) {
	c := newTCPCluster(t, 3, 100*time.Millisecond)
	c.publish(0.4)
	r := c.remote(t, provider.RemoteOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	require.Eventually(t, func() bool { return r.Following() != "" }, 5*time.Second, time.Millisecond)
	var took []time.Duration
	for range 10 {
		from := r.Following()
		c.at(from).kill()
		start := time.Now()
		require.Eventually(t, func() bool {
			f := r.Following()
			return f != "" && f != from
		}, 5*time.Second, 100*time.Microsecond)
		took = append(took, time.Since(start))
		assert.Equal(t, 0.4, level(r, "recommendations"))
		c.at(from).restart()
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("moved to another replica after a kill: median %v, max %v over %d kills (MinBackoff 100 ms: a wait of at most 200 ms)",
		took[len(took)/2], took[len(took)-1], len(took))
	assert.Less(t, took[len(took)-1], time.Second)
}

// BenchmarkRemoteEvaluation: a boolean evaluation over a Remote that
// follows one daemon (URL) and one that follows one of three replicas
// (URLs), on 127.0.0.1: the evaluation reads the state held either way.
func BenchmarkRemoteEvaluation(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("urls=%d", n), func(b *testing.B) {
			c := newTCPCluster(b, n, time.Second)
			c.publish(0.4)
			r := c.remote(b, provider.RemoteOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go r.Run(ctx)
			for r.Following() == "" {
				time.Sleep(time.Millisecond)
			}
			p, err := provider.New(r, provider.Options{})
			require.NoError(b, err)
			flat := openfeature.FlattenedContext{openfeature.TargetingKey: "user-123456", "segment": "vip"}
			b.ReportAllocs()
			for b.Loop() {
				p.BooleanEvaluation(ctx, "recommendations", false, flat)
			}
		})
	}
}
