//go:build unix

package main

import (
	"fmt"
	"syscall"
)

// noFileSlack is what the daemon opens besides its connections: the
// listener, the state files, the store's and the sources' connections.
const noFileSlack = 64

// checkNoFile refuses a max_conns set above what this process may open
// (its file-descriptor limit, ulimit -n, which Go raises to the hard
// limit at start): past it the server could not accept the connections
// it was told to hold. The default max_conns is not checked, as before
// it could be set.
func checkNoFile(c *config) error {
	if c.Conns.MaxConns == 0 {
		return nil
	}
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return nil // nothing to tell
	}
	need := uint64(c.Conns.MaxConns + noFileSlack)
	if l.Cur < need {
		return fmt.Errorf("max_conns %d needs about %d open files, and this process may open %d (ulimit -n; LimitNOFILE= under systemd): raise the limit or lower max_conns", c.Conns.MaxConns, need, l.Cur)
	}
	return nil
}
