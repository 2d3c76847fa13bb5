package fallback

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/brownout/brownout/internal/pgtest"
	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOutboxPostgres(t *testing.T) {
	dsn := pgtest.Start(t)
	open := func() (*sql.DB, error) { return sql.Open("pgx", dsn) }
	db, err := open()
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	_, err = db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`)
	require.NoError(t, err)
	// The contract: 200/s with a burst of 5, for the fleet.
	const rate, burst = 200.0, 5
	cfg := OutboxConfig{Dialect: Postgres, Rate: rate, Burst: burst, Batch: 20}
	o, err := NewOutbox(ctx, db, cfg)
	require.NoError(t, err)

	// Same transaction as the order: a failed checkout leaves neither.
	require.Error(t, pgCheckout(ctx, db, o, "declined", true))
	var orders int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM orders WHERE id = 'declined'`).Scan(&orders))
	assert.Zero(t, orders, "no order from a failed checkout")
	st, err := o.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Depth, "no message from a failed checkout")

	// Two, then three drainers share the outbox (FOR UPDATE SKIP LOCKED,
	// fenced claims, one pace): each message goes out once, every drainer
	// takes part, and together they keep to the contract.
	const n = 400
	for round, drainers := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d drainers", drainers), func(t *testing.T) {
			for i := range n {
				require.NoError(t, pgCheckout(ctx, db, o, fmt.Sprintf("%d-%04d", round, i), false))
			}
			st, err := o.Stats(ctx)
			require.NoError(t, err)
			require.Equal(t, n, st.Depth)
			l := newSendLog()
			_, run := drainersOn(t, open, drainers, cfg, l)
			run(t)
			for i := range n {
				assert.Equal(t, 1, l.count[fmt.Sprintf("sms-%d-%04d", round, i)], "sms-%d-%04d sent once", round, i)
			}
			for i := range drainers {
				assert.Positive(t, l.by[i], "drainer %d took part", i)
			}
			// Real time: a send's time is taken in the sender, just after
			// the drainer's pace wait, so each drainer may show one send
			// late (and so bunched with the next ones): N beyond the burst;
			// and under -race on two busy cores a sender goroutine may wake
			// up to ~15 ms late, bunching up to Rate × 15 ms more.
			worst, d := excess(l.at, rate)
			jitter := rate * 0.015
			assert.LessOrEqual(t, worst, float64(burst+drainers)+jitter, "sends beyond Rate·d in an interval of %v", d)
			took := l.at[len(l.at)-1].Sub(l.at[0])
			t.Logf("%d drainers: %d messages in %v (%.0f/s, contract %.0f/s), worst excess over Rate·d %.2f (interval %v), by drainer %v",
				drainers, n, took.Round(time.Millisecond), float64(n-1)/took.Seconds(), rate, worst, d.Round(time.Millisecond), l.by)
		})
	}
}

func pgCheckout(ctx context.Context, db *sql.DB, o *Outbox, id string, fail bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES ($1, $2)`, id, 4200); err != nil {
		return err
	}
	if err := o.Enqueue(ctx, tx, Message{Key: "sms-" + id, Topic: "sms", Payload: []byte(id)}); err != nil {
		return err
	}
	if fail {
		return fmt.Errorf("payment declined")
	}
	return tx.Commit()
}
