package provider_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/pipenet"
	"github.com/brownout/brownout/provider"
)

// cluster is brownoutd in HA as its followers see it: replicas that
// serve /v1/stream from one published state — one boot epoch,
// generations that only grow — each with a tick event per control tick.
// Each replica is an httptest server, on a listener of one pipenet.Net
// in a synctest bubble (newCluster) or on 127.0.0.1 (newTCPCluster). A
// replica can be killed and restarted in place, made to refuse streams
// (503), or made to lag: hold the state it has and stop ticking, as a
// replica that no longer hears its leader. The cluster can pause every
// replica's ticks, as during a change of leader. With a lease
// (announce), each replica also sends a replica event per tick, and
// first on connect: current unless it lags or the cluster has no leader
// (leaderless); a replica can be stopped: it writes nothing, its
// connections open, as a SIGSTOPped process.
type cluster struct {
	t    testing.TB
	pipe *pipenet.Net // nil on TCP
	tick time.Duration
	boot int64
	// dials counts the client's connection attempts, refused ones too.
	dials atomic.Int64

	mu         sync.Mutex
	st         clusterState
	changed    chan struct{} // closed and replaced at each change
	paused     bool          // no replica ticks (a change of leader)
	lease      time.Duration // announced in replica events; 0: none sent
	leaderless bool          // every replica says it is not current
	replicas   []*fakeReplica
}

// clusterState is what the leader published: a generation and the level
// of the one feature, "recommendations".
type clusterState struct {
	gen   uint64
	level float64
}

type fakeReplica struct {
	c    *cluster
	addr net.Addr
	url  string
	srv  *httptest.Server

	mu      sync.Mutex
	status  int  // non-zero: refuse streams with it
	lagging bool // hold `held`, no ticks, not current
	stopped bool // write nothing
	held    clusterState
	streams atomic.Int32 // stream requests answered
}

// newCluster starts n replicas on a pipenet.Net: call it inside a
// synctest bubble.
func newCluster(t *testing.T, n int) *cluster {
	c := &cluster{t: t, pipe: &pipenet.Net{}, tick: time.Second, boot: 1_700_000_000_000_000_000, changed: make(chan struct{})}
	for range n {
		c.add(nil)
	}
	return c
}

// newTCPCluster starts n replicas on 127.0.0.1 ticking every tick.
func newTCPCluster(t testing.TB, n int, tick time.Duration) *cluster {
	c := &cluster{t: t, tick: tick, boot: time.Now().UnixNano(), changed: make(chan struct{})}
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		c.add(ln)
	}
	return c
}

func (c *cluster) add(ln net.Listener) {
	r := &fakeReplica{c: c}
	if ln == nil {
		ln = c.pipe.Listen()
	}
	r.addr = ln.Addr()
	r.url = "http://" + r.addr.String()
	r.start(ln)
	c.replicas = append(c.replicas, r)
	c.t.Cleanup(r.kill)
}

func (r *fakeReplica) start(ln net.Listener) {
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.Listener = ln
	r.srv.Start()
}

// urls are the replicas' base URLs, in order.
func (c *cluster) urls() []string {
	out := make([]string, len(c.replicas))
	for i, r := range c.replicas {
		out[i] = r.url
	}
	return out
}

// at returns the replica at base URL u.
func (c *cluster) at(u string) *fakeReplica {
	for _, r := range c.replicas {
		if r.url == u {
			return r
		}
	}
	c.t.Fatalf("no replica at %q", u)
	return nil
}

// others returns the replicas but the one at u.
func (c *cluster) others(u string) []*fakeReplica {
	var out []*fakeReplica
	for _, r := range c.replicas {
		if r.url != u {
			out = append(out, r)
		}
	}
	return out
}

// client dials the replicas, counting attempts.
func (c *cluster) client(t testing.TB) *http.Client {
	d := &net.Dialer{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.dials.Add(1)
		if c.pipe != nil {
			return c.pipe.Dial(ctx, network, addr)
		}
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// remote returns a Remote of every replica, with o's other options.
func (c *cluster) remote(t testing.TB, o provider.RemoteOptions) *provider.Remote {
	o.URLs, o.Client = c.urls(), c.client(t)
	r, err := provider.NewRemote(o)
	require.NoError(t, err)
	return r
}

// publish makes level the leader's newest state, relayed by every
// replica that does not lag.
func (c *cluster) publish(level float64) {
	c.mu.Lock()
	c.st = clusterState{gen: c.st.gen + 1, level: level}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// pause stops (true) or resumes every replica's ticks.
func (c *cluster) pause(p bool) {
	c.mu.Lock()
	c.paused = p
	c.mu.Unlock()
}

// announce makes every replica send replica events with lease.
func (c *cluster) announce(lease time.Duration) {
	c.mu.Lock()
	c.lease = lease
	c.mu.Unlock()
}

// noLeader makes every replica say it is not current (true), as while
// no leader holds the lease, or current again.
func (c *cluster) noLeader(l bool) {
	c.mu.Lock()
	c.leaderless = l
	c.mu.Unlock()
}

// stop makes r write nothing more, its connections open (true), or go on.
func (r *fakeReplica) stop(s bool) {
	r.mu.Lock()
	r.stopped = s
	r.mu.Unlock()
}

func (r *fakeReplica) isStopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// said is what r's replica event says now: whether it is current, and
// the lease (0: r sends none).
func (r *fakeReplica) said() (current bool, lease time.Duration) {
	c := r.c
	c.mu.Lock()
	current, lease = !c.leaderless, c.lease
	c.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	return current && !r.lagging, lease
}

// lag makes r hold the state it has and stop ticking (true), or catch
// up again.
func (r *fakeReplica) lag(l bool) {
	c := r.c
	c.mu.Lock()
	st := c.st
	ch := c.changed
	c.changed = make(chan struct{})
	c.mu.Unlock()
	r.mu.Lock()
	r.lagging, r.held = l, st
	r.mu.Unlock()
	close(ch) // wake its streams
}

// refuse makes r answer streams with status (0: serve them again).
func (r *fakeReplica) refuse(status int) {
	r.mu.Lock()
	r.status = status
	r.mu.Unlock()
}

// kill ends r's streams and stops it listening.
func (r *fakeReplica) kill() {
	r.srv.CloseClientConnections()
	r.srv.Close()
}

// restart listens at r's address again (after kill).
func (r *fakeReplica) restart() {
	if r.c.pipe != nil {
		r.start(r.c.pipe.ListenAt(r.addr))
		return
	}
	var ln net.Listener
	var err error
	for range 50 { // the old socket may linger a moment
		if ln, err = net.Listen("tcp", r.addr.String()); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(r.c.t, err)
	r.start(ln)
}

// view is what r serves now: the cluster's state, or the one it holds
// while it lags; ticking says whether it ticks.
func (r *fakeReplica) view() (st clusterState, ticking bool, changed chan struct{}) {
	c := r.c
	c.mu.Lock()
	st, ticking, changed = c.st, !c.paused, c.changed
	c.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lagging {
		return r.held, false, changed
	}
	return st, ticking, changed
}

// serve is GET /v1/stream as brownoutd answers it: the full state on
// connect, each newer state, a tick event per tick; a replica event first
// and per tick, when the cluster announces a lease. A stopped replica
// writes nothing: not even its headers to a new stream.
func (r *fakeReplica) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/stream" {
		http.NotFound(w, req)
		return
	}
	r.streams.Add(1)
	r.mu.Lock()
	status := r.status
	r.mu.Unlock()
	if status != 0 {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"urn:brownout:api:unavailable","status":%d,"detail":"a replica refusing"}`, status)
		return
	}
	for r.isStopped() {
		select {
		case <-req.Context().Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	replica := func(gen uint64) {
		if current, lease := r.said(); lease > 0 {
			fmt.Fprintf(w, "event: replica\ndata: {\"v\":1,\"replica\":%q,\"role\":\"follower\",\"current\":%v,\"lease_seconds\":%v,\"generation\":%d}\n\n",
				r.url, current, lease.Seconds(), gen)
			fl.Flush()
		}
	}
	state := func(st clusterState) {
		fmt.Fprintf(w, "id: %d-%d\nevent: state\ndata: {\"v\":1,\"boot\":%d,\"generation\":%d,\"mode\":\"auto\",\"features\":[{\"name\":\"recommendations\",\"level\":%v,\"default\":true}]}\n\n",
			r.c.boot, st.gen, r.c.boot, st.gen, st.level)
		fl.Flush()
	}
	cur, _, changed := r.view()
	fmt.Fprint(w, "retry: 1000\n\n")
	replica(cur.gen)
	state(cur)
	tk := time.NewTicker(r.c.tick)
	defer tk.Stop()
	for {
		select {
		case <-req.Context().Done():
			return
		case <-changed:
			var st clusterState
			st, _, changed = r.view()
			if st.gen > cur.gen && !r.isStopped() {
				cur = st
				state(cur)
			}
		case <-tk.C:
			if r.isStopped() {
				continue
			}
			replica(cur.gen)
			if _, ticking, _ := r.view(); ticking {
				fmt.Fprintf(w, "event: tick\ndata: {\"v\":1,\"t\":%q,\"generation\":%d,\"levels\":{\"recommendations\":%v}}\n\n",
					time.Now().UTC().Format(time.RFC3339Nano), cur.gen, cur.level)
				fl.Flush()
			}
		}
	}
}
