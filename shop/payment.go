package shop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/fallback"
	"github.com/brownout/brownout/shop/deps"
	"github.com/brownout/brownout/shop/store"
)

// payer is the payment gateway as the store's checkouts use it: through
// the payment guard when the shop is protected, directly under None.
type payer struct{ s *Shop }

var _ store.Payer = payer{}

// call runs a gateway call through the guard, if there is one.
func payCall[T any](s *Shop, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	if s.payG == nil {
		return f(ctx)
	}
	return fallback.Call(ctx, s.payG, f)
}

func (p payer) Charge(ctx context.Context, key, order string, amountCents int64) (string, error) {
	var asked atomic.Bool
	ref, err := payCall(p.s, ctx, func(ctx context.Context) (string, error) {
		asked.Store(true)
		return p.s.pay.Charge(ctx, order, amountCents, key)
	})
	switch {
	case err == nil:
		return ref, nil
	case errors.Is(err, deps.ErrVoided):
		return "", fmt.Errorf("%w: %w", store.ErrChargeVoided, err)
	case !asked.Load():
		// The guard refused before any attempt (breaker open, bulkhead
		// full, no time left): the gateway never heard of this key.
		return "", fmt.Errorf("%w: %w", store.ErrNotCharged, err)
	}
	return "", err
}

// Void gives a charge back; a failure is counted (the store leaves the
// checkout to Reconcile, which cancels it later).
func (p payer) Void(ctx context.Context, ref string) error {
	_, err := payCall(p.s, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, p.s.pay.Void(ctx, ref) })
	if err != nil {
		p.s.counts.unmatched.Add(1)
		p.s.cfg.Logger.Warn("shop: void failed: the charge is cancelled when its checkout is reconciled", "charge", ref, "err", err)
		return err
	}
	p.s.counts.voided.Add(1)
	return nil
}

func (p payer) Cancel(ctx context.Context, key string) error {
	id, err := payCall(p.s, ctx, func(ctx context.Context) (string, error) { return p.s.pay.Cancel(ctx, key) })
	if err == nil && id != "" {
		p.s.counts.voided.Add(1)
	}
	return err
}

// reconcileEvery is how often the shop settles the checkouts abandoned
// unfinished (store.Reconcile): a small share of store.AbandonAfter, so
// that money taken for nothing comes back within about that time.
const reconcileEvery = 10 * time.Second

// reconcile runs store.Reconcile when the shop starts — what a crashed
// process left — and every reconcileEvery until ctx ends; and with it
// store.ExpireCarts, the carts' reaper (idle carts, and the carts past the
// store's bound).
func (s *Shop) reconcile(ctx context.Context) {
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		n, err := s.store.Reconcile(ctx, payer{s}, time.Now())
		s.counts.cancelled.Add(int64(n))
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("shop: reconciling abandoned checkouts", "settled", n, "err", err)
		}
		if dropped, err := s.store.ExpireCarts(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("shop: expiring carts", "dropped", dropped, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// CheckCharges checks the books of the money: payments are the orders'
// charge ids (store.Payments), charges the gateway's (its
// GET /admin/charges). Every order stands on exactly one live charge made
// for it, every live charge backs exactly one order, and no voided charge
// backs any; nil means so. The error lists at most a few of each kind.
func CheckCharges(payments map[string]string, charges []deps.ChargeRecord) error {
	const most = 5 // of each kind: enough to see what went wrong
	var errs []error
	counts := map[string]int{}
	report := func(kind, format string, a ...any) {
		if counts[kind]++; counts[kind] <= most {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	byID := make(map[string]deps.ChargeRecord, len(charges))
	for _, c := range charges {
		byID[c.ID] = c
	}
	backs := map[string]int{}
	for _, id := range slices.Sorted(maps.Keys(payments)) {
		ref := payments[id]
		c, ok := byID[ref]
		switch {
		case !ok:
			report("unknown", "order %s: its charge %q is unknown to the gateway", id, ref)
		case c.Voided:
			report("voided", "order %s stands on voided charge %s", id, ref)
		case c.Order != id:
			report("other", "order %s stands on charge %s, made for order %s", id, ref, c.Order)
		}
		backs[ref]++
	}
	for _, c := range charges {
		switch n := backs[c.ID]; {
		case c.Voided:
		case n == 0:
			report("orphan", "live charge %s (order %s, %d cents) backs no order", c.ID, c.Order, c.AmountCents)
		case n > 1:
			report("twice", "live charge %s backs %d orders", c.ID, n)
		}
	}
	for kind, n := range counts {
		if n > most {
			errs = append(errs, fmt.Errorf("… and %d more of kind %s", n-most, kind))
		}
	}
	return errors.Join(errs...)
}
