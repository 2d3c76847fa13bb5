package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/pgtest"
	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/internal/testsrv"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
)

// The tests of a reload that adds and removes services (reloadServices),
// on `brownoutd serve` in this process over real HTTP: SIGHUP reaches
// every daemon the test runs.

// reloaded sends SIGHUP and waits until each daemon logged the reload's
// outcome: its last line, "configuration reloaded", or "reload refused"
// when refused.
func reloaded(t *testing.T, refused bool, ds ...*daemon) {
	t.Helper()
	says := `msg="brownoutd: configuration reloaded"`
	if refused {
		says = `msg="brownoutd: reload refused`
	}
	var before []int
	for _, d := range ds {
		before = append(before, strings.Count(d.errs.String(), says))
	}
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	for i, d := range ds {
		require.Eventually(t, func() bool { return strings.Count(d.errs.String(), says) > before[i] }, 20*time.Second, 20*time.Millisecond,
			"%s: %q in the log: %s", d.base, says, d.errs.String())
	}
}

// sseFollow follows an event stream (headers: name, value pairs): its events' kinds and data, in
// order, on a channel closed when the stream ends.
func sseFollow(t *testing.T, url string, headers ...string) <-chan [2]string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode, url)
	ch := make(chan [2]string, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var kind string
		for sc.Scan() {
			line := sc.Text()
			if k, ok := strings.CutPrefix(line, "event: "); ok {
				kind = k
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				select {
				case ch <- [2]string{kind, d}:
				default: // a slow test drops ticks, not the end
				}
			}
		}
	}()
	return ch
}

// lastEvent waits for the stream's end and returns its last event.
func lastEvent(t *testing.T, ch <-chan [2]string, within time.Duration) [2]string {
	t.Helper()
	var last [2]string
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return last
			}
			last = ev
		case <-timeout:
			t.Fatalf("the stream did not end within %v", within)
		}
	}
}

// servicePushes pushes an instance's answers, each taking latency, to url
// for svc (with tok, when set) until the test ends.
func servicePushes(t *testing.T, url, svc, tok string, latency time.Duration) {
	rec := signals.NewRecorder(signals.Config{})
	p, err := fleet.NewPusher(rec, fleet.PusherConfig{URL: url, Instance: svc + "-1", Service: svc, Token: tok,
		Interval: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go p.Run(ctx)
	go func() {
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tk.C:
				rec.Arrive(signals.Default)
				rec.Done(signals.Default, now.Add(-latency), now, false, time.Time{})
			}
		}
	}()
}

// slowPushes pushes an instance's slow answers (900 ms) to url for svc
// until the test ends.
func slowPushes(t *testing.T, url, svc string) {
	servicePushes(t, url, svc, "", 900*time.Millisecond)
}

// names lists the root's services, in order.
func names(m servicesJSON) []string {
	out := []string{}
	for _, s := range m.Services {
		out = append(out, s.Name)
	}
	return out
}

// TestServeServicesReloadAddsAndRemoves: a reload adds a service — its
// OFREP answers at once, its pushes dim it, the root lists it, /metrics
// carries it, its events say it was added — and removes one: its
// streams end with a last event that says why, its every route answers
// the 404 of a service not served (by path, by header, OFREP's shape on
// OFREP's routes), /metrics drops its series, while the others keep
// their boot, generations, levels and overrides. Re-added, it continues
// its operators' state (its state dir's lock was released) and its
// metrics register again. A file whose added service is invalid, or
// cannot be built (its state dir in use), changes nothing.
func TestServeServicesReloadAddsAndRemoves(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "b.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(file, []byte("tick: 100ms\nservices:\n"+s), 0o600)) }
	const a = "  - {name: a, features: [{name: x}, {name: y}]}\n"
	const b = "  - {name: b, features: [{name: z}]}\n"
	const c = "  - {name: c, targets: [{signal: latency.p99, target: 200ms}], features: [{name: u}, {name: v, default: false}]}\n"
	write(a + b)
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", dir, "--config", file)
	ec := `{"context":{"targetingKey":"u1"}}`
	for _, svc := range []string{"a", "b"} {
		resp, body := do(t, "PUT", d.base+"/services/"+svc+"/v1/features/"+map[string]string{"a": "y", "b": "z"}[svc]+"/override", `{"level":0.3,"ttl":"1h","reason":"war room"}`)
		require.Equal(t, 200, resp.StatusCode, body)
	}
	resp, _ := do(t, "POST", d.base+"/services/c/ofrep/v1/evaluate/flags/u", ec)
	require.Equal(t, 404, resp.StatusCode, "c is not served yet")

	// Added.
	write(a + c + b)
	start := time.Now()
	reloaded(t, false, d)
	resp, body := do(t, "POST", d.base+"/services/c/ofrep/v1/evaluate/flags/u", ec)
	t.Logf("c answered OFREP %v after the SIGHUP", time.Since(start))
	require.Equal(t, 200, resp.StatusCode, body)
	assert.Contains(t, body, `"value":true`)
	resp, body = do(t, "POST", d.base+"/ofrep/v1/evaluate/flags/v", ec, service.Header, "c")
	require.Equal(t, 200, resp.StatusCode, body)
	assert.Contains(t, body, `"key":"v"`, "by header too")
	resp, body = do(t, "POST", d.base+"/services/c/ofrep/v1/evaluate/flags", ec)
	require.Equal(t, 200, resp.StatusCode, body)
	assert.Contains(t, body, `"requestUri":"/services/c/ofrep/v1/events"`)
	assert.Equal(t, []string{"a", "c", "b"}, names(servicesOf(t, d.base)), "the root lists it, in the file's order")
	assert.Regexp(t, `msg="brownoutd: service added" reload=\d+ service=c base=/services/c/`, d.errs.String())
	assert.NotContains(t, d.errs.String(), "next restart", "nothing waits for a restart")
	var events struct{ Events []struct{ Kind, What string } }
	resp, body = do(t, "GET", d.base+"/services/c/v1/events", "")
	require.Equal(t, 200, resp.StatusCode)
	require.NoError(t, json.Unmarshal([]byte(body), &events))
	require.NotEmpty(t, events.Events)
	assert.Contains(t, events.Events[len(events.Events)-1].What, "service added by reload ")
	slowPushes(t, d.base+"/services/c/v1/signals", "c")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		st := stateOf(ct, d.base+"/services/c")
		require.NotEmpty(ct, st.Sources)
		assert.True(ct, st.Sources[0].OK, "c's pushes arrive")
		assert.Less(ct, feature(st, "u").Level, 1.0, "and dim it")
	}, 15*time.Second, 50*time.Millisecond)
	resp, body = do(t, "GET", d.base+"/metrics", "")
	require.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, body, `brownout_feature_level{feature="u",service="c"}`)

	// Removed: b, followed by two streams.
	stream := sseFollow(t, d.base+"/services/b/v1/stream")
	ofrepStream := sseFollow(t, d.base+"/ofrep/v1/events", service.Header, "b")
	before := stateOf(t, d.base+"/services/a")
	write(a + c)
	reloaded(t, false, d)
	for _, ch := range []<-chan [2]string{stream, ofrepStream} {
		last := lastEvent(t, ch, 5*time.Second)
		assert.Equal(t, "shutdown", last[0], "b's streams end with a last event")
		assert.Contains(t, last[1], "the service is no longer served")
	}
	for _, tc := range []struct {
		method, url, header, says string
	}{
		{"GET", "/services/b/v1/state", "", `no service "b" here: a, c`},
		{"GET", "/services/b/v1/stream", "", `no service "b" here`},
		{"POST", "/services/b/v1/signals", "", `no service "b" here`},
		{"PUT", "/services/b/v1/features/z/override", "", `no service "b" here`},
		{"GET", "/v1/state", "b", `"b": no such service here: a, c`},
	} {
		resp, body := do(t, tc.method, d.base+tc.url, `{"level":0.5}`, service.Header, tc.header)
		if tc.header == "" {
			resp, body = do(t, tc.method, d.base+tc.url, `{"level":0.5}`)
		}
		assert.Equal(t, 404, resp.StatusCode, "%s %s", tc.method, tc.url)
		var pb struct{ Type, Detail string }
		require.NoError(t, json.Unmarshal([]byte(body), &pb), body)
		assert.Equal(t, "urn:brownout:api:unknown-service", pb.Type, "%s %s", tc.method, tc.url)
		assert.Contains(t, pb.Detail, tc.says, "%s %s", tc.method, tc.url)
	}
	resp, body = do(t, "POST", d.base+"/services/b/ofrep/v1/evaluate/flags/z", ec)
	assert.Equal(t, 404, resp.StatusCode)
	assert.JSONEq(t, `{"key":"z","errorCode":"GENERAL","errorDetails":"no service \"b\" here: a, c"}`, body, "OFREP's error shape")
	assert.Equal(t, []string{"a", "c"}, names(servicesOf(t, d.base)))
	assert.Regexp(t, `msg="brownoutd: service removed: no longer served, its operators' state kept" reload=\d+ service=b`, d.errs.String())
	resp, body = do(t, "GET", d.base+"/metrics", "")
	require.Equal(t, 200, resp.StatusCode)
	assert.NotContains(t, body, `service="b"`, "no stale series of b")
	assert.Contains(t, body, `brownout_feature_level{feature="y",service="a"} 0.3`)
	after := stateOf(t, d.base+"/services/a")
	assert.Equal(t, before.Boot, after.Boot, "a was not rebuilt")
	assert.GreaterOrEqual(t, after.Generation, before.Generation)
	assert.Equal(t, 0.3, feature(after, "y").Level, "a's override stays")
	assert.Less(t, feature(stateOf(t, d.base+"/services/c"), "u").Level, 1.0, "c still dims")

	// Refused: an added service that is invalid, or whose state dir is in
	// use; nothing of the file applies (b is not back, c stays).
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "services", "e"), 0o700))
	held, err := os.OpenFile(filepath.Join(dir, "services", "e", ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
	for _, bad := range []string{
		a + c + b + "  - {name: f, features: [{name: w, floor: 7}]}\n",
		a + b + "  - {name: e, features: [{name: w}]}\n",
	} {
		write(bad)
		reloaded(t, true, d)
		assert.Equal(t, []string{"a", "c"}, names(servicesOf(t, d.base)), "nothing of a refused file applies")
	}
	assert.Contains(t, d.errs.String(), "in use by another process")
	held.Close()

	// Re-added: b continues its operators' state; its metrics are back.
	write(a + c + b)
	reloaded(t, false, d)
	st := stateOf(t, d.base+"/services/b")
	require.NotNil(t, feature(st, "z").Override, "b's override is back: %+v", st.Features)
	assert.Equal(t, 0.3, feature(st, "z").Level)
	resp, body = do(t, "GET", d.base+"/metrics", "")
	require.Equal(t, 200, resp.StatusCode, body)
	assert.Contains(t, body, `brownout_feature_level{feature="z",service="b"} 0.3`)
	assert.Equal(t, []string{"a", "c", "b"}, names(servicesOf(t, d.base)))
}

// TestServeServicesReloadReplicas: two replicas of a daemon of one
// service on a real PostgreSQL; a reload of both adds a second service,
// which one of them leads, both knowing which; an override written at
// either is served by both. Removed, it answers 404 at both and its
// lease is given up; re-added, it continues its rows: the override is
// back, its generation goes on, and a replica leads it again.
func TestServeServicesReloadReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("a real PostgreSQL")
	}
	dsn := pgtest.Start(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "b.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(file, []byte("tick: 200ms\nservices:\n"+s), 0o600)) }
	const shop = "  - {name: shop, features: [{name: recommendations}, {name: reviews}]}\n"
	const search = "  - {name: search, features: [{name: suggestions}, {name: spelling}]}\n"
	write(shop)
	var reps []*daemon
	for range 2 {
		reps = append(reps, startDaemon(t, "--listen", testsrv.FreeAddr(t), "--config", file, "--store", dsn))
	}
	led := func(svc string) string {
		var leader string
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var seen []string
			for _, r := range reps {
				st := stateOf(c, r.base+"/services/"+svc)
				require.NotNil(c, st.Cluster)
				assert.NotEmpty(c, st.Cluster.Leader)
				seen = append(seen, st.Cluster.Leader)
			}
			assert.Equal(c, seen[0], seen[1], "%s: one leader, known to both", svc)
			leader = seen[0]
		}, 20*time.Second, 100*time.Millisecond, "%s has a leader", svc)
		return leader
	}
	t.Logf("shop led by %s", led("shop"))

	write(shop + search)
	start := time.Now()
	reloaded(t, false, reps...)
	t.Logf("search added on both replicas, led by %s, %v after the SIGHUP", led("search"), time.Since(start))
	resp, body := do(t, "PUT", reps[1].base+"/services/search/v1/features/spelling/override", `{"level":0.25,"ttl":"1h","reason":"war room"}`)
	require.Equal(t, 200, resp.StatusCode, body)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, r := range reps {
			assert.Equal(c, 0.25, feature(stateOf(c, r.base+"/services/search"), "spelling").Level, "%s serves the search's override", r.base)
			assert.Equal(c, []string{"shop", "search"}, names(servicesOf(c, r.base)))
		}
	}, 10*time.Second, 100*time.Millisecond)

	gen := stateOf(t, reps[0].base+"/services/search").Generation
	write(shop)
	reloaded(t, false, reps...)
	for _, r := range reps {
		resp, _ := do(t, "GET", r.base+"/services/search/v1/state", "")
		assert.Equal(t, 404, resp.StatusCode, "%s no longer serves the search", r.base)
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	var expired bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT expires <= now() FROM brownout_lease WHERE service = 'search'`).Scan(&expired))
	assert.True(t, expired, "the search's lease was given up")
	t.Logf("shop still led by %s", led("shop"))

	write(shop + search)
	reloaded(t, false, reps...)
	t.Logf("search re-added, led by %s", led("search"))
	// The reloads' events are in the store, shown at every replica: each
	// says which replica it was (a replica that still served the search
	// showed another's "no longer served" as its own).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, body := do(t, "GET", reps[0].base+"/services/search/v1/events", "")
		var evs struct {
			Events []struct{ Kind, What string } `json:"events"`
		}
		require.NoError(c, json.Unmarshal([]byte(body), &evs))
		var said int
		for _, e := range evs.Events {
			if e.Kind == "service" || e.Kind == "reload" {
				assert.Contains(c, e.What, "(replica ", "%s event: %s", e.Kind, e.What)
				said++
			}
		}
		assert.Equal(c, 6, said, "each replica's add, removal and add again")
	}, 5*time.Second, 100*time.Millisecond)
	for _, r := range reps {
		st := stateOf(t, r.base+"/services/search")
		assert.Equal(t, 0.25, feature(st, "spelling").Level, "%s: the search's override is back", r.base)
		assert.GreaterOrEqual(t, st.Generation, gen, "%s: the search's published state continues", r.base)
	}
}

// TestServeServicesReloadUnderLoad: reloads that add and remove a
// service while clients read every service's state, the root's list and
// /metrics, evaluate flags, follow streams and push: no answer is a 5xx,
// a request for the service comes and goes between its answers and the
// 404 of a service not served, and the others answer throughout (run it
// with -race: the router's units are swapped under the requests).
func TestServeServicesReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "b.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(file, []byte("tick: 100ms\nservices:\n"+s), 0o600)) }
	const a = "  - {name: a, features: [{name: x}]}\n"
	const b = "  - {name: b, features: [{name: y}]}\n"
	write(a + b)
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", dir, "--config", file)
	slowPushes(t, d.base+"/services/a/v1/signals", "a")
	slowPushes(t, d.base+"/services/b/v1/signals", "b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var answers, bad atomic.Int64
	var mu sync.Mutex
	seen := map[string]map[int]int{}
	client := func(name, method, path, header, body string) {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, method, d.base+path, strings.NewReader(body))
				if header != "" {
					req.Header.Set(service.Header, header)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				if strings.HasSuffix(path, "/stream") && resp.StatusCode == 200 {
					sc := bufio.NewScanner(resp.Body)
					for i := 0; i < 3 && sc.Scan(); i++ { // a few lines, then leave
					}
				}
				resp.Body.Close()
				answers.Add(1)
				if resp.StatusCode >= 500 {
					bad.Add(1)
				}
				mu.Lock()
				if seen[name] == nil {
					seen[name] = map[int]int{}
				}
				seen[name][resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	ec := `{"context":{"targetingKey":"u1"}}`
	client("a state", "GET", "/services/a/v1/state", "", "")
	client("root", "GET", "/v1/state", "", "")
	client("metrics", "GET", "/metrics", "", "")
	client("b eval", "POST", "/ofrep/v1/evaluate/flags/y", "b", ec)
	client("c state", "GET", "/services/c/v1/state", "", "")
	client("c eval", "POST", "/services/c/ofrep/v1/evaluate/flags/z", "", ec)
	client("c stream", "GET", "/services/c/v1/stream", "", "")
	slowPushes(t, d.base+"/services/c/v1/signals", "c")

	const c = "  - {name: c, features: [{name: z}]}\n"
	for i := range 6 {
		if i%2 == 0 {
			write(a + b + c)
		} else {
			write(a + b)
		}
		reloaded(t, false, d)
		time.Sleep(300 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	t.Logf("%d answers during 6 reloads: %v", answers.Load(), seen)
	assert.Zero(t, bad.Load(), "no 5xx")
	for _, name := range []string{"a state", "root", "metrics", "b eval"} {
		assert.Equal(t, []int{200}, statuses(seen[name]), "%s answers throughout", name)
	}
	for _, name := range []string{"c state", "c eval", "c stream"} {
		assert.Equal(t, []int{200, 404}, statuses(seen[name]), "%s comes and goes", name)
	}
	assert.Equal(t, []string{"a", "b"}, names(servicesOf(t, d.base)))
}

// statuses returns m's keys, sorted.
func statuses(m map[int]int) []int {
	out := []int{}
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestServeServicesReloadBeforeALoopStarts: the services' loops start
// spread over the tick (service i of n at i/n of it), so with a long
// tick a service's loop has not started yet when a reload comes. With a
// store its replica's law is reconfigured in its loop: the reload must
// not wait for that loop to start (it waited 10 s, then left the
// service's configuration as it was — its tokens too: a revoked token
// stayed good).
func TestServeServicesReloadBeforeALoopStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("a real PostgreSQL")
	}
	dsn := pgtest.Start(t)
	dir := t.TempDir()
	f := writeFiles(t, dir, map[string]string{"a-eval": "app aaaa-token-00000001\n", "b-eval": "app bbbb-token-00000001\n"})
	file := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`tick: 40s
services:
  - {name: a, features: [{name: x}], auth: {eval_tokens_file: `+f["a-eval"]+`}}
  - {name: b, features: [{name: y}], auth: {eval_tokens_file: `+f["b-eval"]+`}}
`), 0o600))
	d := startDaemon(t, "--listen", testsrv.FreeAddr(t), "--config", file, "--store", dsn)
	eval := func(tok string) int {
		resp, _ := do(t, "POST", d.base+"/services/b/ofrep/v1/evaluate/flags/y", `{"context":{"targetingKey":"u1"}}`, "Authorization", "Bearer "+tok)
		return resp.StatusCode
	}
	require.Equal(t, 200, eval("bbbb-token-00000001"))

	// b's loop starts 20 s after the daemon's start: reload before.
	require.NoError(t, os.WriteFile(f["b-eval"], []byte("app bbbb-token-00000002\n"), 0o600))
	start := time.Now()
	reloaded(t, false, d)
	took := time.Since(start)
	assert.Less(t, took, 5*time.Second, "the reload waited for b's loop")
	assert.NotContains(t, d.errs.String(), "level=ERROR")
	assert.Equal(t, 401, eval("bbbb-token-00000001"), "b's revoked token")
	assert.Equal(t, 200, eval("bbbb-token-00000002"), "b's new token")
}

// freezer is a TCP proxy to addr that can stop forwarding, as a store
// behind a cut network does: connections stay open and nothing answers.
type freezer struct {
	ln     net.Listener
	frozen atomic.Bool
	// held counts the reads held while frozen: a call to the store that
	// waits for an answer.
	held atomic.Int64
}

// frozenStore starts a real PostgreSQL behind a freezer (skipped under
// -short): the freezer, and the store's URL through it.
func frozenStore(t *testing.T) (*freezer, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("a real PostgreSQL")
	}
	u, err := url.Parse(pgtest.Start(t))
	require.NoError(t, err)
	fr := newFreezer(t, u.Host)
	u.Host = fr.ln.Addr().String()
	return fr, u.String()
}

// hold freezes the store until the test ends, and waits until a call to
// it waits: the leader's loop calls the store every tick, and once a call
// waits, the loop does — mostly. The call may be one the loop gives up
// after a tick (syncEvents), or not the loop's (a notification to the
// LISTEN connection): the loop is then free within a tick.
func (f *freezer) hold(t *testing.T) {
	t.Helper()
	f.frozen.Store(true)
	t.Cleanup(func() { f.frozen.Store(false) })
	require.Eventually(t, func() bool { return f.held.Load() > 0 }, 5*time.Second, 10*time.Millisecond, "a call to the store waits")
}

func newFreezer(t *testing.T, addr string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &freezer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				pipe := func(dst, src net.Conn) {
					buf := make([]byte, 32<<10)
					for {
						n, err := src.Read(buf)
						if n > 0 && f.frozen.Load() {
							f.held.Add(1)
						}
						for f.frozen.Load() {
							time.Sleep(10 * time.Millisecond)
						}
						if n > 0 {
							if _, err := dst.Write(buf[:n]); err != nil {
								break
							}
						}
						if err != nil {
							break
						}
					}
					dst.Close()
					src.Close()
				}
				go pipe(up, c)
				pipe(c, up)
			}()
		}
	}()
	return f
}

// TestServeServicesReloadOnAStoreThatHangs: a reload while the store
// does not answer reconfigures the services side by side: each one's
// law waits for its replica's loop (in a lead that waits on the store)
// and its reload event for the store, and one after another they added
// up (30 s for 8 services), holding the next reload and a shutdown.
func TestServeServicesReloadOnAStoreThatHangs(t *testing.T) {
	fr, store := frozenStore(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "b.yaml")
	var src strings.Builder
	src.WriteString("tick: 200ms\nservices:\n")
	for i := range 6 {
		fmt.Fprintf(&src, "  - {name: s%d, features: [{name: x}]}\n", i)
	}
	require.NoError(t, os.WriteFile(file, []byte(src.String()), 0o600))
	d := startDaemon(t, "--listen", testsrv.FreeAddr(t), "--config", file, "--store", store)
	awaitLeader(t, d.base+"/services/s5")

	fr.frozen.Store(true)
	defer fr.frozen.Store(false)
	start := time.Now()
	reloaded(t, false, d)
	took := time.Since(start)
	t.Logf("a reload of 6 services on a store that hangs: %v", took)
	// One service's reload waits up to 5 s on a store that hangs (2 s
	// for its replica's loop, 3 s for its reload event): side by side the
	// six take about that (3 s measured), one after another 21–30 s. The
	// bound is three services' waits in a row — far from either, so that
	// a run starved of CPU under -race (8.02 s once, beside the other
	// packages' tests) does not fail it, and a reload that serialises
	// does.
	const oneService = 5 * time.Second
	assert.Less(t, took, 3*oneService)
	fr.frozen.Store(false)
}

// TestServeReloadRevokesATokenOnAStoreThatHangs: one service on a store
// (a replica) reconfigures its law in the replica's loop, which waits on
// a store that does not answer — up to ten seconds, and then the law's
// reload fails. A token the file revokes is refused from the reload on,
// not once the law's reload returns: it stayed good for those ten
// seconds, and for good when the law's reload failed.
func TestServeReloadRevokesATokenOnAStoreThatHangs(t *testing.T) {
	fr, store := frozenStore(t)
	dir := t.TempDir()
	f := writeFiles(t, dir, map[string]string{"eval": "app aaaa-token-00000001\nold bbbb-token-00000001\n"})
	file := filepath.Join(dir, "brownoutd.yaml")
	require.NoError(t, os.WriteFile(file, []byte("tick: 200ms\nfeatures: [{name: x}, {name: y, default: false}]\nauth: {eval_tokens_file: "+f["eval"]+"}\n"), 0o600))
	d := startDaemon(t, "--listen", testsrv.FreeAddr(t), "--config", file, "--store", store)
	awaitLeader(t, d.base)
	eval := evalX(t, d.base)
	require.Equal(t, 200, eval("bbbb-token-00000001"))

	fr.hold(t)
	require.NoError(t, os.WriteFile(f["eval"], []byte("app aaaa-token-00000001\n"), 0o600))
	require.NoError(t, os.WriteFile(file, []byte("tick: 200ms\nfeatures: [{name: x}]\nauth: {eval_tokens_file: "+f["eval"]+"}\n"), 0o600))
	start := time.Now()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	// (The parent code revoked it once the loop's store call gave up —
	// 2 s at this tick's lease — and the law's reload returned.)
	require.Eventually(t, func() bool { return eval("bbbb-token-00000001") == 401 }, time.Second, 20*time.Millisecond,
		"the revoked token refused while the law's reload waits on the store")
	t.Logf("the revoked token refused %v after the SIGHUP", time.Since(start))
	assert.Equal(t, 200, eval("aaaa-token-00000001"), "the token kept")
	// y, which the file removes, is still the law's until its reload
	// returns: its default stays false — a missing one would read true,
	// and a client that goes stale would turn it on.
	for _, ft := range stateOf(t, d.base).Features {
		if ft.Name == "y" {
			assert.False(t, ft.Default, "y fails closed while the law still has it")
		}
	}
	fr.frozen.Store(false)
	require.Eventually(t, func() bool {
		s := d.errs.String()
		return strings.Contains(s, `msg="brownoutd: configuration reloaded"`) || strings.Contains(s, "stay as they were")
	}, 20*time.Second, 50*time.Millisecond, "the reload ends: %s", d.errs.String())
	assert.NotContains(t, d.errs.String(), "reload refused")
}

// TestServeReloadRevokesASecondFilesTokenAtOnce: while the law's reload of
// one SIGHUP waits on a store that does not answer, a second SIGHUP's file
// revokes its token at once — each file's tokens apply as it is read, and
// the laws follow one at a time, the latest file's last.
func TestServeReloadRevokesASecondFilesTokenAtOnce(t *testing.T) {
	fr, store := frozenStore(t)
	dir := t.TempDir()
	f := writeFiles(t, dir, map[string]string{"eval": ""})
	file := filepath.Join(dir, "brownoutd.yaml")
	conf := func(features, tokens string) {
		t.Helper()
		require.NoError(t, os.WriteFile(f["eval"], []byte(tokens), 0o600))
		require.NoError(t, os.WriteFile(file, []byte("tick: 200ms\nfeatures: ["+features+"]\nauth: {eval_tokens_file: "+f["eval"]+"}\n"), 0o600))
	}
	conf("{name: x}, {name: y, default: false}", "app aaaa-token-00000001\nold1 bbbb-token-00000001\nold2 cccc-token-00000001\n")
	d := startDaemon(t, "--listen", testsrv.FreeAddr(t), "--config", file, "--store", store)
	awaitLeader(t, d.base)
	eval := evalX(t, d.base)
	require.Equal(t, 200, eval("cccc-token-00000001"))

	secondRevocation(t, fr, eval,
		func() { conf("{name: x}", "app aaaa-token-00000001\nold2 cccc-token-00000001\n") },
		func() { conf("{name: x}, {name: z}", "app aaaa-token-00000001\n") })
	// The latest file's law is the one that stays.
	require.Eventually(t, func() bool {
		names := map[string]bool{}
		for _, ft := range stateOf(t, d.base).Features {
			names[ft.Name] = true
		}
		return names["x"] && names["z"] && !names["y"]
	}, 20*time.Second, 50*time.Millisecond, "the second file's features: %s", d.errs.String())
	assert.NotContains(t, d.errs.String(), "reload refused")
	assert.Equal(t, 401, eval("cccc-token-00000001"), "still revoked once the laws are reloaded")
}

// secondRevocation freezes the store, writes the first file (first: it
// revokes bbbb…) and sends SIGHUP, whose law's reload then waits on the
// store; then the second (second: it revokes cccc… too, keeps aaaa…) and
// SIGHUP again: its revoked token is refused within a second — before,
// the second SIGHUP waited for the first file's law (4 s on a store that
// did not answer, up to the law's timeout and more). eval is a token's
// status. The store answers again when it returns.
func secondRevocation(t *testing.T, fr *freezer, eval func(tok string) int, first, second func()) {
	t.Helper()
	fr.hold(t)
	first()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Eventually(t, func() bool { return eval("bbbb-token-00000001") == 401 }, time.Second, 20*time.Millisecond, "the first file's revoked token")
	second()
	start := time.Now()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Eventually(t, func() bool { return eval("cccc-token-00000001") == 401 }, time.Second, 20*time.Millisecond,
		"the second file's revoked token refused while the first file's law waits on the store")
	t.Logf("the second file's revoked token refused %v after its SIGHUP", time.Since(start))
	assert.Equal(t, 200, eval("aaaa-token-00000001"), "the token kept")
	fr.frozen.Store(false)
}

// TestServeServicesReloadKeepsDefaultsWithTheLaw: with services on a
// store that does not answer, a reload applies each kept service's tokens
// at once and its features' defaults with its law: a feature the file
// removes keeps its default while the law still has it (a missing default
// reads true — a feature that failed closed would fail open to clients
// that go stale meanwhile).
func TestServeServicesReloadKeepsDefaultsWithTheLaw(t *testing.T) {
	fr, store := frozenStore(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "b.yaml")
	write := func(features string) {
		require.NoError(t, os.WriteFile(file, []byte("tick: 200ms\nservices:\n  - {name: a, features: ["+features+"]}\n"), 0o600))
	}
	write("{name: x}, {name: y, default: false}, {name: w, default: false}")
	d := startDaemon(t, "--listen", testsrv.FreeAddr(t), "--config", file, "--store", store)
	awaitLeader(t, d.base+"/services/a")
	defaultOf := func(name string) (bool, bool) {
		for _, f := range stateOf(t, d.base+"/services/a").Features {
			if f.Name == name {
				return f.Default, true
			}
		}
		return false, false
	}
	def, ok := defaultOf("y")
	require.True(t, ok)
	require.False(t, def)

	fr.hold(t)
	write("{name: x}, {name: w, default: true}")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	// While the law's reload waits on the store, y is still the law's,
	// and w fails closed until the law has changed (the reload may fail
	// and keep the file before).
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if def, ok := defaultOf("y"); ok {
			require.False(t, def, "y fails closed while the law still has it")
		}
		// w reads true only once the law has changed (y gone), which may
		// be within this second: the call hold saw wait may not hold the
		// replica's loop (the LISTEN connection's notification, or the
		// loop's syncEvents, which gives up after a tick), and the loop
		// then takes the reconfiguration at once. y is read after w: the
		// law changes before w's default is set.
		if def, _ := defaultOf("w"); def {
			_, still := defaultOf("y")
			require.False(t, still, "w fails closed until the law has changed")
		}
	}
	fr.frozen.Store(false)
	require.Eventually(t, func() bool {
		s := d.errs.String()
		return strings.Contains(s, `msg="brownoutd: configuration reloaded"`)
	}, 20*time.Second, 50*time.Millisecond, "the reload ends: %s", d.errs.String())
	def, ok = defaultOf("w")
	assert.True(t, ok && def, "w fails open once the law has changed")
	_, ok = defaultOf("y")
	assert.False(t, ok, "y is gone")
}

// TestBridgeDefaults: while the law changes, none of the features either
// law has is missing (a missing default reads true: fail open); one both
// files name fails closed if either says so (the law's reload may fail
// and keep the old file's); one only one file names, as it says.
func TestBridgeDefaults(t *testing.T) {
	old := map[string]bool{"kept": true, "removed": false, "closed": true, "opened": false}
	next := map[string]bool{"kept": true, "closed": false, "opened": true, "added": false}
	got := bridgeDefaults(old, next)
	assert.Equal(t, map[string]bool{"kept": true, "removed": false, "closed": false, "opened": false, "added": false}, got)
	assert.Equal(t, map[string]bool{"kept": true, "removed": false, "closed": true, "opened": false}, old, "the running defaults are not changed")
	assert.Equal(t, map[string]bool{"removed": false}, bridgeDefaults(map[string]bool{"removed": false}, nil))
	assert.Empty(t, bridgeDefaults(nil, nil))
}

// TestServeServicesReloadRevokesASecondFilesTokenAtOnce: with services on
// a store that does not answer, a second SIGHUP's file revokes a kept
// service's token at once while the first file's laws wait; once they
// have, the latest file's services stand, and a service a reload adds
// takes that file's CORS origins, not the ones the daemon started with.
func TestServeServicesReloadRevokesASecondFilesTokenAtOnce(t *testing.T) {
	fr, store := frozenStore(t)
	dir := t.TempDir()
	f := writeFiles(t, dir, map[string]string{"eval": ""})
	file := filepath.Join(dir, "b.yaml")
	conf := func(services, origin, tokens string) {
		t.Helper()
		require.NoError(t, os.WriteFile(f["eval"], []byte(tokens), 0o600))
		require.NoError(t, os.WriteFile(file, []byte("tick: 200ms\ncors_origins: ["+origin+"]\nservices:\n"+services), 0o600))
	}
	a := "  - {name: a, features: [{name: x}], auth: {eval_tokens_file: " + f["eval"] + "}}\n"
	conf(a, "https://old.example", "app aaaa-token-00000001\nold1 bbbb-token-00000001\nold2 cccc-token-00000001\n")
	d := startDaemon(t, "--listen", testsrv.FreeAddr(t), "--config", file, "--store", store)
	awaitLeader(t, d.base+"/services/a")
	eval := evalX(t, d.base+"/services/a")
	require.Equal(t, 200, eval("cccc-token-00000001"))

	secondRevocation(t, fr, eval,
		func() { conf(a, "https://old.example", "app aaaa-token-00000001\nold2 cccc-token-00000001\n") },
		func() {
			conf(a+"  - {name: b, features: [{name: y}]}\n", "https://new.example", "app aaaa-token-00000001\n")
		})
	require.Eventually(t, func() bool {
		resp, _ := do(t, "GET", d.base+"/services/b/v1/state", "")
		return resp.StatusCode == 200
	}, 30*time.Second, 50*time.Millisecond, "the second file's service b is added: %s", d.errs.String())
	assert.NotContains(t, d.errs.String(), "reload refused")
	assert.Equal(t, 401, eval("cccc-token-00000001"), "still revoked once the laws are reloaded")
	preflight := func(svc, origin string) string {
		req, _ := http.NewRequest("OPTIONS", d.base+"/services/"+svc+"/ofrep/v1/evaluate/flags", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.Header.Get("Access-Control-Allow-Origin")
	}
	for _, svc := range []string{"a", "b"} {
		assert.Equal(t, "https://new.example", preflight(svc, "https://new.example"), "%s: the reloaded file's origin", svc)
		assert.Empty(t, preflight(svc, "https://old.example"), "%s: the origin the reload withdrew", svc)
	}
}

// TestServeServicesReloadRefusedForAServiceKeepsItsTokens: a file whose
// new service cannot be built (its state dir held by another process)
// keeps the running services, and says so; its tokens, applied as it was
// read, stay — a token it revokes is not granted again.
func TestServeServicesReloadRefusedForAServiceKeepsItsTokens(t *testing.T) {
	dir := t.TempDir()
	f := writeFiles(t, dir, map[string]string{"eval": "app aaaa-token-00000001\n"})
	file := filepath.Join(dir, "b.yaml")
	write := func(s string) {
		require.NoError(t, os.WriteFile(file, []byte("tick: 100ms\nservices:\n"+s), 0o600))
	}
	a := "  - {name: a, features: [{name: x}], auth: {eval_tokens_file: " + f["eval"] + "}}\n"
	write(a)
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", dir, "--config", file)
	eval := evalX(t, d.base+"/services/a")
	require.Equal(t, 200, eval("aaaa-token-00000001"))

	require.NoError(t, os.MkdirAll(filepath.Join(dir, "services", "e"), 0o700))
	held, err := os.OpenFile(filepath.Join(dir, "services", "e", ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	require.NoError(t, err)
	defer held.Close()
	require.NoError(t, syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
	require.NoError(t, os.WriteFile(f["eval"], []byte("new zzzz-token-00000001\n"), 0o600))
	write(a + "  - {name: e, features: [{name: w}]}\n")
	reloaded(t, true, d)
	assert.Contains(t, d.errs.String(), "keeping the running services (the file's tokens and CORS origins stay applied)")
	resp, _ := do(t, "GET", d.base+"/services/e/v1/state", "")
	assert.Equal(t, 404, resp.StatusCode, "e is not added")
	assert.Equal(t, 401, eval("aaaa-token-00000001"), "the token the file revoked")
	assert.Equal(t, 200, eval("zzzz-token-00000001"), "the token the file gave")
}

// TestServeServicesReloadReplacesAWaitingFile: three SIGHUPs while the
// first file's laws wait on a store that does not answer — the first adds
// b, the second drops it, the third adds it again — each file's origins
// apply as it is read; the second's law never runs (the third replaces it
// in the queue, and the log says so); b is routed with the latest file's
// origins, not those the daemon started with, which it was built with.
func TestServeServicesReloadReplacesAWaitingFile(t *testing.T) {
	fr, store := frozenStore(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "b.yaml")
	conf := func(services, origin string) {
		require.NoError(t, os.WriteFile(file, []byte("tick: 200ms\ncors_origins: ["+origin+"]\nservices:\n"+services), 0o600))
	}
	a := "  - {name: a, features: [{name: x}]}\n"
	b := "  - {name: b, features: [{name: y}]}\n"
	conf(a, "https://old.example")
	d := startDaemon(t, "--listen", testsrv.FreeAddr(t), "--config", file, "--store", store)
	awaitLeader(t, d.base+"/services/a")
	preflight := func(svc, origin string) (int, string) {
		req, _ := http.NewRequest("OPTIONS", d.base+"/services/"+svc+"/ofrep/v1/evaluate/flags", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin")
	}
	applied := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Count(d.errs.String(), "tokens and CORS origins applied") >= n }, 5*time.Second, 10*time.Millisecond)
	}

	fr.hold(t)
	for i, step := range []struct{ services, origin string }{
		{a + b, "https://one.example"}, {a, "https://two.example"}, {a + b, "https://three.example"},
	} {
		conf(step.services, step.origin)
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
		applied(i + 1)
		_, got := preflight("a", step.origin)
		assert.Equal(t, step.origin, got, "file %d's origin, while the first file's laws wait", i+1)
	}
	assert.Regexp(t, `replaces one still waiting to be applied.* reload=3 .*replaces=2`, d.errs.String(), "the third file's law replaces the second's")
	fr.frozen.Store(false)
	require.Eventually(t, func() bool { return strings.Count(d.errs.String(), `msg="brownoutd: configuration reloaded"`) >= 2 }, 30*time.Second, 20*time.Millisecond,
		"the first file's reload and the third's: %s", d.errs.String())
	assert.NotContains(t, d.errs.String(), "service removed", "the second file's law never ran")
	for _, svc := range []string{"a", "b"} {
		code, got := preflight(svc, "https://three.example")
		assert.Equal(t, 204, code, svc)
		assert.Equal(t, "https://three.example", got, "%s: the latest file's origin", svc)
		for _, gone := range []string{"https://old.example", "https://one.example", "https://two.example"} {
			_, got := preflight(svc, gone)
			assert.Empty(t, got, "%s: %s, withdrawn", svc, gone)
		}
	}
}

// TestApplyAccessGivesEveryServiceTheOrigins: a file's CORS origins are
// the daemon's, every service's — one it does not name too (a service a
// reload will remove, or one an earlier file's reload added meanwhile) —
// and its tokens go to the services it names only.
func TestApplyAccessGivesEveryServiceTheOrigins(t *testing.T) {
	dir := t.TempDir()
	f := writeFiles(t, dir, map[string]string{"a": "app aaaa-token-00000001\n", "b": "app bbbb-token-00000001\n", "a2": "app cccc-token-00000001\n"})
	r := newRig(t, "listen: 127.0.0.1:8080\nstate_dir: "+dir+"\ncors_origins: [https://old.example]\nservices:\n"+
		"  - {name: a, features: [{name: x}], auth: {eval_tokens_file: "+f["a"]+"}}\n"+
		"  - {name: b, features: [{name: y}], auth: {eval_tokens_file: "+f["b"]+"}}\n", nil)
	t.Cleanup(func() {
		for _, u := range r.units {
			u.close()
		}
	})
	c, err := parseConfig("next.yaml", []byte("cors_origins: [https://new.example]\nservices:\n  - {name: a, features: [{name: x}], auth: {eval_tokens_file: "+f["a2"]+"}}\n"))
	require.NoError(t, err)
	c.inherit()
	require.NoError(t, c.readServiceTokens())
	applyAccess(&host{log: slog.New(slog.DiscardHandler)}, r.units, c)

	cl := client(r.rt)
	do := func(method, path string, header ...string) *http.Response {
		req, _ := http.NewRequest(method, "http://127.0.0.1:8080"+path, strings.NewReader(`{"context":{"targetingKey":"u1"}}`))
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := cl.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	for _, svc := range []string{"a", "b"} {
		resp := do("OPTIONS", "/services/"+svc+"/ofrep/v1/evaluate/flags", "Origin", "https://new.example", "Access-Control-Request-Method", "POST")
		assert.Equal(t, "https://new.example", resp.Header.Get("Access-Control-Allow-Origin"), "%s: the file's origin", svc)
		resp = do("OPTIONS", "/services/"+svc+"/ofrep/v1/evaluate/flags", "Origin", "https://old.example", "Access-Control-Request-Method", "POST")
		assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), "%s: the origin the file withdrew", svc)
	}
	eval := func(svc, flag, tok string) int {
		return do("POST", "/services/"+svc+"/ofrep/v1/evaluate/flags/"+flag, "Authorization", "Bearer "+tok).StatusCode
	}
	assert.Equal(t, 200, eval("a", "x", "cccc-token-00000001"), "a: the file's token")
	assert.Equal(t, 401, eval("a", "x", "aaaa-token-00000001"), "a: the token the file revoked")
	assert.Equal(t, 200, eval("b", "y", "bbbb-token-00000001"), "b, which the file does not name, keeps its tokens")
}

// awaitLeader waits until the daemon's service at base leads its store.
func awaitLeader(t *testing.T, base string) {
	t.Helper()
	require.Eventually(t, func() bool { return stateOf(t, base).Cluster.Role == "leader" }, 10*time.Second, 50*time.Millisecond)
}

// evalX returns a function that evaluates flag x at base with a bearer
// token and gives the status.
func evalX(t *testing.T, base string) func(tok string) int {
	return func(tok string) int {
		resp, _ := do(t, "POST", base+"/ofrep/v1/evaluate/flags/x", `{"context":{"targetingKey":"u1"}}`, "Authorization", "Bearer "+tok)
		return resp.StatusCode
	}
}
