package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A daemon's connections to the store: one pool and one LISTEN
// connection, shared by the replicas of every service it serves, so that
// a daemon of twenty services holds a handful of the database's
// connections rather than a pool and a listener per service (PostgreSQL
// admits 100 connections by default, and each is a process of the
// server's).

// Pool sizing, when the store's URL does not say (pool_max_conns wins):
// each service's loop holds at most one connection at a time, for one
// transaction a tick; the base is for the operators' writes and a
// follower's reads beside them; the cap keeps three replicas of a daemon
// of many services at 3×(16+1) = 51 connections, half of PostgreSQL's
// default max_connections. Past the cap, a loop waits for a connection:
// a tick's transaction takes milliseconds, so 16 connections carry
// thousands of service-ticks a second.
const (
	poolBase       = 3
	poolPerService = 1
	poolCap        = 16
)

// MinPool is the smallest pool that a service's trouble cannot empty: a
// write waiting on the store (its row locked, a slow commit) holds one
// connection and the service's loop another; a third is left for the
// other services' leaders to renew their leases on. A URL's
// pool_max_conns below it is taken, and brownoutd warns of it.
const MinPool = 3

// listenRetry is how long the listener waits before connecting again
// after its connection failed (the database restarting): a replica's
// loop reads the store every tick anyway, so a notification missed
// meanwhile costs at most a tick.
const listenRetry = time.Second

// appName names the daemon's sessions in pg_stat_activity, unless the
// URL names them (application_name).
const appName = "brownoutd"

// Conn is a daemon's connection to the store, shared by its replicas (one
// per service): see Connect. Close it after every replica on it closed.
type Conn struct {
	url    string
	pool   *pgxpool.Pool
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	subs map[string][]chan string // by service: each replica's wake

	log atomic.Pointer[slog.Logger] // the listener's; SetLogger
}

// SetLogger gives the listener a logger: a WARN when it loses the
// store's notifications (its connection failed or was ended), an INFO
// when it listens again. Default: discard.
func (c *Conn) SetLogger(log *slog.Logger) {
	if log != nil {
		c.log.Store(log)
	}
}

// Connect opens the store at raw (a postgres:// URL) for a daemon of
// services services: a pool sized for them (poolBase + poolPerService a
// service, at most poolCap, unless the URL says pool_max_conns) and one
// LISTEN connection whose notifications go to the replicas of their
// service. It checks that the database answers within timeout.
func Connect(ctx context.Context, raw string, services int, timeout time.Duration) (*Conn, error) {
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return nil, fmt.Errorf("cluster: store %s: want a postgres:// URL", Redact(raw))
	}
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("cluster: store %s: %v", Redact(raw), err)
	}
	if u, err := url.Parse(raw); err == nil && !u.Query().Has("pool_max_conns") {
		cfg.MaxConns = int32(min(poolBase+poolPerService*max(services, 1), poolCap))
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = appName
	}
	cfg.ConnConfig.ConnectTimeout = min(timeout, 2*time.Second)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: store %s: %v", Redact(raw), err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cluster: store %s cannot be reached: %v", Redact(raw), err)
	}
	lctx, stop := context.WithCancel(context.Background())
	c := &Conn{url: raw, pool: pool, cancel: stop, done: make(chan struct{}), subs: map[string][]chan string{}}
	c.log.Store(slog.New(slog.DiscardHandler))
	go c.listen(lctx, cfg.ConnConfig)
	return c, nil
}

// MaxConns is the pool's size.
func (c *Conn) MaxConns() int { return int(c.pool.Config().MaxConns) }

// Close stops the listener and closes the pool.
func (c *Conn) Close() {
	c.cancel()
	<-c.done
	c.pool.Close()
}

// subscribe registers wake for service's notifications; the returned
// func unregisters it.
func (c *Conn) subscribe(service string, wake chan string) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs[service] = append(c.subs[service], wake)
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.subs[service] = deleteChan(c.subs[service], wake)
		if len(c.subs[service]) == 0 {
			delete(c.subs, service)
		}
	}
}

func deleteChan(s []chan string, ch chan string) []chan string {
	for i, x := range s {
		if x == ch {
			return append(s[:i:i], s[i+1:]...)
		}
	}
	return s
}

// notify hands payload ("kind service") to its service's replicas,
// never blocking: a replica whose wake is full reads it all at its next
// tick.
func (c *Conn) notify(payload string) {
	kind, service, _ := strings.Cut(payload, " ")
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, wake := range c.subs[service] {
		select {
		case wake <- kind:
		default:
		}
	}
}

// listen follows the store's notifications on a connection of its own
// (a pooled one would go back to the pool and miss them), connecting
// again listenRetry after a failure, until ctx ends.
func (c *Conn) listen(ctx context.Context, cc *pgx.ConnConfig) {
	defer close(c.done)
	lost := false
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, cc.Copy())
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+channel)
			if err == nil && lost {
				lost = false
				c.log.Load().Info("brownoutd: cluster: listening to the store's notifications again")
			}
			for err == nil {
				var n *pgconn.Notification
				if n, err = conn.WaitForNotification(ctx); err == nil {
					c.notify(n.Payload)
				}
			}
			conn.Close(context.Background())
		}
		if ctx.Err() != nil {
			return
		}
		if !lost {
			lost = true
			c.log.Load().Warn("brownoutd: cluster: the store's notifications are lost; the replicas read the store every tick meanwhile (writes are applied, and a leader that stops replaced, a tick or a lease later); listening again", "err", err, "retry", listenRetry)
		}
		select {
		case <-ctx.Done():
		case <-time.After(listenRetry):
		}
	}
}
