package store

import (
	"context"
	"fmt"
	"strings"
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
// MaxQty and the line may not grow beyond MaxQty (ErrBadInput); the
// product must exist (ErrNotFound). Stock is not reserved: Checkout
// decides.
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
	res, err := s.db.ExecContext(ctx, s.q.cartAdd, user, productID, qty)
	if err != nil {
		return fmt.Errorf("store: add to cart: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: add to cart: %w", err)
	} else if n == 0 {
		return fmt.Errorf("store: add to cart: %w: product %d: at most %d in a cart line", ErrBadInput, productID, MaxQty)
	}
	return nil
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
