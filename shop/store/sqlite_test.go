package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDSN(t *testing.T) {
	for _, tc := range []struct {
		dsn, want string
		pg        bool
	}{
		{dsn: "postgres://u@h/db", want: "postgres://u@h/db", pg: true},
		{dsn: "PostgreSQL://u@h/db?sslmode=disable", want: "PostgreSQL://u@h/db?sslmode=disable", pg: true},
		{dsn: "shop.db", want: "file:shop.db?"},
		{dsn: "/tmp/a b/shop?.db", want: "file:/tmp/a b/shop%3F.db?"},
		{dsn: "//x/100%#1", want: "file:/x/100%25%231?"},
		{dsn: "postgres:/x", want: "file:postgres:/x?"},
	} {
		kind, got, err := parseDSN(tc.dsn)
		require.NoError(t, err, tc.dsn)
		assert.Equal(t, tc.pg, kind == kindPostgres, tc.dsn)
		if tc.pg {
			assert.Equal(t, tc.want, got)
			continue
		}
		assert.True(t, strings.HasPrefix(got, tc.want), "%s: %s", tc.dsn, got)
		assert.Contains(t, got, "_txlock=immediate")
		assert.Contains(t, got, "journal_mode(WAL)")
		assert.Contains(t, got, "busy_timeout(5000)")
	}
	for _, bad := range []string{"", ":memory:", "a\x00b"} {
		_, _, err := parseDSN(bad)
		assert.ErrorIs(t, err, ErrBadInput, "%q", bad)
	}
}

// A path with URI syntax in it opens the file of that name.
func TestSQLiteOddPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "50% off?#1.db")
	s, err := Open(t.Context(), path)
	require.NoError(t, err)
	defer s.Close()
	assert.FileExists(t, path)
}

// Every writing transaction on SQLite begins IMMEDIATE: it holds the
// write lock from BEGIN, so a second writer waits at its BEGIN (here
// with a 100 ms busy timeout: fails there) instead of failing later to
// upgrade; read-only transactions still begin at once.
func TestSQLiteBeginImmediate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shop.db")
	s := open(t, path)
	tx, err := s.DB().BeginTx(t.Context(), nil)
	require.NoError(t, err)
	defer tx.Rollback()
	_, dsn, err := parseDSN(path)
	require.NoError(t, err)
	other, err := sql.Open("sqlite", strings.Replace(dsn, "busy_timeout(5000)", "busy_timeout(100)", 1))
	require.NoError(t, err)
	defer other.Close()
	ro, err := other.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
	require.NoError(t, err, "a reader begins while a writer holds the lock")
	var n int
	require.NoError(t, ro.QueryRow(`SELECT COUNT(*) FROM shop_products`).Scan(&n))
	assert.Equal(t, CatalogueSize, n)
	ro.Rollback()
	begun := time.Now()
	_, err = other.BeginTx(t.Context(), nil)
	require.Error(t, err, "a second writer cannot begin")
	assert.True(t, isRetryable(err), "SQLITE_BUSY: %v", err)
	assert.GreaterOrEqual(t, time.Since(begun), 90*time.Millisecond, "it waited for the lock")
}

// Two handles on one file, as two processes would have: their checkouts
// meet only in SQLite's lock, and still never oversell.
func TestSQLiteTwoHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shop.db")
	a, b := open(t, path), open(t, path)
	var g gateway
	var created atomic.Int64
	var wg sync.WaitGroup
	for i := range 50 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			_, ok, err := s.Checkout(t.Context(), CheckoutRequest{User: fmt.Sprintf("u%d", i), Items: []Item{{1, 3}},
				IdempotencyKey: fmt.Sprintf("k%d", i)}, &g, nil)
			if err != nil {
				assert.ErrorIs(t, err, ErrOutOfStock)
				return
			}
			if ok {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 33, created.Load())
	_, live, _ := g.made()
	assert.Equal(t, 33, live, "live charges")
	assert.Equal(t, ProductStats{Initial: 100, Stock: 1, Sold: 99}, stats(t, a).Products[1])
	books(t, a, &g)
}

// A context that ends while a checkout waits for SQLite's writer slot
// ends the wait, before anything is charged.
func TestSQLiteWaitEndsWithContext(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "shop.db"))
	require.NoError(t, s.lock(t.Context())) // another writer holds the slot
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	var g gateway
	_, _, err := s.Checkout(ctx, CheckoutRequest{User: "b", Items: []Item{{1, 1}}}, &g, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Zero(t, g.calls.Load())
	s.unlock()
	_, _, err = s.Checkout(t.Context(), CheckoutRequest{User: "b", Items: []Item{{1, 1}}}, &g, nil)
	require.NoError(t, err)
	assert.EqualValues(t, FlashStock-1, stock(t, s, 1))
}
