// Package testsrv starts the real servers that tests run against —
// redis-server and Prometheus on 127.0.0.1, free ports and temp dirs, and
// the headless chromium of the browser tests — stopped when the test
// ends, and holds what tests share about them: the Debian tools they need
// (Need, Missing), a free address, a Buffer for a server's output. A test
// skips where a tool is missing, except in CI (the CI environment
// variable set), where .ci/run installs them and a missing tool fails the
// test.
package testsrv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Need finds the first of bins on the PATH, or skips the test (fails it
// in CI, where .ci/run must have installed Debian package pkg).
func Need(tb testing.TB, pkg string, bins ...string) string {
	tb.Helper()
	for _, bin := range bins {
		if path, err := exec.LookPath(bin); err == nil {
			return path
		}
	}
	Missing(tb, strings.Join(bins, " or "), pkg)
	return ""
}

// Missing skips the test for the want of what (a binary, a file), or fails
// it in CI, where .ci/run must have installed Debian package pkg.
func Missing(tb testing.TB, what, pkg string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s not found in CI: .ci/run must install Debian package %s", what, pkg)
	}
	tb.Skipf("%s not found: apt-get install %s (as .ci/run does) to run this test", what, pkg)
}

// Buffer is an io.Writer for a server's log or output that a test reads
// while the server writes it; safe for concurrent use. The zero Buffer is
// empty and ready.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreeAddr returns a free 127.0.0.1 address, one that no earlier call in
// this process returned (see handedOut).
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	for range maxAddrTries {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		handedOut.Lock()
		again := handedOut.addrs[addr]
		handedOut.addrs[addr] = true
		handedOut.Unlock()
		if !again {
			return addr
		}
	}
	tb.Fatalf("testsrv: every free port of %d tries was handed out before", maxAddrTries)
	return ""
}

// handedOut is every address FreeAddr has returned in this process. The
// kernel may give a port just closed to the next listener on port 0: a
// test that chose two shops' addresses and then a daemon's was given one
// of the shops' again, the daemon took it first, and the shop's requests
// went to the daemon (404 page not found). FreeAddr returns an address
// once.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// maxAddrTries bounds FreeAddr's search: a port handed out before comes
// back rarely, and a hundred in a row means the range is used up.
const maxAddrTries = 100

// Redis is a throwaway redis-server: in memory only (no RDB, no AOF),
// with DEBUG allowed from localhost (for DEBUG SLEEP).
type Redis struct {
	tb   testing.TB
	bin  string
	dir  string
	Addr string
	cmd  *exec.Cmd
}

// StartRedis starts a redis-server on a free port.
func StartRedis(tb testing.TB) *Redis {
	tb.Helper()
	s := &Redis{tb: tb, bin: Need(tb, "redis-server", "redis-server"), dir: tb.TempDir(), Addr: FreeAddr(tb)}
	s.Start()
	tb.Cleanup(s.Kill)
	return s
}

// Start runs the server on its address (again, after Kill: empty) and
// waits until it answers PING.
func (s *Redis) Start() {
	s.tb.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	s.cmd = exec.Command(s.bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"), "--enable-debug-command", "local")
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
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
			s.tb.Fatalf("redis-server on %s did not answer in 10 s: %v\n%s", s.Addr, err, log)
		}
		time.Sleep(5 * time.Millisecond) // polling an external process
	}
}

// Kill stops the server at once (SIGKILL: a crash, nothing flushed).
func (s *Redis) Kill() {
	if s.cmd != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// StartPrometheus runs a Prometheus server that scrapes targets (host:port,
// /metrics) every second, and returns its base URL once it is ready.
func StartPrometheus(tb testing.TB, targets ...string) string {
	tb.Helper()
	bin := Need(tb, "prometheus", "prometheus")
	addr := FreeAddr(tb)
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: app
    static_configs:
      - targets: ['%s']
`, strings.Join(targets, "', '"))), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("prometheus at %s not ready after 30 s: %v", base, err)
		}
		time.Sleep(100 * time.Millisecond) // polling an external process
	}
}
