package redisstore_test

import (
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/shed/redisstore"
)

// Every instance of a fleet points its Shedder's rate limit at the same
// Redis: a client gets 10 requests at once and 2 a second in all, however
// the load balancer spreads them. Should Redis fail or be slower than
// 10 ms, each instance decides alone until it is back.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
	store, err := redisstore.New(rdb, redisstore.Config{Prefix: "shop:ratelimit:"})
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(store) // brownout_ratelimit_store_decisions_total{by="redis"|"local"}, …
	s, err := shed.New(shed.Config{RateLimit: &shed.RateLimitConfig{Rate: 2, Burst: 10, Store: store}})
	if err != nil {
		log.Fatal(err)
	}
	app := http.NotFoundHandler()
	_ = http.ListenAndServe(":8080", s.Middleware(app))
}
