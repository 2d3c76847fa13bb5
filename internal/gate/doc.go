// Package gate is the admission state machine behind package shed's
// middleware, and the policy package sim runs in virtual time: priority
// queues bounded in time, CoDel with adaptive LIFO, deadline drops and an
// adaptive concurrency limit (see LimitConfig for its model). It never
// blocks and never reads a clock; every method takes the time.
//
// It is internal so that its serialization contract stays between shed and
// sim: a Gate's methods must be serialized, except TryAdmit and Release,
// which are lock-free and safe to call concurrently with everything.
// shed.GateConfig and shed.LimitConfig are aliases of Config and
// LimitConfig.
package gate
