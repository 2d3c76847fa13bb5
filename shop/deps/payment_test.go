package deps

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/fallback"
)

func TestPaymentIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPaymentGateway(Options{})
		srv := servePipe(p, p.Close)
		defer srv.close()
		c := PaymentClient{BaseURL: srv.URL, HTTP: srv.client(0)}
		ctx := context.Background()

		start := time.Now()
		id, err := c.Charge(ctx, "o-1", 4999, "pay-o-1")
		require.NoError(t, err)
		assert.Regexp(t, `^ch_[0-9a-f]{16}$`, id)
		assert.Equal(t, 30*time.Millisecond, time.Since(start))
		again, err := c.Charge(ctx, "o-1", 4999, "pay-o-1")
		require.NoError(t, err)
		assert.Equal(t, id, again)
		got, ok := p.ChargeID("pay-o-1")
		assert.True(t, ok)
		assert.Equal(t, id, got)

		// The same key for another amount is a conflict, never retried.
		_, err = c.Charge(ctx, "o-1", 5000, "pay-o-1")
		var se *StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusConflict, se.Code)
		assert.Contains(t, se.Detail, "another order or amount")
		assert.False(t, fallback.Retryable(err))

		// Without a key, every call is a new charge.
		a, err := c.Charge(ctx, "o-2", 100, "")
		require.NoError(t, err)
		b, err := c.Charge(ctx, "o-2", 100, "")
		require.NoError(t, err)
		assert.NotEqual(t, a, b)

		assert.Equal(t, PaymentStats{Requests: 5, Charges: 3, AmountCents: 4999 + 200, Replayed: 1, Conflicts: 1}, p.Stats())
	})
}

// TestPaymentClientDisconnects: the gateway charges at the end of its
// latency even if the client gave up; the retry under the same key waits
// for that charge and gets its id.
func TestPaymentClientDisconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPaymentGateway(Options{})
		srv := servePipe(p, p.Close)
		defer srv.close()
		require.NoError(t, p.UpdateFault(func(f *Fault) { f.Slow = true })) // 2 s
		c := PaymentClient{BaseURL: srv.URL, HTTP: srv.client(500 * time.Millisecond)}
		start := time.Now()
		_, err := c.Charge(context.Background(), "o-7", 1999, "pay-o-7")
		require.Error(t, err)
		assert.True(t, fallback.Retryable(err))

		p.ResetFault()
		id, err := PaymentClient{BaseURL: srv.URL, HTTP: srv.client(0)}.Charge(context.Background(), "o-7", 1999, "pay-o-7")
		require.NoError(t, err)
		assert.Equal(t, 2*time.Second, time.Since(start), "the retry waits for the first charge")
		got, _ := p.ChargeID("pay-o-7")
		assert.Equal(t, id, got)
		assert.Equal(t, PaymentStats{Requests: 2, Charges: 1, AmountCents: 1999, Replayed: 1}, p.Stats())
	})
}

func TestPaymentErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPaymentGateway(Options{})
		srv := servePipe(p, p.Close)
		defer srv.close()
		c := PaymentClient{BaseURL: srv.URL, HTTP: srv.client(0)}
		require.NoError(t, p.UpdateFault(func(f *Fault) { f.ErrorRate = 1 }))
		start := time.Now()
		_, err := c.Charge(context.Background(), "o-1", 100, "k")
		assert.Equal(t, 30*time.Millisecond, time.Since(start), "a failure takes the latency too")
		var se *StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusServiceUnavailable, se.Code)
		assert.ErrorIs(t, err, ErrUnavailable)
		assert.NotErrorIs(t, err, ErrRateLimited)
		assert.True(t, fallback.Retryable(err))
		var fe *fallback.StatusError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, http.StatusServiceUnavailable, fe.Status)
		assert.Equal(t, "deps: payment charge: 503 Service Unavailable: the payment gateway failed (injected error)", err.Error())

		// A failed attempt charged nothing: the retry under the same key
		// charges.
		p.ResetFault()
		_, err = c.Charge(context.Background(), "o-1", 100, "k")
		require.NoError(t, err)
		assert.Equal(t, PaymentStats{Requests: 2, Charges: 1, AmountCents: 100, Failed: 1}, p.Stats())
	})

	p := NewPaymentGateway(Options{Sleep: func(context.Context, time.Duration) error { return nil }})
	for _, c := range []struct{ name, body, header, detail string }{
		{"no order", `{"amount_cents":1}`, "", "order: required"},
		{"no amount", `{"order":"o"}`, "", "amount_cents: must be more than 0, got 0"},
		{"keys differ", `{"order":"o","amount_cents":1,"idempotency_key":"a"}`, "b", "differ"},
		{"unknown field", `{"order":"o","amount_cents":1,"currency":"CNY"}`, "", `unknown field "currency"`},
		{"amount a string", `{"order":"o","amount_cents":"1"}`, "", "amount_cents: want int64, got string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := serveRecorded(p, "POST", "/v1/charges", c.body, "Idempotency-Key", c.header)
			require.Equal(t, http.StatusBadRequest, w.Code)
			var pr problem
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &pr))
			assert.Contains(t, pr.Detail, c.detail)
		})
	}
	// The body's key alone is honoured.
	w1 := serveRecorded(p, "POST", "/v1/charges", `{"order":"o","amount_cents":1,"idempotency_key":"a"}`)
	w2 := serveRecorded(p, "POST", "/v1/charges", `{"order":"o","amount_cents":1}`, "Idempotency-Key", "a")
	require.Equal(t, http.StatusCreated, w1.Code)
	require.Equal(t, http.StatusCreated, w2.Code)
	var c1, c2 Charge
	require.NoError(t, json.Unmarshal(w1.Body.Bytes(), &c1))
	require.NoError(t, json.Unmarshal(w2.Body.Bytes(), &c2))
	assert.Equal(t, c1.ID, c2.ID)
	assert.True(t, c2.Replayed)
	assert.Equal(t, "true", w2.Header().Get("Idempotent-Replayed"))
	assert.False(t, errors.Is(&StatusError{Code: 400}, ErrUnavailable))
}
