package pgtest

import (
	"os/exec"
	"testing"
)

// Server is a PostgreSQL server started by StartServer: its DSN, and
// Stop and Start to take it down and bring it back on the same port and
// data (a restart, as a test of what survives one needs).
type Server struct {
	DSN     string
	command func(args ...string) *exec.Cmd
	ctl     []string // pg_ctl and its -D, -l
	opts    string
}

// Stop stops the server (fast mode: sessions are ended, what was
// committed is kept).
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	args := append(append([]string(nil), s.ctl...), "-m", "fast", "-w", "stop")
	if out, err := s.command(args...).CombinedOutput(); err != nil {
		t.Fatalf("postgres: stop: %v\n%s", err, out)
	}
}

// Start starts a stopped server again, and waits until it accepts
// connections.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	args := append(append([]string(nil), s.ctl...), "-w", "-o", s.opts, "start")
	if out, err := s.command(args...).CombinedOutput(); err != nil {
		t.Fatalf("postgres: start: %v\n%s", err, out)
	}
}
