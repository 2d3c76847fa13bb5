package signals

import (
	"runtime"
	"sync/atomic"
	_ "unsafe" // for go:linkname
)

// Counters written by every request must not bounce one cache line between
// cores, so hot histograms keep one copy of their counters per processor
// shard and readers add the shards up. The shard is picked from the id of
// the P (the scheduler's processor) the writer runs on. The runtime keeps
// procPin linkname-able for exactly this kind of per-P sharding (sync.Pool
// uses it); the writer unpins at once because the atomic add is correct on
// any shard: the id only buys cache affinity.

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// maxShards bounds the reader's work (it adds every shard) and the memory of
// a histogram (8 KiB per shard).
const maxShards = 8

// shardCount returns the number of shards for this process: GOMAXPROCS
// rounded up to a power of two, at most maxShards.
func shardCount() int {
	n := 1
	for n < runtime.GOMAXPROCS(0) && n < maxShards {
		n <<= 1
	}
	return n
}

// shardHint returns a small number that is the same for consecutive calls
// on one processor.
func shardHint() int {
	id := procPin()
	procUnpin()
	return id
}

// Counter is a monotonic counter sharded per processor: Add is one atomic
// add on a cache line that the writer's processor owns, Load adds the
// shards. Use it for counts taken on every request.
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
