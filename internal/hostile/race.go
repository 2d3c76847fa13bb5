//go:build race

package hostile

// Race is true when the race detector is on: its allocations blur heap
// figures, so the floods' heap bounds are not asserted.
const Race = true
