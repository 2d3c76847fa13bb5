package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// reconcileBatch is how many abandoned claims Reconcile reads at a time:
// a bounded read, repeated while it comes back full.
const reconcileBatch = 100

// Reconcile settles the checkouts abandoned unfinished: claims still
// pending whose lease ran out at least AbandonAfter before now — their
// checkout crashed, or failed unsure whether it was charged, and no retry
// with their key came. For each, it takes the claim over, cancels
// whatever was charged under its gateway key (pay.Cancel: the charge is
// voided if it was made, and none will be), and marks the claim failed,
// so that a late retry with the key gets ErrCancelled and nothing is
// charged. A cancel that fails leaves the claim to a later pass (after
// Lease and AbandonAfter again). It returns the number of claims settled.
//
// Run it when the shop starts (what a crashed process left) and every so
// often (checkouts whose client gave up): it is safe beside checkouts and
// beside other Reconciles, on any number of processes — a claim is
// settled by whoever took it over last.
func (s *Store) Reconcile(ctx context.Context, pay Payer, now time.Time) (int, error) {
	if pay == nil {
		return 0, fmt.Errorf("store: reconcile: %w: no payer", ErrBadInput)
	}
	settled := 0
	var errs []error
	for {
		claims, err := s.abandoned(ctx, now)
		if err != nil {
			return settled, errors.Join(append(errs, err)...)
		}
		for _, c := range claims {
			ok, err := s.take(ctx, &c, now)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !ok {
				continue // a retry with the key took it meanwhile
			}
			if err := pay.Cancel(ctx, c.payKey); err != nil {
				errs = append(errs, fmt.Errorf("store: reconcile: order %s: cancel: %w", c.orderID, err))
				continue
			}
			s.settle(ctx, c, stateFailed, failCancelled)
			settled++
		}
		if len(claims) < reconcileBatch || ctx.Err() != nil {
			return settled, errors.Join(errs...)
		}
	}
}

// abandoned reads a batch of claims abandoned at now.
func (s *Store) abandoned(ctx context.Context, now time.Time) ([]checkoutClaim, error) {
	rows, err := s.db.QueryContext(ctx, s.q.claimsAbandoned, now.Add(-AbandonAfter).UnixMicro(), reconcileBatch)
	if err != nil {
		return nil, fmt.Errorf("store: reconcile: %w", err)
	}
	defer rows.Close()
	var out []checkoutClaim
	for rows.Next() {
		c, err := scanClaim(rows)
		if err != nil {
			return nil, fmt.Errorf("store: reconcile: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reconcile: %w", err)
	}
	return out, nil
}

// Pending counts the checkouts claimed and not yet settled: in flight,
// waiting for a retry with their key, or for Reconcile.
func (s *Store) Pending(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, s.q.claimsPending).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: pending checkouts: %w", err)
	}
	return n, nil
}

// Payments returns every order's payment reference, by order id: what a
// test or a soak checks against the gateway's charges.
func (s *Store) Payments(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, s.q.orderPayments)
	if err != nil {
		return nil, fmt.Errorf("store: payments: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, ref string
		if err := rows.Scan(&id, &ref); err != nil {
			return nil, fmt.Errorf("store: payments: %w", err)
		}
		out[id] = ref
	}
	return out, rows.Err()
}
