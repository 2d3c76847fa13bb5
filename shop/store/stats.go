package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Stats is a consistent snapshot of the sales.
type Stats struct {
	Orders       int64
	Units        int64 // units sold, all products
	RevenueCents int64
	// Products: every product's stock and sales, by id.
	Products map[int64]ProductStats
}

// ProductStats is one product's stock and sales.
type ProductStats struct {
	Initial int64 // the seeded stock
	Stock   int64 // left
	Sold    int64 // units in orders
}

// Stats reads the counts in one read-only transaction (a snapshot: on
// PostgreSQL REPEATABLE READ).
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	opts := &sql.TxOptions{ReadOnly: true}
	if s.pg {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return Stats{}, fmt.Errorf("store: stats: %w", err)
	}
	defer tx.Rollback()
	st := Stats{Products: map[int64]ProductStats{}}
	if err := tx.QueryRowContext(ctx, s.q.statsOrders).Scan(&st.Orders, &st.RevenueCents); err != nil {
		return Stats{}, fmt.Errorf("store: stats: %w", err)
	}
	rows, err := tx.QueryContext(ctx, s.q.statsProducts)
	if err != nil {
		return Stats{}, fmt.Errorf("store: stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var p ProductStats
		if err := rows.Scan(&id, &p.Initial, &p.Stock, &p.Sold); err != nil {
			return Stats{}, fmt.Errorf("store: stats: %w", err)
		}
		st.Products[id] = p
		st.Units += p.Sold
	}
	if err := rows.Err(); err != nil {
		return Stats{}, fmt.Errorf("store: stats: %w", err)
	}
	return st, nil
}

// Check reports every product whose books do not balance: stock below
// zero, more sold than the initial stock, or sold + stock ≠ initial. Nil
// means no order ever took more than the stock.
func (st Stats) Check() error {
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(st.Products)) {
		p := st.Products[id]
		if p.Stock < 0 || p.Sold > p.Initial || p.Sold+p.Stock != p.Initial {
			errs = append(errs, fmt.Errorf("store: product %d: initial %d, sold %d, stock %d", id, p.Initial, p.Sold, p.Stock))
		}
	}
	return errors.Join(errs...)
}
