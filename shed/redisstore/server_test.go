package redisstore

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/brownout/brownout/internal/testsrv"
)

// server is a throwaway redis-server (internal/testsrv).
type server struct {
	*testsrv.Redis
	tb   testing.TB
	addr string
}

// startRedis starts a redis-server on a free port, stopped when the test
// ends; skipped where the binary is missing (failed in CI).
func startRedis(tb testing.TB) *server {
	tb.Helper()
	r := testsrv.StartRedis(tb)
	return &server{Redis: r, tb: tb, addr: r.Addr}
}

func (s *server) start() { s.Start() }
func (s *server) kill()  { s.Kill() }

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
