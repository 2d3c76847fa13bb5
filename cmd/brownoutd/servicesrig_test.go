package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
)

// The rig of the services' tests: a daemon of several services built in
// this process from a YAML file (units and their router, no listener),
// so that a test can run it inside a testing/synctest bubble and give a
// service a source of its own (one that fails); pushers whose requests
// go to the router in process; synthetic pushes for the benchmarks.

// rig is a daemon of several services without a listener.
type rig struct {
	c     *config
	units []*unit
	rt    *router
	stop  func()
}

// newRig builds the services of the YAML file src; sources, when it has
// an entry for a service, replaces the service's own (buildSource's).
// Start runs the loops.
func newRig(t testing.TB, src string, sources map[string]source) *rig {
	t.Helper()
	c, err := parseConfig("rig.yaml", []byte(src))
	require.NoError(t, err)
	c.inherit()
	require.NoError(t, c.readServiceTokens())
	r := &rig{c: c}
	log := slog.New(slog.DiscardHandler)
	streams := api.NewStreamCap(c.maxStreams())
	for _, s := range c.Services {
		src, push, err := buildSource(s)
		require.NoError(t, err)
		if own, ok := sources[s.Name]; ok {
			src, push = own, nil
			if p, ok := own.(*fleet.PushSource); ok {
				push = p
			}
		}
		u, err := newUnit(context.Background(), c, s, src, push, nil, streams, log)
		require.NoError(t, err)
		r.units = append(r.units, u)
	}
	r.rt = newRouter(r.units, loopback(c.Listen))
	return r
}

// start runs every service's loop, spread over the tick as serve does,
// until stop.
func (r *rig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var loops []chan struct{}
		for i, u := range r.units {
			ch := make(chan struct{})
			loops = append(loops, ch)
			go func() {
				defer close(ch)
				u.run(ctx, time.Duration(i)*u.ctl.Config().Tick/time.Duration(len(r.units)))
			}()
		}
		for _, ch := range loops {
			<-ch
		}
	}()
	r.stop = func() {
		for _, u := range r.units {
			u.api.Shutdown()
		}
		cancel()
		<-done
		for _, u := range r.units {
			u.close()
		}
	}
}

// roundTrip is an http.RoundTripper of a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// client sends its requests to h in process: no connection, no
// goroutine, so that it works inside a synctest bubble.
func client(h http.Handler) *http.Client {
	return &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result(), nil
	})}
}

// hanging is a client whose every request waits for its context to end:
// a source whose targets never answer.
var hanging = &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
})}

// rigLoad is an app of a service: a Recorder fed every 10 ms (at 5 ms
// past each 10, never at a push's or a tick's instant) with the latency
// of its schedule, pushed every interval by a Pusher through c.
type rigLoad struct {
	rec    *signals.Recorder
	pusher *fleet.Pusher
}

// phase is a latency for a time.
type phase struct {
	latency time.Duration
	until   time.Duration // since the load's start
}

// latencyAt is the latency of the schedule's phase at elapsed since the
// load's start; 0 after the last.
func latencyAt(schedule []phase, elapsed time.Duration) time.Duration {
	for _, ph := range schedule {
		if elapsed < ph.until {
			return ph.latency
		}
	}
	return 0
}

func startRigLoad(ctx context.Context, t testing.TB, c *http.Client, svc, token, instance string, interval time.Duration, schedule []phase) *rigLoad {
	t.Helper()
	l := &rigLoad{rec: signals.NewRecorder(signals.Config{})}
	p, err := fleet.NewPusher(l.rec, fleet.PusherConfig{URL: "http://127.0.0.1:8080/v1/signals", Instance: instance, Service: svc,
		Token: token, Interval: interval, Client: c})
	require.NoError(t, err)
	l.pusher = p
	go p.Run(ctx)
	go func() {
		start := time.Now()
		t := time.NewTimer(5 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := time.Now()
			lat := latencyAt(schedule, now.Sub(start))
			if lat > 0 {
				l.rec.Arrive(signals.Default)
				l.rec.Done(signals.Default, now.Add(-lat), now, false, time.Time{})
			}
			t.Reset(10 * time.Millisecond)
		}
	}()
	return l
}

// simPush is a synthetic instance's pushes, for loads too large to run
// Recorders for: every push carries count more requests than the last,
// at most latency long (p99 latency), in a latency histogram of the
// default classic buckets and width native ones up to it (a Recorder's
// push under a varied load has a few hundred buckets in all), and the
// default class's counts.
type simPush struct {
	instance string
	start    string
	pushes   uint64
	count    uint64
	latency  float64
	width    int
}

func newSimPush(instance string, start time.Time, count uint64, latency time.Duration, width int) *simPush {
	return &simPush{instance: instance, start: start.UTC().Format(time.RFC3339Nano), count: count, latency: latency.Seconds(), width: width}
}

// next is the instance's next push, at now.
func (s *simPush) next(now time.Time) []byte {
	s.pushes++
	n := s.pushes * s.count
	var b strings.Builder
	b.Grow(64 + 16*s.width)
	fmt.Fprintf(&b, `{"v":1,"instance":%q,"time":%q,"start":%q,"in_flight":2,"latency":{"count":%d,"sum":%g,"buckets":[`,
		s.instance, now.UTC().Format(time.RFC3339Nano), s.start, n, float64(n)*s.latency)
	for i, ub := range signals.DefaultBuckets() {
		if i > 0 {
			b.WriteByte(',')
		}
		c := uint64(0)
		if ub >= s.latency {
			c = n
		}
		fmt.Fprintf(&b, "[%g,%d]", ub, c)
	}
	b.WriteString(`],"native":{"schema":4,"zero":0,"buckets":[`)
	// The native bucket of latency at schema 4, ceil(log2(latency)×16),
	// holds most; width−1 buckets under it share a hundredth.
	at := int(math.Ceil(16 * math.Log2(s.latency)))
	per := n / uint64(100*s.width)
	for i := range s.width {
		if i > 0 {
			b.WriteByte(',')
		}
		c := per
		if i == s.width-1 {
			c = n - per*uint64(s.width-1)
		}
		fmt.Fprintf(&b, "[%d,%d]", at-s.width+1+i, c)
	}
	fmt.Fprintf(&b, `]}},"classes":{"default":{"arrived":%d,"completed":%d,"good":%d}}}`, n, n, n)
	return []byte(b.String())
}

// pushRequest is a push of body to url that says its service.
func pushRequest(ctx context.Context, url, svc, token string, body []byte) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(service.Header, svc)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}
