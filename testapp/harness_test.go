package testapp

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/load"
)

// TestRealHTTPOrdering is the short real-HTTP harness: the app in its own
// process on 127.0.0.1, open-loop load at 2× the all-off capacity, and the
// stacks compared by orderings only (no timing thresholds): brownout
// serves more than shedding alone, which serves more than nothing; and
// brownout serves critical requests at least as well as shedding alone.
// It runs outside the race detector (make test runs it on its own).
func TestRealHTTPOrdering(t *testing.T) {
	if race.Enabled {
		t.Skip("timing-sensitive: make test runs it without -race")
	}
	cfg := Default()
	on, off := cfg.Capacity()
	phases := []load.Phase{{Name: "warm", Rate: 0.75 * on, Duration: 3 * time.Second},
		{Name: "spike", Rate: 2 * off, Duration: 8 * time.Second}}
	run := func(stack Stack) load.PhaseReport {
		for attempt := range 2 {
			res, err := RunHarness(context.Background(), HarnessConfig{App: cfg, Stack: stack, Phases: phases, Skip: 3 * time.Second, Seed: 1,
				Command: func(ctx context.Context, args []string) *exec.Cmd {
					cmd := exec.CommandContext(ctx, os.Args[0], args...)
					cmd.Env = append(os.Environ(), serveEnv+"=1")
					cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
					return cmd
				}})
			require.NoError(t, err)
			spike := res.Report.Phases[1]
			t.Logf("%-8s goodput %4.0f/s critical %5.1f%% p99 %v refused %v timeouts %.0f/s (sent %.0f of %.0f/s; cpu app %v, load %v)",
				stack, spike.Goodput, 100*spike.CriticalOK, spike.P99, spike.Refused, spike.Timeouts, spike.Sent, spike.Offered, res.AppCPU, res.LoadCPU)
			if spike.Valid {
				return spike
			}
			t.Logf("%s: the generator sent %.0f of %.0f/s: attempt %d does not count", stack, spike.Sent, spike.Offered, attempt+1)
		}
		t.Fatalf("%s: the load generator could not keep the offered rate (machine too busy)", stack)
		return load.PhaseReport{}
	}
	none, shedOnly, brown := run(Unprotected), run(ShedOnly), run(Brownout)
	assert.Greater(t, brown.Goodput, shedOnly.Goodput, "brownout serves more than shedding alone")
	assert.Greater(t, shedOnly.Goodput, none.Goodput, "shedding alone serves more than no protection")
	assert.GreaterOrEqual(t, brown.CriticalOK, shedOnly.CriticalOK, "critical: brownout at least as good as shedding alone")
}
