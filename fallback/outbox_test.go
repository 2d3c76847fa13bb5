package fallback

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openTestDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := OpenSQLite(filepath.Join(t.TempDir(), "shop.db"))
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`)
	require.NoError(t, err)
	return db
}

// checkout writes an order and its SMS in one transaction.
func checkout(ctx context.Context, db *sql.DB, o *Outbox, id string, notBefore time.Time, fail bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES (?, ?)`, id, 4200); err != nil {
		return err
	}
	if err := o.Enqueue(ctx, tx, Message{Key: "sms-" + id, Topic: "sms", Payload: []byte("order " + id + " confirmed"), NotBefore: notBefore}); err != nil {
		return err
	}
	if fail {
		return errors.New("payment declined") // the order and its SMS vanish together
	}
	return tx.Commit()
}

func TestOutboxIsTransactional(t *testing.T) {
	db := openTestDB(t)
	defer db.Close()
	ctx := context.Background()
	o, err := NewOutbox(ctx, db, OutboxConfig{})
	require.NoError(t, err)
	require.Error(t, checkout(ctx, db, o, "1", time.Time{}, true))
	st, _ := o.Stats(ctx)
	assert.Equal(t, 0, st.Depth, "rolled back with the order")
	require.NoError(t, checkout(ctx, db, o, "2", time.Time{}, false))
	tx, _ := db.Begin()
	require.NoError(t, o.Enqueue(ctx, tx, Message{Key: "sms-2", Payload: []byte("again")}))
	require.NoError(t, tx.Commit())
	st, _ = o.Stats(ctx)
	assert.Equal(t, 1, st.Depth, "one message per idempotency key")
	_, err = NewOutbox(ctx, db, OutboxConfig{Table: "x; DROP TABLE orders"})
	assert.ErrorContains(t, err, "letters, digits and underscores")
}

func TestOutboxDrainPaceOrderAndDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := openTestDB(t)
		defer db.Close()
		ctx := context.Background()
		o, err := NewOutbox(ctx, db, OutboxConfig{Rate: 500, MaxAttempts: 3, Backoff: func(int) time.Duration { return time.Second }})
		require.NoError(t, err)
		for i := range 1000 {
			require.NoError(t, checkout(ctx, db, o, fmt.Sprintf("%04d", i), time.Time{}, false))
		}
		tx, _ := db.Begin()
		require.NoError(t, o.Enqueue(ctx, tx, Message{Key: "poison", Payload: []byte("x")}))
		require.NoError(t, tx.Commit())

		var order []string
		send := func(_ context.Context, m Message) error {
			if m.Key == "poison" {
				return errors.New("provider rejects it")
			}
			order = append(order, m.Key)
			return nil
		}
		start := time.Now()
		for range 20 {
			if _, err := o.DrainOnce(ctx, send); err != nil {
				t.Fatal(err)
			}
		}
		took := time.Since(start)
		assert.Len(t, order, 1000)
		assert.True(t, slices.IsSorted(order), "oldest first")
		assert.InDelta(t, 2.0, took.Seconds(), 0.1, "1000 messages at 500/s")
		for range 3 {
			time.Sleep(time.Second)
			o.DrainOnce(ctx, send)
		}
		st, err := o.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, st.Depth)
		assert.Equal(t, uint64(1000), st.Sent)
		assert.Equal(t, uint64(1), st.DeadLettered, "after MaxAttempts the poison message is a dead letter")
		var dead int
		require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM outbox_dead WHERE msg_key = 'poison' AND attempts = 3`).Scan(&dead))
		assert.Equal(t, 1, dead)
	})
}

// smsProvider delivers after its latency unless the caller gives up; it
// dedupes by key as a real receiver would, and counts raw sends too.
type smsProvider struct {
	mu        sync.Mutex
	slowFrom  time.Time
	slowUntil time.Time
	raw       map[string]int
	delivered map[string]int
}

func (p *smsProvider) send(ctx context.Context, m Message) error {
	now := time.Now()
	p.mu.Lock()
	lat := 200 * time.Millisecond
	if !now.Before(p.slowFrom) && now.Before(p.slowUntil) {
		lat = 30 * time.Second
	}
	p.raw[m.Key]++
	p.mu.Unlock()
	select {
	case <-time.After(lat):
	case <-ctx.Done():
		return ctx.Err()
	}
	p.mu.Lock()
	if p.delivered[m.Key] == 0 {
		p.delivered[m.Key] = 1 // dedupe on the idempotency key
	} else {
		p.delivered[m.Key]++
	}
	p.mu.Unlock()
	return nil
}

// TestSMSProviderSlowdown is the sources' incident: the SMS provider goes
// from 200 ms to 30 s. Checkout must not freeze: its latency is the normal
// p99 plus the guard's timeout only until the breaker opens, then about
// normal; every SMS is queued; after the provider recovers all are
// delivered, none twice.
func TestSMSProviderSlowdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := openTestDB(t)
		defer db.Close()
		ctx, cancel := context.WithCancel(context.Background())
		t0 := time.Now()
		prov := &smsProvider{slowFrom: t0.Add(10 * time.Second), slowUntil: t0.Add(40 * time.Second),
			raw: map[string]int{}, delivered: map[string]int{}}
		g, err := New(Config{Name: "sms", MaxAttempts: 1})
		require.NoError(t, err)
		o, err := NewOutbox(ctx, db, OutboxConfig{Allow: g.Allows})
		require.NoError(t, err)
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			o.Run(ctx, func(ctx context.Context, m Message) error {
				_, err := Call(ctx, g, func(ctx context.Context) (struct{}, error) { return struct{}{}, prov.send(ctx, m) })
				return err
			})
		}()

		type obs struct {
			at      time.Duration
			latency time.Duration
		}
		var mu sync.Mutex
		var seen []obs
		var wg sync.WaitGroup
		const orders = 1200 // 20 per second for 60 s
		for i := range orders {
			time.Sleep(50 * time.Millisecond)
			wg.Go(func() {
				start := time.Now()
				id := fmt.Sprintf("%05d", i)
				// The drain leaves the message to the handler for 5 s.
				require.NoError(t, checkout(ctx, db, o, id, start.Add(5*time.Second), false))
				_, err := Call(ctx, g, func(ctx context.Context) (struct{}, error) {
					return struct{}{}, prov.send(ctx, Message{Key: "sms-" + id})
				})
				if err == nil {
					o.Done(ctx, "sms-"+id)
				}
				mu.Lock()
				seen = append(seen, obs{start.Sub(t0), time.Since(start)})
				mu.Unlock()
			})
		}
		wg.Wait()
		// Recovery: give the breaker its 30 s and the drain its time.
		for range 120 {
			st, _ := o.Stats(ctx)
			if st.Depth == 0 {
				break
			}
			time.Sleep(time.Second)
		}
		cancel()
		<-drained

		var opened time.Duration
		for _, tr := range g.Status().Transitions {
			if tr.To == "open" && opened == 0 {
				opened = tr.At.Sub(t0)
			}
		}
		require.NotZero(t, opened, "the breaker opened")
		assert.LessOrEqual(t, opened-10*time.Second, 3*time.Second, "open within 3 s of the slowdown")
		timeout := 300 * time.Millisecond // p99 200 ms × 1.5
		var before, during, after []time.Duration
		for _, s := range seen {
			switch {
			case s.at < 10*time.Second:
				before = append(before, s.latency)
			case s.at < opened:
				during = append(during, s.latency)
			case s.at < 40*time.Second:
				after = append(after, s.latency)
			}
		}
		assert.LessOrEqual(t, slices.Max(before), 210*time.Millisecond, "normal: the provider's 200 ms")
		assert.LessOrEqual(t, slices.Max(during), 210*time.Millisecond+timeout, "normal + the timeout until the breaker opens")
		assert.LessOrEqual(t, slices.Max(after), time.Millisecond, "breaker open: the SMS waits in the outbox, checkout does not")
		t.Logf("breaker open %v after the slowdown; checkout latency max before %v, until open %v, while open %v",
			opened-10*time.Second, slices.Max(before), slices.Max(during), slices.Max(after))

		st, err := o.Stats(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 0, st.Depth, "everything drained after recovery")
		var n int
		require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM orders`).Scan(&n))
		assert.Equal(t, orders, n)
		for i := range orders {
			key := fmt.Sprintf("sms-%05d", i)
			assert.Equal(t, 1, prov.delivered[key], "%s delivered once", key)
		}
		raw := 0
		for _, c := range prov.raw {
			raw += c
		}
		t.Logf("%d SMS, %d sends to the provider (timeouts included), %d from the outbox", orders, raw, st.Sent)
	})
}

func BenchmarkOutboxEnqueue(b *testing.B) {
	dir := b.TempDir()
	db, err := OpenSQLite(filepath.Join(dir, "bench.db"))
	require.NoError(b, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`)
	require.NoError(b, err)
	ctx := context.Background()
	o, _ := NewOutbox(ctx, db, OutboxConfig{})
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		if err := checkout(ctx, db, o, fmt.Sprint(i), time.Time{}, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
}

func BenchmarkOutboxDrainUnpaced(b *testing.B) {
	db, err := OpenSQLite(filepath.Join(b.TempDir(), "bench.db"))
	require.NoError(b, err)
	defer db.Close()
	db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`)
	ctx := context.Background()
	o, _ := NewOutbox(ctx, db, OutboxConfig{Rate: 1e9})
	for i := range b.N {
		checkout(ctx, db, o, fmt.Sprint(i), time.Time{}, false)
	}
	b.ResetTimer()
	sent := 0
	for sent < b.N {
		n, err := o.DrainOnce(ctx, func(context.Context, Message) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		sent += n
	}
	b.ReportMetric(float64(sent)/b.Elapsed().Seconds(), "msgs/s")
}
