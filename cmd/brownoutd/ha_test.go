package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
