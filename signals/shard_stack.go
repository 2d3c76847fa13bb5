//go:build !brownout_procpin

package signals

import "unsafe"

// shardsPerProc: a goroutine's shard is a hash, so give the hashes more
// shards than processors; with one per processor two busy goroutines on a
// 2-core machine would share a shard half the time.
const shardsPerProc = 4

// shardHint returns a hash of the address of a variable on the caller's
// stack (see shard.go).
func shardHint() int {
	var b byte
	return stackHash(uintptr(unsafe.Pointer(&b)))
}

// stackHash hashes a stack address to a non-negative int.
//
// Stacks start at 2 KiB and grow by doubling, so p>>11 numbers them in
// steps of 1, 2, 4… depending on their size. A multiplicative hash spreads
// some of those steps well and folds others onto one shard (with 2⁶⁴/φ, a
// step of 8 lands on the same shard of 8 more than half the time), so the
// number goes through murmur3's 64-bit finaliser, whose every output bit
// depends on every input bit: two stacks share a shard of n with a
// probability of about 1/n whatever their sizes.
func stackHash(p uintptr) int {
	k := uint64(p >> 11)
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return int(k >> 1)
}
