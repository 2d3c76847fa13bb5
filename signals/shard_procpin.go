//go:build brownout_procpin

package signals

import _ "unsafe" // for go:linkname

// shardsPerProc: one shard per P is enough when the shard is the P's.
const shardsPerProc = 1

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// shardHint returns the id of the P the caller runs on (see shard.go). It
// unpins at once: the id is only a hint.
func shardHint() int {
	id := procPin()
	procUnpin()
	return id
}
