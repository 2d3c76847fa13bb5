//go:build unix

package main

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/server"
)

// TestMaxConnsWithinTheFileLimit: serve refuses a max_conns above what
// the process may open, saying what to raise; the default is not checked.
func TestMaxConnsWithinTheFileLimit(t *testing.T) {
	var l syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l))
	assert.NoError(t, checkNoFile(&config{}), "the default")
	assert.NoError(t, checkNoFile(&config{Conns: server.Limits{MaxConns: minConns}}))
	if l.Cur >= maxConns+noFileSlack {
		t.Skipf("this process may open %d files: no max_conns is above it", l.Cur)
	}
	err := checkNoFile(&config{Conns: server.Limits{MaxConns: maxConns}})
	assert.ErrorContains(t, err, "max_conns 1048576 needs about 1048640 open files, and this process may open")
	assert.ErrorContains(t, err, "(ulimit -n; LimitNOFILE= under systemd): raise the limit or lower max_conns")
}
