package statedir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDefault: systemd's StateDirectory, else the XDG state home, else
// ~/.local/state; relative paths are ignored; with none, ErrNoDefault —
// never a shared temporary directory.
func TestDefault(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"STATE_DIRECTORY": "/var/lib/app:/var/lib/other", "XDG_STATE_HOME": "/x", "HOME": "/home/op"}, "/var/lib/app"},
		{map[string]string{"XDG_STATE_HOME": "/x", "HOME": "/home/op"}, "/x/app"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/home/op"}, "/home/op/.local/state/app"},
		{map[string]string{"HOME": "relative"}, ""},
		{map[string]string{}, ""},
	} {
		got, err := Default("app", func(k string) string { return tc.env[k] })
		if tc.want == "" {
			assert.ErrorIs(t, err, ErrNoDefault, "%v", tc.env)
			continue
		}
		require.NoError(t, err, "%v", tc.env)
		assert.Equal(t, tc.want, got, "%v", tc.env)
	}
}

// TestMake: a missing directory is created for this user alone; one every
// user may write, or a file, is refused.
func TestMake(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	require.NoError(t, Make(dir))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	shared := t.TempDir()
	require.NoError(t, os.Chmod(shared, 0o777))
	assert.ErrorContains(t, Make(shared), "writable by every user")

	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	assert.Error(t, Make(file))
}
