package sim_test

import (
	"fmt"

	"github.com/brownout/brownout/sim"
)

// Two policies, the same users (same seed): an unbounded queue collapses
// at twice its capacity, a bounded one keeps serving.
func ExampleRun() {
	for _, p := range []struct {
		name string
		adm  sim.Admission
	}{{"unbounded queue", sim.Unbounded()}, {"fail fast at 50", sim.FailFast(50)}} {
		s := sim.Run(sim.Config{Seed: 1, Load: sim.Constant(200), Admission: p.adm}).Summary
		fmt.Printf("%-16s good/s %5.1f  critical ok %3.0f%%\n", p.name, s.GoodPerSec, 100*s.CriticalOK)
	}
	// Output:
	// unbounded queue  good/s   6.5  critical ok   4%
	// fail fast at 50  good/s  96.1  critical ok  48%
}
