package shop

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStateDirIsPrivate: without a state dir the shop keeps its database
// in the user's XDG state home, in a directory only the user may enter;
// with no place of the user's own it refuses to start (it fell back to a
// shared temporary directory), and it refuses a directory every user may
// write.
func TestStateDirIsPrivate(t *testing.T) {
	for _, k := range []string{"STATE_DIRECTORY", "XDG_STATE_HOME", "XDG_CACHE_HOME", "HOME"} {
		t.Setenv(k, "")
	}
	_, err := New(context.Background(), Config{Protect: None})
	require.Error(t, err, "no HOME, no XDG state home, no systemd state dir: no private place")
	assert.ErrorContains(t, err, "StateDir")

	home, xdg := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", xdg)
	s, err := New(context.Background(), Config{Protect: None})
	require.NoError(t, err)
	s.Close()
	dir := filepath.Join(xdg, "brownout", "shop")
	fi, err := os.Stat(dir)
	require.NoError(t, err, "the database under $XDG_STATE_HOME/brownout/shop")
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "only the user may enter it")
	assert.FileExists(t, filepath.Join(dir, "shop.db"))

	open := t.TempDir()
	require.NoError(t, os.Chmod(open, 0o777))
	_, err = New(context.Background(), Config{Protect: None, StateDir: open})
	assert.ErrorContains(t, err, "writable by every user")
}
