package store

import (
	"context"
	"fmt"
	"time"
)

// OrderIDsSince returns the ids of the orders created at or after since,
// oldest first: what a sale report checks the SMS of.
func (s *Store) OrderIDsSince(ctx context.Context, since time.Time) ([]string, error) {
	q := `SELECT id FROM shop_orders WHERE created_at >= ? ORDER BY id`
	if s.pg {
		q = numbered(q)
	}
	rows, err := s.db.QueryContext(ctx, q, since.UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("store: orders since %v: %w", since, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: orders since %v: %w", since, err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
