package signals

import (
	"runtime"
	"sync/atomic"
)

// Counters written by every request must not bounce one cache line between
// cores, so hot histograms keep several copies of their counters (shards)
// and readers add the shards up. The writer only needs a hint that spreads
// concurrent writers over the shards: the atomic add is correct on any
// shard, so the hint buys cache affinity, never correctness.
//
// shardHint returns that hint, a non-negative int that callers mask to
// their shard count. It comes in two builds:
//
//   - default (shard_stack.go): a hash of the address of a variable on the
//     writer's stack. Goroutines have disjoint stacks, so each goroutine
//     sticks to one shard and concurrent goroutines spread over them, four
//     shards per processor so that two busy goroutines rarely share one.
//     It needs no runtime internals and cannot break on a Go upgrade. Its
//     cost: goroutines on different processors may share a shard, and one
//     processor's goroutines write to several, so some writes move a cache
//     line between cores.
//   - -tags brownout_procpin (shard_procpin.go): the id of the P (the
//     scheduler's processor) the writer runs on, read through
//     runtime.procPin by go:linkname; one shard per processor. Writers on
//     one P share a shard and no two Ps do (up to maxShards). runtime.procPin
//     is an internal function that Go still lets third-party packages link
//     to only because widely used ones already did (go.dev/issue/67401);
//     nothing promises it will stay. (sync.Pool does not use it: the
//     runtime pushes a separate symbol, sync.runtime_procPin, to sync
//     alone.)
//
// The README's signals section gives the figures of both builds; they
// differ by a few nanoseconds a write, against microseconds a request.

// maxShards bounds the reader's work (it adds every shard) and the memory of
// a histogram (8 KiB per shard).
const maxShards = 8

// shardCount returns the number of shards for this process:
// shardsPerProc × GOMAXPROCS rounded up to a power of two, at most
// maxShards.
func shardCount() int {
	n := 1
	for n < shardsPerProc*runtime.GOMAXPROCS(0) && n < maxShards {
		n <<= 1
	}
	return n
}

// Counter is a sharded monotonic counter: Add is one atomic add on the
// cache line of the writer's shard (see shardHint), Load adds the shards.
// Use it for counts taken on every request.
//
// A Counter must be made with NewCounter. It is safe for concurrent use.
type Counter struct {
	shards []paddedUint64
	mask   int
}

type paddedUint64 struct {
	n atomic.Uint64
	_ [56]byte
}

// shardsFor returns the shards for a configured count n: shardCount's
// when n ≤ 0, else n rounded up to a power of two, at most maxShards.
func shardsFor(n int) int {
	if n <= 0 {
		return shardCount()
	}
	s := 1
	for s < n && s < maxShards {
		s <<= 1
	}
	return s
}

// NewCounter returns a zero counter.
func NewCounter() *Counter {
	n := shardCount()
	return &Counter{shards: make([]paddedUint64, n), mask: n - 1}
}

// Add adds n.
func (c *Counter) Add(n uint64) { c.shards[shardHint()&c.mask].n.Add(n) }

// Inc adds one.
func (c *Counter) Inc() { c.Add(1) }

// Load returns the count.
func (c *Counter) Load() uint64 {
	var n uint64
	for i := range c.shards {
		n += c.shards[i].n.Load()
	}
	return n
}
