// Package e2e holds the fleet's end-to-end tests, on 127.0.0.1, every
// server started and stopped by the test.
//
// TestFleetScene is the fleet in one scene: two brownoutd replicas on a
// real PostgreSQL serving two services — the shop (two shop-demo
// instances, --service shop, their signals scraped by a real Prometheus
// and queried by the replicas) and the search (an app in the test's
// process, the root package with Options.Daemons and Service) — the
// shops overloaded, the shop's leader SIGKILLed, PostgreSQL restarted;
// it asserts the levels (the shop dims, continues from the last
// published state, never full brightness nor the defaults), the events
// (the leader's change on the stream and in the events), the operator's
// override (across the kill and the restart; writes 503 while the store
// is down, reads 200) and that the search never moved.
//
// TestFleet: two shop-demo instances on one brownoutd in promql mode over
// a real Prometheus, their rate limits in a real redis-server, a second
// brownoutd in scrape mode beside it. TestFleetAppAcrossFailover: an app
// on two replicas across the loss of the leader (SIGKILL, then SIGSTOP
// past the lease) and PostgreSQL's restart, timed at the app.
// TestFailoverTimes measures failovers (set BROWNOUT_FAILOVER_KILLS).
// BenchmarkReplicasOFREP measures OFREP evaluations across two replicas
// (and one) from a load in a child process, and the database's
// transactions meanwhile.
package e2e
