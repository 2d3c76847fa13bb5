package redisstore

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is a throwaway redis-server on 127.0.0.1, in memory only (no
// RDB, no AOF), with DEBUG allowed from localhost (for DEBUG SLEEP).
type server struct {
	tb   testing.TB
	bin  string
	dir  string
	addr string
	cmd  *exec.Cmd
}

// startRedis starts a redis-server on a free port and stops it when the
// test ends. It skips the test where the binary is missing, except in CI,
// where .ci/run installs it (Debian package redis-server).
func startRedis(tb testing.TB) *server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal("redis-server not found in CI: .ci/run must install Debian package redis-server")
		}
		tb.Skip("redis-server not found: apt-get install redis-server (as .ci/run does) to run this test")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &server{tb: tb, bin: bin, dir: tb.TempDir(), addr: l.Addr().String()}
	l.Close()
	s.start()
	tb.Cleanup(s.kill)
	return s
}

// start runs the server on its address (again, after kill: empty) and
// waits until it answers PING.
func (s *server) start() {
	s.tb.Helper()
	_, port, _ := net.SplitHostPort(s.addr)
	s.cmd = exec.Command(s.bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"), "--enable-debug-command", "local")
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.tb.Fatalf("redis-server on %s did not answer in 10 s: %v\n%s", s.addr, err, log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kill stops the server at once (SIGKILL: a crash, nothing flushed).
func (s *server) kill() {
	if s.cmd != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// client returns a go-redis client of the server, as the package wants
// it (ContextTimeoutEnabled), closed when the test ends.
func (s *server) client() *redis.Client {
	return newClient(s.tb, s.addr)
}

func newClient(tb testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	tb.Cleanup(func() { c.Close() })
	return c
}
