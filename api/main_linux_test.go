//go:build linux

package api

import (
	"os"
	"testing"
)

// TestMain runs the tests, or, with fanoutChildEnv set, makes the test
// binary the followers of BenchmarkStreamFanoutProcess (a child process
// of the benchmark, so that ten thousand followers do not share the
// server's file descriptors or its scheduler).
func TestMain(m *testing.M) {
	if spec := os.Getenv(fanoutChildEnv); spec != "" {
		os.Exit(fanoutChild(spec, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
