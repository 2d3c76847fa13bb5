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

	"github.com/brownout/brownout/fallback/sqlite"
)

func openTestDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "shop.db"))
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

// TestOutboxRunReturnsCtxErr: Run ends only with its context, and says so.
func TestOutboxRunReturnsCtxErr(t *testing.T) {
	db := openTestDB(t)
	defer db.Close()
	o, err := NewOutbox(context.Background(), db, OutboxConfig{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = o.Run(ctx, func(context.Context, Message) error { return nil })
	assert.ErrorIs(t, err, context.Canceled)
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

// smsProvider is a slow provider as it is in life: a request that reaches
// it is delivered after its latency whether or not the client is still
// waiting (a client's timeout does not unsend an SMS), and it dedupes on
// the idempotency key (a key it has taken before is answered without a
// second delivery). Deliveries are counted by message text, what the
// handset shows: a message sent under two keys is delivered twice.
type smsProvider struct {
	slowFrom, slowUntil time.Time
	deliveries          sync.WaitGroup

	mu        sync.Mutex
	raw       map[string]int  // requests by key
	taken     map[string]bool // keys taken on: the provider's dedupe
	delivered map[string]int  // deliveries by text
}

func (p *smsProvider) send(ctx context.Context, m Message) error {
	now := time.Now()
	lat := 200 * time.Millisecond
	if !now.Before(p.slowFrom) && now.Before(p.slowUntil) {
		lat = 30 * time.Second
	}
	p.mu.Lock()
	p.raw[m.Key]++
	dup := p.taken[m.Key]
	p.taken[m.Key] = true
	p.mu.Unlock()
	if !dup {
		p.deliveries.Go(func() {
			time.Sleep(lat)
			p.mu.Lock()
			p.delivered[string(m.Payload)]++
			p.mu.Unlock()
		})
	}
	select {
	case <-time.After(lat):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestSMSProviderSlowdown is the sources' incident: the SMS provider goes
// from 200 ms to 30 s. Checkout must not freeze: its latency is the normal
// p99 plus the guard's timeout only until the breaker opens, then about
// normal; every SMS is queued; after the provider recovers all are
// delivered, none twice (counted by text at a provider that delivers what
// it received even after the client gave up, and dedupes by key).
func TestSMSProviderSlowdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := openTestDB(t)
		defer db.Close()
		ctx, cancel := context.WithCancel(context.Background())
		t0 := time.Now()
		prov := &smsProvider{slowFrom: t0.Add(10 * time.Second), slowUntil: t0.Add(40 * time.Second),
			raw: map[string]int{}, taken: map[string]bool{}, delivered: map[string]int{}}
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
					return struct{}{}, prov.send(ctx, Message{Key: "sms-" + id, Payload: []byte("order " + id + " confirmed")})
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
		prov.deliveries.Wait() // the late ones too
		lost, twice, late := 0, 0, 0
		for i := range orders {
			switch prov.delivered[fmt.Sprintf("order %05d confirmed", i)] {
			case 0:
				lost++
			case 1:
			default:
				twice++
			}
			if prov.raw[fmt.Sprintf("sms-%05d", i)] > 1 {
				late++ // sent again after a timeout: the provider's dedupe at work
			}
		}
		assert.Zero(t, lost, "SMS never delivered")
		assert.Zero(t, twice, "SMS delivered twice")
		assert.Positive(t, late, "some SMS were sent again after a timeout (else the dedupe was not exercised)")
		raw := 0
		for _, c := range prov.raw {
			raw += c
		}
		t.Logf("%d SMS, %d sends to the provider (timeouts included), %d from the outbox; %d sent again after a timeout, delivered once",
			orders, raw, st.Sent, late)
	})
}

func BenchmarkOutboxEnqueue(b *testing.B) {
	dir := b.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "bench.db"))
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
	db, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"))
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

// sendLog records sends, per key and in time order.
type sendLog struct {
	mu    sync.Mutex
	count map[string]int
	at    []time.Time
	by    map[int]int // sends by drainer
}

func newSendLog() *sendLog { return &sendLog{count: map[string]int{}, by: map[int]int{}} }

func (l *sendLog) sender(drainer int) Sender {
	return func(_ context.Context, m Message) error {
		l.mu.Lock()
		l.count[m.Key]++
		l.at = append(l.at, time.Now())
		l.by[drainer]++
		l.mu.Unlock()
		return nil
	}
}

// twice and missing count keys sent more than once and never, of n
// checkouts numbered %04d.
func (l *sendLog) twice(n int) (twice, missing int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range n {
		switch c := l.count[fmt.Sprintf("sms-%04d", i)]; {
		case c == 0:
			missing++
		case c > 1:
			twice++
		}
	}
	return twice, missing
}

// sqliteAt opens the SQLite file at path.
func sqliteAt(path string) func() (*sql.DB, error) {
	return func() (*sql.DB, error) { return sqlite.Open(path) }
}

// drainersOn opens n outboxes, each on its own connection pool from open,
// configured by cfg and sending through l; run drains them until the
// outbox is empty.
func drainersOn(t *testing.T, open func() (*sql.DB, error), n int, cfg OutboxConfig, l *sendLog) ([]*Outbox, func(t *testing.T)) {
	t.Helper()
	var boxes []*Outbox
	var dbs []*sql.DB
	for range n {
		db, err := open()
		require.NoError(t, err)
		dbs = append(dbs, db)
		o, err := NewOutbox(context.Background(), db, cfg)
		require.NoError(t, err)
		boxes = append(boxes, o)
	}
	run := func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i, o := range boxes {
			wg.Go(func() { o.Run(ctx, l.sender(i)) })
		}
		for range 36000 {
			st, err := boxes[0].Stats(ctx)
			require.NoError(t, err)
			if st.Depth == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		for _, db := range dbs {
			db.Close()
		}
	}
	return boxes, run
}

// excess returns the most sends beyond Rate·d in any interval d of the
// send times at (in order), and that interval.
func excess(at []time.Time, rate float64) (worst float64, d time.Duration) {
	for i := range at {
		for j := i; j < len(at); j++ {
			if e := float64(j-i+1) - rate*at[j].Sub(at[i]).Seconds(); e > worst {
				worst, d = e, at[j].Sub(at[i])
			}
		}
	}
	return worst, d
}

// TestOutboxLeaseOutlivedByPacedBatch: a batch that takes longer to send at
// the pace than its lease (Batch ÷ Rate > Lease) must not let a second
// drainer claim and send the same messages.
func TestOutboxLeaseOutlivedByPacedBatch(t *testing.T) {
	for _, c := range []struct {
		rate  float64
		batch int
		lease time.Duration
	}{
		{20, 100, 2 * time.Second}, // the issue's: 5 s of sending on a 2 s lease
		{50, 100, time.Second},
		{200, 100, 100 * time.Millisecond},
		{20, 10, 30 * time.Second}, // the lease is long enough
	} {
		t.Run(fmt.Sprintf("rate=%v,batch=%d,lease=%v", c.rate, c.batch, c.lease), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "shop.db")
				db, err := sqlite.Open(path)
				require.NoError(t, err)
				_, err = db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`)
				require.NoError(t, err)
				cfg := OutboxConfig{Rate: c.rate, Batch: c.batch, Lease: c.lease}
				o, err := NewOutbox(context.Background(), db, cfg)
				require.NoError(t, err)
				const n = 100
				for i := range n {
					require.NoError(t, checkout(context.Background(), db, o, fmt.Sprintf("%04d", i), time.Time{}, false))
				}
				db.Close()
				l := newSendLog()
				_, run := drainersOn(t, sqliteAt(path), 2, cfg, l)
				run(t)
				twice, missing := l.twice(n)
				assert.Zero(t, twice, "messages sent twice")
				assert.Zero(t, missing, "messages never sent")
			})
		})
	}
}

// TestOutboxStaleClaimIsFenced: a drainer whose lease expired and whose
// messages another drainer has claimed can neither delete, reschedule,
// release nor dead-letter them.
func TestOutboxStaleClaimIsFenced(t *testing.T) {
	db := openTestDB(t)
	defer db.Close()
	ctx := context.Background()
	now := time.Date(2025, 11, 28, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	cfg := OutboxConfig{Lease: 10 * time.Second, MaxAttempts: 1, Now: clock}
	a, err := NewOutbox(ctx, db, cfg)
	require.NoError(t, err)
	b, err := NewOutbox(ctx, db, cfg)
	require.NoError(t, err)
	require.NoError(t, checkout(ctx, db, a, "1", time.Time{}, false))

	stale, err := a.claim(ctx)
	require.NoError(t, err)
	require.Len(t, stale, 1)
	now = now.Add(11 * time.Second) // a's lease is over
	fresh, err := b.claim(ctx)
	require.NoError(t, err)
	require.Len(t, fresh, 1, "b claims the message a's lease no longer covers")
	state := func() (n int, nextAt int64) {
		t.Helper()
		require.NoError(t, db.QueryRow(`SELECT COUNT(*), COALESCE(MAX(next_at), 0) FROM outbox`).Scan(&n, &nextAt))
		return n, nextAt
	}
	_, leased := state()

	require.NoError(t, a.done(ctx, stale[0]))
	n, nextAt := state()
	assert.Equal(t, 1, n, "a's done after its lease deletes nothing")
	assert.Equal(t, leased, nextAt)

	a.cfg.MaxAttempts = 8
	require.NoError(t, a.fail(ctx, stale[0], errors.New("timeout")))
	n, nextAt = state()
	assert.Equal(t, 1, n)
	assert.Equal(t, leased, nextAt, "a's retry does not reschedule b's message")

	a.releaseAll(stale)
	_, nextAt = state()
	assert.Equal(t, leased, nextAt, "a's release does not make b's message due")

	a.cfg.MaxAttempts = 1
	require.NoError(t, a.fail(ctx, stale[0], errors.New("timeout")))
	var dead int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM outbox_dead`).Scan(&dead))
	n, _ = state()
	assert.Equal(t, 0, dead, "a cannot dead-letter b's message")
	assert.Equal(t, 1, n)

	st, err := a.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), st.Fenced, "done, retry, release and dead letter were fenced")

	require.NoError(t, b.done(ctx, fresh[0]))
	n, _ = state()
	assert.Equal(t, 0, n, "the claim's holder deletes it")
	st, _ = b.Stats(ctx)
	assert.Zero(t, st.Fenced)
}

// TestOutboxPaceIsShared: the pace is the provider's contract, for the
// fleet: N drainers together send at most Rate·d + Burst messages in any
// interval d, and together reach the Rate.
func TestOutboxPaceIsShared(t *testing.T) {
	for _, drainers := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(drainers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "shop.db")
				db, err := sqlite.Open(path)
				require.NoError(t, err)
				_, err = db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`)
				require.NoError(t, err)
				const rate, burst, n = 100.0, 5, 600
				cfg := OutboxConfig{Rate: rate, Burst: burst, Batch: 50}
				o, err := NewOutbox(context.Background(), db, cfg)
				require.NoError(t, err)
				for i := range n {
					require.NoError(t, checkout(context.Background(), db, o, fmt.Sprintf("%04d", i), time.Time{}, false))
				}
				db.Close()
				l := newSendLog()
				_, run := drainersOn(t, sqliteAt(path), drainers, cfg, l)
				run(t)
				twice, missing := l.twice(n)
				require.Zero(t, twice)
				require.Zero(t, missing)
				at := l.at
				worst, worstD := excess(at, rate)
				assert.LessOrEqual(t, worst, burst+1e-9, "sends beyond Rate·d in an interval of %v", worstD)
				took := at[len(at)-1].Sub(at[0])
				assert.InDelta(t, float64(n-1)/rate, took.Seconds(), 0.05*n/rate, "the fleet drains at the Rate")
				for i := range drainers {
					assert.Positive(t, l.by[i], "drainer %d took part", i)
				}
				t.Logf("%d drainers: %d messages in %v, worst excess over Rate·d %.2f (interval %v), by drainer %v",
					drainers, n, took, worst, worstD, l.by)
			})
		})
	}
}

// A provider that takes 200 ms to answer must not slow the drain below the
// contract: sends overlap (Concurrency), their starts paced by Rate.
func TestOutboxDrainIsNotBoundByLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := openTestDB(t)
		defer db.Close()
		const rate, n = 200.0, 400
		o, err := NewOutbox(context.Background(), db, OutboxConfig{Rate: rate, Burst: 1})
		require.NoError(t, err)
		for i := range n {
			require.NoError(t, checkout(context.Background(), db, o, fmt.Sprintf("%04d", i), time.Time{}, false))
		}
		var mu sync.Mutex
		inFlight, most, sent := 0, 0, 0
		send := func(ctx context.Context, m Message) error {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			time.Sleep(200 * time.Millisecond)
			mu.Lock()
			inFlight--
			sent++
			mu.Unlock()
			return nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		done := make(chan struct{})
		go func() { o.Run(ctx, send); close(done) }()
		for {
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			s := sent
			mu.Unlock()
			if s == n || time.Since(start) > time.Minute {
				break
			}
		}
		took := time.Since(start)
		cancel()
		<-done
		assert.Equal(t, n, sent)
		// Paced at 200/s: 2 s, plus the last send's 200 ms (and the polls);
		// one at a time it would take 80 s.
		assert.Less(t, took, 3*time.Second, "drained in %v", took)
		assert.LessOrEqual(t, most, 40, "Rate × 200 ms in flight")
		t.Logf("%d messages at 200 ms each drained in %v, at most %d in flight", n, took, most)
	})
}

// TestOutboxSenderPanicIsAFailedAttempt: a Sender that panics on a poison
// message must not take the drainer down (on every restart); the panic is
// a failed attempt, with its value in the error, and after MaxAttempts the
// message is a dead letter.
func TestOutboxSenderPanicIsAFailedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := openTestDB(t)
		defer db.Close()
		ctx := context.Background()
		o, err := NewOutbox(ctx, db, OutboxConfig{MaxAttempts: 2, Backoff: func(int) time.Duration { return time.Second }})
		require.NoError(t, err)
		require.NoError(t, checkout(ctx, db, o, "1", time.Time{}, false))
		send := func(context.Context, Message) error { panic("nil map in the SMS template") }
		for range 2 {
			_, err := o.DrainOnce(ctx, send)
			require.NoError(t, err)
			time.Sleep(time.Second)
		}
		st, err := o.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, st.Depth)
		assert.Equal(t, uint64(2), st.Failed)
		assert.Equal(t, uint64(1), st.DeadLettered)
		var attempts int
		var last string
		require.NoError(t, db.QueryRow(`SELECT attempts, last_error FROM outbox_dead WHERE msg_key = 'sms-1'`).Scan(&attempts, &last))
		assert.Equal(t, 2, attempts)
		assert.Contains(t, last, "nil map in the SMS template")
	})
}

// TestOutboxGuardRefusalIsNotAnAttempt: the documented wiring, a Sender
// that calls the provider through its guard, with the breaker half-open
// (3 trials) and the drain sending more at once than the bulkhead holds.
// The guard's refusals (ErrOpen, ErrFull) are sends that did not happen:
// they must not use up attempts, and no message may be dead-lettered
// without reaching the healthy provider.
func TestOutboxGuardRefusalIsNotAnAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := openTestDB(t)
		defer db.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		g, err := New(Config{Name: "sms", MaxConcurrent: 4, MaxAttempts: 1, Timeout: time.Second})
		require.NoError(t, err)
		for g.Allows() { // the provider was down: the breaker opened
			Call(ctx, g, sleepCall(time.Hour, nil))
		}
		time.Sleep(30 * time.Second) // its delay is over: half-open at the next call
		o, err := NewOutbox(ctx, db, OutboxConfig{Allow: g.Allows, Concurrency: 10, MaxAttempts: 2})
		require.NoError(t, err)
		const n = 50
		for i := range n {
			require.NoError(t, checkout(ctx, db, o, fmt.Sprintf("%04d", i), time.Time{}, false))
		}
		var mu sync.Mutex
		reached := map[string]int{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			o.Run(ctx, func(ctx context.Context, m Message) error {
				_, err := Call(ctx, g, func(ctx context.Context) (struct{}, error) {
					mu.Lock()
					reached[m.Key]++
					mu.Unlock()
					time.Sleep(200 * time.Millisecond)
					return struct{}{}, nil
				})
				return err
			})
		}()
		for range 600 {
			st, err := o.Stats(ctx)
			require.NoError(t, err)
			if st.Depth == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		<-done
		st, err := o.Stats(context.Background())
		require.NoError(t, err)
		t.Logf("%d messages: %d sent, %d dead-lettered, %d failed sends, breaker %s", n, st.Sent, st.DeadLettered, st.Failed, g.Status().State)
		assert.Zero(t, st.DeadLettered, "dead-lettered without reaching the provider")
		assert.Equal(t, uint64(n), st.Sent)
		assert.Zero(t, st.Failed, "a refusal is not a failed send")
		assert.Len(t, reached, n)
	})
}

// TestOutboxEnqueueNilPayload: a message with no payload (a nil slice) is
// an empty one, not a NOT NULL violation.
func TestOutboxEnqueueNilPayload(t *testing.T) {
	db := openTestDB(t)
	defer db.Close()
	ctx := context.Background()
	o, err := NewOutbox(ctx, db, OutboxConfig{})
	require.NoError(t, err)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, o.Enqueue(ctx, tx, Message{Key: "ping"}))
	require.NoError(t, tx.Commit())
	var got []Message
	n, err := o.DrainOnce(ctx, func(_ context.Context, m Message) error { got = append(got, m); return nil })
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.Len(t, got, 1)
	assert.Empty(t, got[0].Payload)
}

// TestOutboxSentBeforeShutdownIsNotSentAgain: a send that succeeded as the
// drain's context ended is deleted all the same; deleting it on the
// cancelled context failed, and the message went out again on restart.
func TestOutboxSentBeforeShutdownIsNotSentAgain(t *testing.T) {
	db := openTestDB(t)
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o, err := NewOutbox(ctx, db, OutboxConfig{})
	require.NoError(t, err)
	require.NoError(t, checkout(ctx, db, o, "1", time.Time{}, false))
	n, err := o.DrainOnce(ctx, func(context.Context, Message) error {
		cancel() // SIGTERM while the provider answers
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	st, err := o.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 0, st.Depth, "the sent message is gone")
}
