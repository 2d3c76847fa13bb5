// Package pgtest starts a throwaway PostgreSQL server for tests.
//
// [Start] runs initdb and pg_ctl from /usr/lib/postgresql/*/bin (the
// newest version found) in a temporary directory, listening on 127.0.0.1
// only, and stops the server when the test ends. It skips the test only
// where the binaries are absent and CI is not set (.ci/run sets it, and
// installs them); wherever the binaries are present, failing to start the
// server is a test failure, not a skip.
package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/brownout/brownout/internal/testsrv"
)

// Start runs a PostgreSQL server on 127.0.0.1 in a temporary directory
// and returns its DSN, postgres://postgres@127.0.0.1:PORT/postgres with
// trust authentication and sslmode=disable. The server runs with
// fsync=off, as the postgres user when the test runs as root (initdb
// refuses root), and is stopped (immediate mode) and its directory
// removed in t.Cleanup.
//
// Without initdb under /usr/lib/postgresql the test is skipped, unless
// the CI environment variable is set, which makes it fail; so does any
// error while the binaries are present.
func Start(t testing.TB) string {
	t.Helper()
	return StartServer(t).DSN
}

// StartServer is Start, and returns the server for a test that stops and
// starts it again.
func StartServer(t testing.TB) *Server {
	t.Helper()
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		testsrv.Missing(t, "initdb under /usr/lib/postgresql", "postgresql")
	}
	bin := filepath.Dir(matches[len(matches)-1])
	dir, err := os.MkdirTemp("", "brownout-pg-")
	if err != nil {
		t.Fatalf("postgres: temp dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var prefix []string
	if os.Geteuid() == 0 { // initdb refuses to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("postgres: running as root and there is no postgres user to run initdb as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("postgres: chown %s: %v", dir, err)
		}
		prefix = []string{"runuser", "-u", "postgres", "--"}
	}
	command := func(args ...string) *exec.Cmd {
		all := append(append([]string(nil), prefix...), args...)
		return exec.Command(all[0], all[1:]...)
	}
	run := func(args ...string) {
		if out, err := command(args...).CombinedOutput(); err != nil {
			t.Fatalf("postgres: %v: %v\n%s", args, err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("postgres: pick a port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	data := filepath.Join(dir, "data")
	run(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	s := &Server{DSN: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), command: command,
		ctl:  []string{filepath.Join(bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log")},
		opts: fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off", port, dir)}
	s.Start(t)
	t.Cleanup(func() {
		command(filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "stop").Run()
	})
	return s
}
