//go:build brownout_procpin

// An assembly file, even empty, lets shard_procpin.go declare the
// go:linkname functions without bodies.
