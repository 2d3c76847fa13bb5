//go:build !brownout_procpin

package signals

import "unsafe"

// shardHint returns a hash of the address of a variable on the caller's
// stack (see shard.go).
func shardHint() int {
	var b byte
	p := uintptr(unsafe.Pointer(&b))
	return int((uint64(p>>11) * 0x9e3779b97f4a7c15) >> 58)
}
