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

// TestPaymentRefusesVoidedCharge: a charge once voided is never replayed
// as if it stood: a retry under its key is a 409 (charge-voided), not
// retried, and charges nothing.
func TestPaymentRefusesVoidedCharge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPaymentGateway(Options{})
		srv := servePipe(p, p.Close)
		defer srv.close()
		c := PaymentClient{BaseURL: srv.URL, HTTP: srv.client(0)}
		ctx := context.Background()
		id, err := c.Charge(ctx, "o-1", 4999, "k")
		require.NoError(t, err)
		require.NoError(t, c.Void(ctx, id))
		_, err = c.Charge(ctx, "o-1", 4999, "k")
		var se *StatusError
		require.ErrorAs(t, err, &se, "the voided charge replayed")
		assert.Equal(t, http.StatusConflict, se.Code)
		assert.Contains(t, se.Detail, "voided")
		assert.ErrorIs(t, err, ErrVoided)
		assert.False(t, fallback.Retryable(err))
		assert.Equal(t, []ChargeRecord{{ID: id, IdempotencyKey: "k", Order: "o-1", AmountCents: 4999, Voided: true}}, p.Charges())
		st := p.Stats()
		assert.EqualValues(t, 1, st.Charges)
		assert.EqualValues(t, 1, st.Voided)
		assert.Zero(t, st.Replayed)
	})
}

// TestPaymentCancel: a cancel by key voids the charge made under it —
// waiting for one in flight — or, with none made, makes sure none will
// be; cancelling twice changes nothing more.
func TestPaymentCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPaymentGateway(Options{})
		srv := servePipe(p, p.Close)
		defer srv.close()
		c := PaymentClient{BaseURL: srv.URL, HTTP: srv.client(0)}
		ctx := context.Background()

		// Nothing charged under the key: nothing will be.
		id, err := c.Cancel(ctx, "never")
		require.NoError(t, err)
		assert.Empty(t, id)
		_, err = c.Charge(ctx, "o-1", 100, "never")
		assert.ErrorIs(t, err, ErrVoided)

		// A charge made, then cancelled by its key, twice.
		made, err := c.Charge(ctx, "o-2", 200, "k2")
		require.NoError(t, err)
		for range 2 {
			id, err = c.Cancel(ctx, "k2")
			require.NoError(t, err)
			assert.Equal(t, made, id)
		}
		_, err = c.Charge(ctx, "o-2", 200, "k2")
		assert.ErrorIs(t, err, ErrVoided)

		// A charge in flight (slow: 2 s): the cancel waits for it and
		// voids it; the client that asked for it gets the charge id (it
		// was made), and its retry is refused.
		require.NoError(t, p.UpdateFault(func(f *Fault) { f.Slow = true }))
		charged := make(chan string, 1)
		go func() {
			id, err := c.Charge(ctx, "o-3", 300, "k3")
			assert.NoError(t, err)
			charged <- id
		}()
		synctest.Wait()
		id, err = c.Cancel(ctx, "k3")
		require.NoError(t, err)
		assert.Equal(t, <-charged, id)
		p.ResetFault()
		_, err = c.Charge(ctx, "o-3", 300, "k3")
		assert.ErrorIs(t, err, ErrVoided)

		list, err := c.Charges(ctx)
		require.NoError(t, err)
		assert.Equal(t, []ChargeRecord{
			{ID: made, IdempotencyKey: "k2", Order: "o-2", AmountCents: 200, Voided: true},
			{ID: id, IdempotencyKey: "k3", Order: "o-3", AmountCents: 300, Voided: true},
		}, list)
		st := p.Stats()
		assert.Equal(t, PaymentStats{Requests: 5, Charges: 2, AmountCents: 500, Conflicts: 3, Voided: 2, VoidedCents: 500, Cancelled: 1}, st)

		_, err = c.Cancel(ctx, "")
		var se *StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusBadRequest, se.Code)
	})
}
