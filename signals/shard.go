package signals

import (
	"runtime"
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
