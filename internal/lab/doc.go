// Package lab is what package dimmer's lab acceptance and the lab
// command's exploration (brownout-lab explore) share about the brownout
// lab (sim.BrownoutLab): the θ* oracle, its table, and the measures of a
// controller's calm.
//
// The oracle (issue 16): for a constant load, the best fixed level θ* is
// the highest level on a 0.05 grid (Grid) whose in-time share, pooled over
// Seeds seeds from Seed0, is at least 99 % with p99 at most the lab's
// target — judged after the first Skip seconds of a Run-long run of the
// lab, with the same gate as every controller run. Sweep measures it at
// given loads, ThetaStar at one load by bisection; ReadTable and
// WriteTable are its CSV form (dimmer/testdata/oracle.csv).
//
// Calm (issue 16's second goal): DirectionChanges counts the reversals of
// the level of at least two quanta, Swing the widest range of any
// feature's level; Recorder keeps the levels (and, to trace a run, the
// snapshots and the controller's status) of a dimmer.Controller in the
// lab.
//
// Everything here is a function of its arguments; the runs of Sweep,
// ThetaStar and Each go on GOMAXPROCS goroutines and are over when they
// return.
package lab
