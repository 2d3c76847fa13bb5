package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/pgtest"
	"github.com/brownout/brownout/internal/testsrv"
)

// TestStoreUnreachableAtStart: a store that cannot be reached stops the
// start at once with an error that names it (without its password): exit
// status 1, not a daemon that serves without its state.
func TestStoreUnreachableAtStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	_, _, err = runArgs("serve", "--listen", "127.0.0.1:0", "--store", "postgres://brownoutd:hunter2@"+addr+"/brownoutd")
	require.Error(t, err)
	assert.False(t, errors.As(err, new(usageError)), "exit status 1, not a usage error")
	assert.Contains(t, err.Error(), "cannot be reached")
	assert.Contains(t, err.Error(), addr)
	assert.NotContains(t, err.Error(), "hunter2")
	assert.Less(t, time.Since(start), 5*time.Second)
}

// TestStoreSetting: --store, BROWNOUTD_STORE and store: take a
// postgres:// URL, and nothing else; with one, no state dir is needed.
func TestStoreSetting(t *testing.T) {
	_, _, err := runArgs("serve", "--store", "mysql://db/x")
	assert.ErrorContains(t, err, "want a postgres:// URL")
	var f serveFlags
	c, _, err := f.settings(func(k string) string {
		return map[string]string{"BROWNOUTD_STORE": "postgresql://db/x"}[k]
	}, map[string]bool{})
	require.NoError(t, err)
	assert.Equal(t, "postgresql://db/x", c.Store)
	assert.Empty(t, c.StateDir, "no state dir with a store")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("store: redis://x\n"), 0o600))
	_, _, err = runArgs("check-config", bad)
	assert.ErrorContains(t, err, "line 1: store:")
}

// TestImportStateUsage: import-state wants a store and one file.
func TestImportStateUsage(t *testing.T) {
	for _, args := range [][]string{{"import-state"}, {"import-state", "x.json"}, {"import-state", "--store", "mysql://x", "x.json"}} {
		_, _, err := runArgs(args...)
		assert.True(t, errors.As(err, new(usageError)), "%q: %v", args, err)
	}
}

// TestImportStateOfAService: a daemon of several services keeps each
// service's state in state_dir/services/NAME/operator.json;
// import-state --service NAME writes it into that service's rows, and a
// file under services/NAME/ without --service is refused, rather than
// imported as the one service's ("default"): its overrides would land on
// another service.
func TestImportStateOfAService(t *testing.T) {
	if testing.Short() {
		t.Skip("a real PostgreSQL")
	}
	dsn := pgtest.Start(t)
	dir := filepath.Join(t.TempDir(), "services", "shop")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	file := filepath.Join(dir, "operator.json")
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	require.NoError(t, os.WriteFile(file, fmt.Appendf(nil,
		`{"v":1,"frozen":false,"shadow":false,"overrides":[{"feature":"reviews","level":0.5,"until":%q,"reason":"war room"}]}`, until), 0o600))

	_, _, err := runArgs("import-state", "--store", dsn, file)
	require.True(t, errors.As(err, new(usageError)), "%v", err)
	assert.ErrorContains(t, err, "--service shop")
	_, _, err = runArgs("import-state", "--store", dsn, "--service", "Shop!", file)
	assert.True(t, errors.As(err, new(usageError)), "a service's name is checked: %v", err)

	out, _, err := runArgs("import-state", "--store", dsn, "--service", "shop", file)
	require.NoError(t, err)
	assert.Contains(t, out, "service shop: 1 overrides")
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	rows, err := pool.Query(context.Background(), `SELECT service || '/' || feature FROM brownout_override ORDER BY 1`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"shop/reviews"}, got, "the shop's override, in the shop's rows only")
}

// TestStorePoolTooSmall: a store URL whose pool_max_conns leaves no
// connection for a leader's renewal while a write waits on the store is
// taken, with a warning that says so; the default pool is not warned of.
func TestStorePoolTooSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("a real PostgreSQL")
	}
	dsn := pgtest.Start(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(file, []byte("services:\n  - {name: a, features: [{name: x}]}\n  - {name: b, features: [{name: y}]}\n"), 0o600))
	for _, tc := range []struct {
		args []string
		warn bool
	}{
		{[]string{"--config", file, "--store", dsn + "&pool_max_conns=2"}, true},
		{[]string{"--config", file, "--store", dsn}, false},
		{[]string{"--store", dsn + "&pool_max_conns=1"}, true},
	} {
		d := startDaemon(t, append([]string{"--listen", testsrv.FreeAddr(t)}, tc.args...)...)
		d.stop(t)
		assert.Equal(t, tc.warn, strings.Contains(d.errs.String(), "pool is smaller than a leader needs"), "%q: %s", tc.args, d.errs.String())
	}
}
