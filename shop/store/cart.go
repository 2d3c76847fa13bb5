package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Item is a quantity of one product, in a cart or a checkout.
type Item struct {
	ProductID int64
	Qty       int64
}

// checkUser refuses an empty or oversized user id, or one that is not
// text (see checkText).
func checkUser(user string) error {
	if user == "" || len(user) > MaxKeyLen {
		return fmt.Errorf("%w: user id must be 1 to %d bytes", ErrBadInput, MaxKeyLen)
	}
	return checkText("user id", user)
}

// checkText refuses a string that is not UTF-8 or holds control
// characters: PostgreSQL refuses such TEXT (with an error that is not the
// client's to read), SQLite would keep it, and neither belongs in an id.
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not UTF-8", ErrBadInput, what)
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		return fmt.Errorf("%w: %s has a control character at byte %d", ErrBadInput, what, i)
	}
	return nil
}

// AddToCart adds qty units of a product to the user's cart: one row per
// user and product, whose quantity grows with each add. qty must be 1 to
// MaxQty, the line may not grow beyond MaxQty, and a cart holds at most
// MaxCartLines products (ErrBadInput); the product must exist
// (ErrNotFound). Stock is not reserved: Checkout decides. Each add
// renews the whole cart's lifetime (CartTTL, see ExpireCarts).
func (s *Store) AddToCart(ctx context.Context, user string, productID, qty int64) error {
	if err := checkUser(user); err != nil {
		return fmt.Errorf("store: add to cart: %w", err)
	}
	if qty < 1 || qty > MaxQty {
		return fmt.Errorf("store: add to cart: %w: quantity %d, want 1 to %d", ErrBadInput, qty, MaxQty)
	}
	if _, err := s.Product(ctx, productID); err != nil {
		return fmt.Errorf("store: add to cart: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return fmt.Errorf("store: add to cart: %w", err)
	}
	defer s.unlock()
	if err := s.addToCart(ctx, user, productID, qty); err != nil {
		return fmt.Errorf("store: add to cart: %w", err)
	}
	return nil
}

func (s *Store) addToCart(ctx context.Context, user string, productID, qty int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if s.pg { // SQLite's writers are one at a time already
		if _, err := tx.ExecContext(ctx, s.q.cartLock, user); err != nil {
			return err
		}
	}
	now := s.now().UnixMicro()
	res, err := tx.ExecContext(ctx, s.q.cartAdd, user, productID, qty, now, user, user, productID)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		var had int64
		switch err := tx.QueryRowContext(ctx, s.q.cartQty, user, productID).Scan(&had); {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%w: at most %d products in a cart", ErrBadInput, MaxCartLines)
		case err != nil:
			return err
		}
		return fmt.Errorf("%w: product %d: at most %d in a cart line", ErrBadInput, productID, MaxQty)
	}
	if _, err := tx.ExecContext(ctx, s.q.cartTouch, now, user); err != nil {
		return err
	}
	return tx.Commit()
}

// cartBatch bounds one statement of ExpireCarts: a write lock held for a
// few milliseconds, not for the whole table.
const cartBatch = 1000

// ExpireCarts drops the carts idle for CartTTL at now (no add since),
// then, while more than MaxStoredCartLines lines are kept, the carts idle
// longest; it returns how many lines it dropped. The shop runs it with
// Reconcile.
func (s *Store) ExpireCarts(ctx context.Context, now time.Time) (int64, error) {
	dropped, err := s.dropCarts(ctx, now.Add(-CartTTL).UnixMicro())
	if err != nil {
		return dropped, fmt.Errorf("store: expire carts: %w", err)
	}
	var n int64
	if err := s.db.QueryRowContext(ctx, s.q.cartCount).Scan(&n); err != nil {
		return dropped, fmt.Errorf("store: expire carts: %w", err)
	}
	if n <= MaxStoredCartLines {
		return dropped, nil
	}
	// The time of the last line to go; carts are touched whole, so the
	// lines of a cart go together (and ties with it, a few more).
	var cutoff int64
	if err := s.db.QueryRowContext(ctx, s.q.cartNth, n-MaxStoredCartLines-1).Scan(&cutoff); err != nil {
		return dropped, fmt.Errorf("store: expire carts: %w", err)
	}
	more, err := s.dropCarts(ctx, cutoff)
	if err != nil {
		err = fmt.Errorf("store: expire carts: %w", err)
	}
	return dropped + more, err
}

// dropCarts deletes the lines touched at or before cutoff (Unix µs), a
// batch at a time.
func (s *Store) dropCarts(ctx context.Context, cutoff int64) (int64, error) {
	var dropped int64
	for {
		if err := s.lock(ctx); err != nil {
			return dropped, err
		}
		res, err := s.db.ExecContext(ctx, s.q.cartExpire, cutoff, cartBatch)
		s.unlock()
		if err != nil {
			return dropped, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return dropped, err
		}
		dropped += n
		if n < cartBatch {
			return dropped, nil
		}
	}
}

// Cart reads the user's cart, by product id. An empty cart is no error.
func (s *Store) Cart(ctx context.Context, user string) ([]Item, error) {
	rows, err := s.db.QueryContext(ctx, s.q.cartList, user)
	if err != nil {
		return nil, fmt.Errorf("store: cart: %w", err)
	}
	defer rows.Close()
	var out []Item
	for rows.Next() {
		var it Item
		if err := rows.Scan(&it.ProductID, &it.Qty); err != nil {
			return nil, fmt.Errorf("store: cart: %w", err)
		}
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: cart: %w", err)
	}
	return out, nil
}

// ClearCart empties the user's cart. Checkout does not touch carts: the
// caller clears the cart after a checkout made from it.
func (s *Store) ClearCart(ctx context.Context, user string) error {
	if err := s.lock(ctx); err != nil {
		return fmt.Errorf("store: clear cart: %w", err)
	}
	defer s.unlock()
	if _, err := s.db.ExecContext(ctx, s.q.cartClear, user); err != nil {
		return fmt.Errorf("store: clear cart: %w", err)
	}
	return nil
}
