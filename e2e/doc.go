// Package e2e holds the fleet's end-to-end tests, on 127.0.0.1, every
// server started and stopped by the test: real binaries (brownoutd, two
// shop-demo instances), a real Prometheus and a real redis-server; and
// brownoutd's replicas on a real PostgreSQL, with an app on them (the
// root package with every replica's URL) across the loss of the leader.
// BenchmarkReplicasOFREP measures OFREP evaluations across two replicas
// (and one) from a load in a child process, and the database's
// transactions meanwhile.
package e2e
