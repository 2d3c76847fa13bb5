// Package race tells tests whether the race detector is on, so that they
// skip or relax what it slows or blurs: the lab's single-threaded runs in
// virtual time, timing-sensitive tests on real HTTP, heap figures (its
// allocations). make test runs those without it.
package race
