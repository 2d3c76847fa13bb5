package e2e

import (
	"os"
	"testing"
)

// TestMain runs the tests, or, with loadChildEnv set, makes the test
// binary the load generator of BenchmarkReplicasOFREP (a process of its
// own, as the apps that evaluate flags are).
func TestMain(m *testing.M) {
	if spec := os.Getenv(loadChildEnv); spec != "" {
		os.Exit(loadChild(spec, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
