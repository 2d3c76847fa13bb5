package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/brownout/brownout/signals"
)

// hit is one request as the server saw it.
type hit struct {
	at                        time.Time
	path, lr, lk              string
	body, key, user, fwd, pri string
}

// recorder is a test server that records its requests and answers with
// answer (200 when nil).
type recorder struct {
	mu     sync.Mutex
	hits   []hit
	answer func(w http.ResponseWriter, h hit, n int) // n: earlier hits with h.key
	srv    *httptest.Server
}

func newRecorder(t *testing.T, answer func(w http.ResponseWriter, h hit, n int)) *recorder {
	rec := &recorder{answer: answer}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := new(bytes.Buffer)
		_, _ = b.ReadFrom(r.Body)
		h := hit{at: time.Now(), path: r.URL.Path, lr: r.URL.Query().Get("_lr"), lk: r.URL.Query().Get("_lk"),
			body: b.String(), key: r.Header.Get("Idempotency-Key"), user: r.Header.Get(UserHeader),
			fwd: r.Header.Get(ForwardedHeader), pri: r.Header.Get(signals.PriorityHeader)}
		rec.mu.Lock()
		n := 0
		for _, o := range rec.hits {
			if h.key != "" && o.key == h.key {
				n++
			}
		}
		rec.hits = append(rec.hits, h)
		rec.mu.Unlock()
		if rec.answer != nil {
			rec.answer(w, h, n)
		}
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) all() []hit {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]hit(nil), rec.hits...)
}

func run(t *testing.T, cfg Config) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg.Timeout == 0 {
		cfg.Timeout = 500 * time.Millisecond
	}
	if cfg.Skip == 0 {
		cfg.Skip = -1 // measure everything
	}
	rep, err := Run(ctx, cfg)
	require.NoError(t, err)
	return rep
}

// keyed makes checkout requests: a random product, a body and a fresh
// Idempotency-Key.
func keyed(r Req) (string, []byte, http.Header) {
	id := r.Rand.IntN(1000)
	body := fmt.Sprintf(`{"seq":%d,"user":%d,"product":%d}`, r.Seq, r.User, id)
	return "/product/" + strconv.Itoa(id), []byte(body),
		http.Header{"Idempotency-Key": {fmt.Sprintf("k%d-%x", r.Seq, r.Rand.Uint64())}, "Content-Type": {"application/json"}}
}

func TestMakeBuildsEachRequest(t *testing.T) {
	rec := newRecorder(t, nil)
	rep := run(t, Config{Target: rec.srv.URL, Phases: []Phase{{Name: "sale", Rate: 50, Duration: time.Second}},
		Mix: []Kind{{Name: "checkout", Share: 1, Method: http.MethodPost, Path: "/unused", Class: signals.Critical, Make: keyed}}})
	hits := rec.all()
	require.GreaterOrEqual(t, len(hits), 45)
	bodies, keys, seqs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, h := range hits {
		assert.True(t, strings.HasPrefix(h.path, "/product/"), h.path)
		assert.Equal(t, "0", h.lk)
		assert.Equal(t, "critical", h.pri)
		assert.Contains(t, h.body, `"seq":`+h.lr+",")
		assert.True(t, strings.HasPrefix(h.user, "u"))
		bodies[h.body], keys[h.key], seqs[h.lr] = true, true, true
	}
	assert.Len(t, bodies, len(hits), "distinct bodies")
	assert.Len(t, keys, len(hits), "distinct idempotency keys")
	assert.Len(t, seqs, len(hits), "distinct _lr")
	k := rep.Phases[0].Kinds["checkout"]
	assert.InDelta(t, len(hits), k.Requests, 1) // the one due at the very end falls after the phase
	assert.Equal(t, k.Requests, k.Sent)
	assert.Equal(t, k.Requests, k.OK)
	assert.Equal(t, 1.0, k.Success)
	assert.Zero(t, k.Retries)
}

func TestMakeIsDeterministic(t *testing.T) {
	draw := func() []string {
		cfg := Config{Target: "http://x", Phases: []Phase{{Rate: 1, Duration: time.Second}}, Seed: 7,
			Mix: []Kind{{Name: "a", Share: 1, Make: keyed}, {Name: "b", Share: 1, Users: func(r *rand.Rand) (int, string) { return r.IntN(1e6), "" }}}}
		require.NoError(t, cfg.withDefaults())
		tr := newTargeter(cfg, nil)
		var out []string
		for range 50 {
			var tgt vegeta.Target
			require.NoError(t, tr.next(&tgt))
			out = append(out, tgt.URL+" "+string(tgt.Body)+" "+tgt.Header.Get("Idempotency-Key")+" "+tgt.Header.Get(UserHeader))
		}
		return out
	}
	assert.Equal(t, draw(), draw())
}

func TestAddrSetsForwardedFor(t *testing.T) {
	rec := newRecorder(t, nil)
	addr := func(user int) string { return fmt.Sprintf("10.%d.%d.%d", user>>16&255, user>>8&255, user&255) }
	run(t, Config{Target: rec.srv.URL, Phases: []Phase{{Rate: 100, Duration: 500 * time.Millisecond}}, Users: 1000, Addr: addr})
	hits := rec.all()
	require.GreaterOrEqual(t, len(hits), 45)
	for _, h := range hits {
		u, err := strconv.Atoi(strings.TrimPrefix(h.user, "u"))
		require.NoError(t, err)
		assert.Equal(t, addr(u), h.fwd)
	}
}

// TestMaxConnectionsBoundsThePool: with MaxConnections the target never
// holds more connections than that, however many requests are in flight
// (here 40 ms answers at 200/s, 8 at a time); without it, one a request in
// flight. The requests wait for a connection rather than time out.
func TestMaxConnectionsBoundsThePool(t *testing.T) {
	for _, limit := range []int{3, 0} {
		var mu sync.Mutex
		open, most := 0, 0
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(40 * time.Millisecond)
		}))
		srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			mu.Lock()
			defer mu.Unlock()
			switch st {
			case http.StateNew:
				open++
				most = max(most, open)
			case http.StateClosed, http.StateHijacked:
				open--
			}
		}
		srv.Start()
		run(t, Config{Target: srv.URL, Phases: []Phase{{Rate: 200, Duration: 500 * time.Millisecond}}, MaxConnections: limit, Timeout: 5 * time.Second})
		srv.Close()
		if limit > 0 {
			assert.LessOrEqual(t, most, limit, "connections with MaxConnections %d", limit)
		} else {
			assert.Greater(t, most, 3, "connections, unbounded")
		}
	}
}

func TestUsersPinsTheBotsAddress(t *testing.T) {
	rec := newRecorder(t, nil)
	const botAddr = "203.0.113.9"
	bot := func(r *rand.Rand) (int, string) { return 1_000_000 + r.IntN(1_000_000), botAddr }
	run(t, Config{Target: rec.srv.URL, Phases: []Phase{{Rate: 100, Duration: 500 * time.Millisecond}},
		Addr: func(user int) string { return "10.0.0." + strconv.Itoa(user%250+1) },
		Mix:  []Kind{{Name: "bot", Share: 1, Users: bot}, {Name: "shopper", Share: 1}}})
	users := map[string]bool{}
	var bots, shoppers int
	for _, h := range rec.all() {
		if h.lk == "0" {
			bots++
			users[h.user] = true
			assert.Equal(t, botAddr, h.fwd)
		} else {
			shoppers++
			assert.NotEqual(t, botAddr, h.fwd)
			assert.True(t, strings.HasPrefix(h.fwd, "10.0.0."), h.fwd)
		}
	}
	require.Greater(t, bots, 10)
	require.Greater(t, shoppers, 10)
	assert.Greater(t, len(users), bots*9/10, "the bot rotates its user ids")
}

func TestRetriesResendTheSameRequest(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, _ hit, _ int) { w.WriteHeader(http.StatusServiceUnavailable) })
	rep := run(t, Config{Target: rec.srv.URL, Phases: []Phase{{Rate: 50, Duration: time.Second}}, Timeout: 2 * time.Second,
		Mix: []Kind{{Name: "checkout", Share: 1, Method: http.MethodPost, Make: keyed, Retry: &Retry{Attempts: 3}}}})
	byKey := map[string][]hit{}
	for _, h := range rec.all() {
		byKey[h.key] = append(byKey[h.key], h)
	}
	require.GreaterOrEqual(t, len(byKey), 45)
	for key, hs := range byKey {
		require.Len(t, hs, 3, "attempts of %s", key)
		for _, h := range hs[1:] {
			assert.Equal(t, hs[0].body, h.body)
			assert.Equal(t, hs[0].path, h.path)
			assert.Equal(t, hs[0].lr, h.lr)
			assert.Equal(t, hs[0].user, h.user)
		}
	}
	k := rep.Phases[0].Kinds["checkout"]
	assert.InDelta(t, len(byKey), k.Requests, 1)
	assert.Zero(t, k.OK)
	assert.Zero(t, k.Success)
	assert.InDelta(t, 2*k.Requests, k.Retries, 4) // the last ones' retries fall after the phase
	assert.Equal(t, k.Requests+k.Retries, k.Sent)
	assert.Greater(t, k.Refused["other"], 0.0)
	p := rep.Phases[0]
	assert.InDelta(t, 50, p.Sent-p.Retries, 3, "new requests")
	assert.InDelta(t, 100, p.Retries, 6)
}

func TestRetryBudgetCapsRetries(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, _ hit, _ int) { w.WriteHeader(http.StatusInternalServerError) })
	run(t, Config{Target: rec.srv.URL, Phases: []Phase{{Rate: 50, Duration: time.Second}}, Timeout: 2 * time.Second,
		Mix: []Kind{{Name: "checkout", Share: 1, Make: keyed, Retry: &Retry{Attempts: 10, Budget: 0.2}}}})
	byKey := map[string]int{}
	hits := rec.all()
	for _, h := range hits {
		byKey[h.key]++
	}
	firsts, retries := len(byKey), len(hits)-len(byKey)
	require.GreaterOrEqual(t, firsts, 45)
	assert.LessOrEqual(t, float64(retries), 0.2*float64(firsts))
	assert.InDelta(t, 0.2*float64(firsts), float64(retries), 3)
}

func TestSuccessCountsASecondAttempt(t *testing.T) {
	// The first attempt is refused with Retry-After: 1 s, capped at 60 ms;
	// the second succeeds.
	rec := newRecorder(t, func(w http.ResponseWriter, _ hit, n int) {
		if n == 0 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"reason":"rate_limit"}`))
		}
	})
	rep := run(t, Config{Target: rec.srv.URL, Phases: []Phase{{Rate: 50, Duration: time.Second}}, Timeout: 2 * time.Second,
		Mix: []Kind{{Name: "checkout", Share: 1, Method: http.MethodPost, Make: keyed,
			Retry: &Retry{Attempts: 4, Backoff: 20 * time.Millisecond, Jitter: true, Cap: 60 * time.Millisecond}}}})
	byKey := map[string][]hit{}
	for _, h := range rec.all() {
		byKey[h.key] = append(byKey[h.key], h)
	}
	require.GreaterOrEqual(t, len(byKey), 45)
	var gaps []time.Duration
	for key, hs := range byKey {
		require.Len(t, hs, 2, key)
		gaps = append(gaps, hs[1].at.Sub(hs[0].at))
	}
	slices.Sort(gaps)
	assert.GreaterOrEqual(t, gaps[0], 55*time.Millisecond, "Retry-After honoured…")
	assert.Less(t, gaps[len(gaps)/2], 500*time.Millisecond, "…up to the cap")
	k := rep.Phases[0].Kinds["checkout"]
	assert.InDelta(t, len(byKey), k.Requests, 1)
	assert.Equal(t, k.Requests, k.OK)
	assert.Equal(t, 1.0, k.Success)
	// Every request was retried once; the phase counts the retries sent
	// within it — those of its last Cap (60 ms, 3 requests at 50 a
	// second) and of any scheduling delay past it (under -race on a
	// loaded machine, 5 were) are sent in the drain after it.
	assert.LessOrEqual(t, k.Retries, k.Requests)
	assert.GreaterOrEqual(t, k.Retries, k.Requests-10)
	assert.Greater(t, k.Refused[signals.ReasonRateLimit.String()], 0.0)
	assert.Greater(t, k.P50, time.Duration(0))
}

func TestEventsFireInOrder(t *testing.T) {
	rec := newRecorder(t, nil)
	var mu sync.Mutex
	fired := map[string]time.Duration{}
	var start time.Time
	do := func(name string) func(context.Context) {
		return func(context.Context) {
			mu.Lock()
			fired[name] = time.Since(start)
			mu.Unlock()
		}
	}
	start = time.Now()
	var progress bytes.Buffer
	rep := run(t, Config{Target: rec.srv.URL, Phases: []Phase{{Rate: 20, Duration: 500 * time.Millisecond}}, Progress: &progress,
		Events: []Event{{At: 300 * time.Millisecond, Name: "c", Do: do("c")}, {At: 100 * time.Millisecond, Name: "a", Do: do("a")},
			{At: 200 * time.Millisecond, Name: "b", Do: do("b")}, {At: time.Hour, Name: "never", Do: do("never")},
			{At: 400 * time.Millisecond, Name: "holds until the end", Do: func(ctx context.Context) { <-ctx.Done() }}}})
	// Each Do runs in its own goroutine: they are started in order, each
	// at its time.
	mu.Lock()
	assert.Len(t, fired, 3)
	for name, at := range map[string]time.Duration{"a": 100 * time.Millisecond, "b": 200 * time.Millisecond, "c": 300 * time.Millisecond} {
		assert.GreaterOrEqual(t, fired[name], at, name)
	}
	mu.Unlock()
	require.Len(t, rep.Events, 4)
	for i, name := range []string{"a", "b", "c", "holds until the end"} {
		assert.Equal(t, name, rep.Events[i].Name)
		assert.GreaterOrEqual(t, rep.Events[i].At, time.Duration(i+1)*100*time.Millisecond)
	}
	out := progress.String()
	ia, ib, ic := strings.Index(out, "event: a\n"), strings.Index(out, "event: b\n"), strings.Index(out, "event: c\n")
	assert.True(t, ia >= 0 && ia < ib && ib < ic, out)
	assert.NotContains(t, out, "never")
}

func TestDefaultMixReportsKinds(t *testing.T) {
	rec := newRecorder(t, nil)
	rep := run(t, Config{Target: rec.srv.URL, Phases: []Phase{{Name: "calm", Rate: 100, Duration: 500 * time.Millisecond}}})
	hits := rec.all()
	p := rep.Phases[0]
	assert.InDelta(t, 100, p.Sent, 5) // (Valid, ≥ 98, is a matter of the request due at the very end)
	assert.Zero(t, p.Retries)
	c, d := p.Kinds["critical"], p.Kinds["default"]
	assert.InDelta(t, len(hits), c.Requests+d.Requests, 1)
	assert.Equal(t, 1.0, c.Success)
	assert.Equal(t, 1.0, d.Success)
	assert.InDelta(t, 1.0, p.CriticalOK, 1e-9)
	for _, h := range hits {
		assert.Equal(t, "/", h.path)
		assert.Empty(t, h.fwd)
	}
	var table, js bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	assert.Contains(t, table.String(), "critical")
	assert.Contains(t, table.String(), "100.0% ok")
	require.NoError(t, rep.WriteJSON(&js))
	var back Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	assert.Equal(t, c, back.Phases[0].Kinds["critical"])
}

func TestCancelStopsARetryingRun(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, _ hit, _ int) { w.WriteHeader(http.StatusBadGateway) })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, Config{Target: rec.srv.URL, Phases: []Phase{{Rate: 50, Duration: 10 * time.Second}},
		Mix: []Kind{{Name: "x", Share: 1, Retry: &Retry{Attempts: 5, Backoff: time.Second}}}})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestRetryWait(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	now := time.Now()
	rt := Retry{Backoff: 100 * time.Millisecond, Cap: time.Second}
	assert.Equal(t, 100*time.Millisecond, rt.wait(1, nil, rnd, now))
	assert.Equal(t, 200*time.Millisecond, rt.wait(2, nil, rnd, now))
	assert.Equal(t, 800*time.Millisecond, rt.wait(4, nil, rnd, now))
	assert.Equal(t, time.Second, rt.wait(5, nil, rnd, now))
	assert.Equal(t, time.Second, rt.wait(60, nil, rnd, now))
	ra := http.Header{"Retry-After": {"2"}}
	assert.Equal(t, time.Second, rt.wait(1, ra, rnd, now), "Retry-After capped")
	ra = http.Header{"Retry-After": {now.Add(500 * time.Millisecond).UTC().Format(http.TimeFormat)}}
	w := rt.wait(1, ra, rnd, now)
	assert.True(t, w > 0 && w <= 500*time.Millisecond, w)
	naive := Retry{Attempts: 3}
	assert.Zero(t, naive.wait(1, http.Header{"Retry-After": {"5"}}, rnd, now))
	rt.Jitter = true
	for n := 1; n < 8; n++ {
		w := rt.wait(n, nil, rnd, now)
		assert.True(t, w >= 0 && w < min(100*time.Millisecond<<(n-1), time.Second), w)
	}
	_, ok := retryAfter(http.Header{"Retry-After": {"soon"}}, now)
	assert.False(t, ok)
}

func TestPhasesAt(t *testing.T) {
	ps := phases{{Rate: 10, Duration: time.Second}, {Rate: 0, Duration: time.Second}, {Rate: 100, Duration: time.Second}}
	assert.Equal(t, 100*time.Millisecond, ps.at(1))
	assert.Equal(t, time.Second, ps.at(10))
	assert.Equal(t, 2*time.Second+10*time.Millisecond, ps.at(11))
	assert.Equal(t, 3*time.Second, ps.at(1000))
	for n := uint64(1); n <= 110; n++ {
		assert.InDelta(t, float64(n), ps.due(ps.at(n)), 1e-6)
	}
}
