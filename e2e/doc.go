// Package e2e holds the fleet's end-to-end test: real binaries (brownoutd,
// two shop-demo instances), a real Prometheus and a real redis-server, all
// on 127.0.0.1, started and stopped by the test.
package e2e
