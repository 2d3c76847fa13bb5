package deps

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/fallback"
)

func TestRecommend(t *testing.T) {
	e := NewRecsEngine(Options{}, nil)
	differ := false
	for p := 1; p <= DefaultCatalogSize; p++ {
		product := strconv.Itoa(p)
		got := e.Recommend(product, "u1")
		require.Len(t, got, RecsCount)
		assert.NotContains(t, got, product)
		seen := map[string]bool{}
		for _, id := range got {
			n, err := strconv.Atoi(id)
			require.NoError(t, err)
			assert.True(t, n >= 1 && n <= DefaultCatalogSize, id)
			assert.False(t, seen[id], "distinct")
			seen[id] = true
		}
		assert.Equal(t, got, e.Recommend(product, "u1"), "deterministic")
		differ = differ || strings.Join(got, ",") != strings.Join(e.Recommend(product, "u2"), ",")
	}
	assert.True(t, differ, "personalised")

	small := NewRecsEngine(Options{}, []string{"a", "b", "c"})
	assert.ElementsMatch(t, []string{"a", "c"}, small.Recommend("b", ""))
	assert.Equal(t, []string{}, NewRecsEngine(Options{}, []string{"a"}).Recommend("a", ""))
}

func TestRecsClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := NewRecsEngine(Options{}, nil)
		srv := servePipe(e, e.Close)
		defer srv.close()
		c := RecsClient{BaseURL: srv.URL, HTTP: srv.client(0)}
		ctx := context.Background()
		got, err := c.Get(ctx, "7", "user 1&x=2")
		require.NoError(t, err)
		assert.Equal(t, e.Recommend("7", "user 1&x=2"), got, "the query is escaped")

		_, err = c.Get(ctx, "", "u")
		var se *StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusBadRequest, se.Code)
		assert.False(t, fallback.Retryable(err))

		require.NoError(t, e.UpdateFault(func(f *Fault) { f.ErrorRate = 1 }))
		_, err = c.Get(ctx, "7", "u")
		assert.ErrorIs(t, err, ErrUnavailable)

		// A client that gives up leaves nothing behind.
		e.ResetFault()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		_, err = c.Get(ctx, "7", "u")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		synctest.Wait()
		assert.Equal(t, RecsStats{Requests: 4, Served: 1, Failed: 1, Invalid: 1}, e.Stats())
	})
}

// TestLatency: each dependency takes its latency, and its slow latency in
// slow mode, set from Go or over HTTP.
func TestLatency(t *testing.T) {
	type dep struct {
		name       string
		h          http.Handler
		stop       func()
		call       func(base string, hc *http.Client) error
		normal     time.Duration
		slow       time.Duration
		updateSlow func()
	}
	ctx := context.Background()
	mk := func() []dep {
		p, s, e := NewPaymentGateway(Options{}), NewSMSProvider(Options{}), NewRecsEngine(Options{}, nil)
		n := 0
		return []dep{
			{"payment", p, p.Close, func(u string, hc *http.Client) error {
				_, err := PaymentClient{BaseURL: u, HTTP: hc}.Charge(ctx, "o", 1, "")
				return err
			}, 30 * time.Millisecond, 2 * time.Second, func() { p.UpdateFault(func(f *Fault) { f.Slow = true }) }},
			{"sms", s, s.Close, func(u string, hc *http.Client) error {
				n++
				return SMSClient{BaseURL: u, HTTP: hc}.Send(ctx, "+1", "x", strconv.Itoa(n))
			}, 200 * time.Millisecond, 30 * time.Second, func() { s.UpdateFault(func(f *SMSFault) { f.Slow = true }) }},
			{"recs", e, e.Close, func(u string, hc *http.Client) error {
				_, err := RecsClient{BaseURL: u, HTTP: hc}.Get(ctx, "1", "u")
				return err
			}, 50 * time.Millisecond, 600 * time.Millisecond, func() { e.UpdateFault(func(f *Fault) { f.Slow = true }) }},
		}
	}
	for i, name := range []string{"payment", "sms", "recs"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := mk()[i] // made in the bubble
				require.Equal(t, name, d.name)
				srv := servePipe(d.h, d.stop)
				defer srv.close()
				hc := srv.client(0)
				took := func() time.Duration {
					start := time.Now()
					require.NoError(t, d.call(srv.URL, hc))
					return time.Since(start)
				}
				assert.Equal(t, d.normal, took())
				d.updateSlow()
				assert.Equal(t, d.slow, took())
				w := serveRecorded(d.h, "PUT", "/admin/fault", `{"slow_latency":"1.25s"}`)
				require.Equal(t, http.StatusOK, w.Code)
				assert.Equal(t, 1250*time.Millisecond, took())
				w = serveRecorded(d.h, "PUT", "/admin/fault", `{"slow":false,"latency":"5ms"}`)
				require.Equal(t, http.StatusOK, w.Code)
				assert.Equal(t, 5*time.Millisecond, took())
			})
		})
	}
}

// TestSleepHook: an injected Sleep stands in for every latency.
func TestSleepHook(t *testing.T) {
	var slept []time.Duration
	e := NewRecsEngine(Options{
		Sleep: func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return ctx.Err() },
		Rand:  func() float64 { return 0.5 },
	}, nil)
	require.Equal(t, http.StatusOK, serveRecorded(e, "GET", "/v1/recommendations?product=1", "").Code)
	require.NoError(t, e.UpdateFault(func(f *Fault) { f.Slow, f.ErrorRate = true, 0.51 }))
	require.Equal(t, http.StatusServiceUnavailable, serveRecorded(e, "GET", "/v1/recommendations?product=1", "").Code)
	require.NoError(t, e.UpdateFault(func(f *Fault) { f.ErrorRate = 0.5 }))
	require.Equal(t, http.StatusOK, serveRecorded(e, "GET", "/v1/recommendations?product=1", "").Code, "Rand() < ErrorRate fails")
	assert.Equal(t, []time.Duration{50 * time.Millisecond, 600 * time.Millisecond, 600 * time.Millisecond}, slept)
}

// TestStart serves the three on real loopback sockets, with no latency.
func TestStart(t *testing.T) {
	noDelay := Fault{}
	p, s, e := NewPaymentGateway(Options{}), NewSMSProvider(Options{}), NewRecsEngine(Options{}, nil)
	require.NoError(t, p.SetFault(noDelay))
	require.NoError(t, e.SetFault(noDelay))
	ps, err := p.Start("")
	require.NoError(t, err)
	defer ps.Close()
	ss, err := s.Start(":0")
	require.NoError(t, err)
	defer ss.Close()
	es, err := e.Start("127.0.0.1:0")
	require.NoError(t, err)
	for _, u := range []string{ps.URL, ss.URL, es.URL} {
		assert.True(t, strings.HasPrefix(u, "http://127.0.0.1:"), u)
	}

	// The SMS provider's knobs over the network.
	req, _ := http.NewRequest("PUT", ss.URL+"/admin/fault", strings.NewReader(`{"latency":"0s"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, time.Duration(0), s.Fault().Latency)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := PaymentClient{BaseURL: ps.URL}.Charge(ctx, "o", 1, "k")
	require.NoError(t, err)
	assert.NotEmpty(t, id)
	require.NoError(t, SMSClient{BaseURL: ss.URL}.Send(ctx, "+1", "hi", "k"))
	assert.Equal(t, 1, s.Delivered("k"))
	recs, err := RecsClient{BaseURL: es.URL}.Get(ctx, "3", "")
	require.NoError(t, err)
	assert.Len(t, recs, RecsCount)

	require.NoError(t, es.Shutdown(ctx))
	_, err = RecsClient{BaseURL: es.URL}.Get(ctx, "3", "")
	require.Error(t, err)
	var se *StatusError
	assert.False(t, errors.As(err, &se), "a transport error, not an answer")
	assert.True(t, fallback.Retryable(err), "connection refused: %v", err)
}
