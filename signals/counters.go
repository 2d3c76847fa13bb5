package signals

import (
	"sync/atomic"
)

// Counters counts what happened to requests, by class: arrivals,
// completions, failures (5xx or error), good completions (within deadline
// and not failed) and rejections by reason, plus the number in flight.
//
// Counts are cumulative, like Prometheus counters; a Recorder turns them
// into per-window rates by keeping a copy at each slot boundary. Each
// processor has its own shard of counters (see shard.go) so that the request
// path does not bounce cache lines between cores; readers add the shards.
//
// A Counters must be made with NewCounters. It is safe for concurrent use.
type Counters struct {
	shards []*counterShard
	mask   int
}

// counterShard is padded to whole cache lines so shards never share one.
type counterShard struct {
	inFlight atomic.Int64
	classes  [NumClasses]classCounters
	_        [64 - (8+NumClasses*(5+NumReasons)*8)%64]byte
}

type classCounters struct {
	arrived, completed, failed, good, waited atomic.Uint64
	rejected                                 [NumReasons]atomic.Uint64
}

// NewCounters returns zeroed counters.
func NewCounters() *Counters {
	c := &Counters{shards: make([]*counterShard, shardCount())}
	for i := range c.shards {
		c.shards[i] = new(counterShard)
	}
	c.mask = len(c.shards) - 1
	return c
}

func (c *Counters) shard() *counterShard { return c.shards[shardHint()&c.mask] }

// Arrive counts an arriving request of class cl. cl must be < NumClasses.
func (c *Counters) Arrive(cl Class) { c.shard().classes[cl%NumClasses].arrived.Add(1) }

// Wait counts a request of class cl that found no room at admission and
// waited in a queue before its work started.
func (c *Counters) Wait(cl Class) { c.shard().classes[cl%NumClasses].waited.Add(1) }

// Start counts a request whose work begins; Finish must follow.
func (c *Counters) Start() { c.shard().inFlight.Add(1) }

// Finish counts a request whose work ended. failed means a 5xx or an error;
// good means it did not fail and finished within its deadline.
func (c *Counters) Finish(cl Class, failed, good bool) {
	s := c.shard()
	s.inFlight.Add(-1)
	cc := &s.classes[cl%NumClasses]
	cc.completed.Add(1)
	if failed {
		cc.failed.Add(1)
	}
	if good {
		cc.good.Add(1)
	}
}

// Reject counts a request of class cl refused for reason r.
func (c *Counters) Reject(cl Class, r Reason) {
	c.shard().classes[cl%NumClasses].rejected[r%NumReasons].Add(1)
}

// InFlight returns the number of requests whose work has started and not
// finished.
func (c *Counters) InFlight() int64 {
	var n int64
	for _, s := range c.shards {
		n += s.inFlight.Load()
	}
	return n
}

// ClassCounts are the counts of one class.
type ClassCounts struct {
	Arrived, Completed, Failed, Good uint64
	// Waited counts requests that found no room at admission and queued
	// before they started.
	Waited   uint64
	Rejected [NumReasons]uint64
}

// NoRoom returns the requests that found no room at the admission gate:
// those that waited, and those the gate refused (overload refusals and
// clients that left while queued).
func (c ClassCounts) NoRoom() uint64 { return c.Waited + c.Overload() + c.Rejected[ReasonCanceled] }

// AtGate returns the arrivals that reached the admission gate: every
// arrival but those refused before it (rate limits, the cascade).
func (c ClassCounts) AtGate() uint64 {
	return c.Arrived - min(c.Arrived, c.Rejected[ReasonRateLimit]+c.Rejected[ReasonShedLevel])
}

// Overload returns the refusals that say the server is overloaded: max wait,
// CoDel, deadline and concurrency (not rate limits, not the brownout
// cascade's own shedding, not clients that left).
func (c ClassCounts) Overload() uint64 {
	return c.Rejected[ReasonMaxWait] + c.Rejected[ReasonCoDel] + c.Rejected[ReasonDeadline] + c.Rejected[ReasonConcurrency]
}

// RejectedTotal returns the rejections of every reason.
func (c ClassCounts) RejectedTotal() uint64 {
	var n uint64
	for _, r := range c.Rejected {
		n += r
	}
	return n
}

// Sub returns c − o, for cumulative counts: o is an earlier reading of
// the same counters, never more than c in any field (a caller that cannot
// be sure, as a fleet source reading another process, checks first).
func (c ClassCounts) Sub(o ClassCounts) ClassCounts {
	c.Arrived -= o.Arrived
	c.Completed -= o.Completed
	c.Failed -= o.Failed
	c.Good -= o.Good
	c.Waited -= o.Waited
	for i := range c.Rejected {
		c.Rejected[i] -= o.Rejected[i]
	}
	return c
}

// Merge adds o's counts into c.
func (c *ClassCounts) Merge(o ClassCounts) {
	c.Arrived += o.Arrived
	c.Completed += o.Completed
	c.Failed += o.Failed
	c.Good += o.Good
	c.Waited += o.Waited
	for i := range c.Rejected {
		c.Rejected[i] += o.Rejected[i]
	}
}

// Load returns the cumulative counts by class.
func (c *Counters) Load() [NumClasses]ClassCounts {
	var out [NumClasses]ClassCounts
	for _, s := range c.shards {
		for cl := range out {
			src, dst := &s.classes[cl], &out[cl]
			dst.Arrived += src.arrived.Load()
			dst.Completed += src.completed.Load()
			dst.Failed += src.failed.Load()
			dst.Good += src.good.Load()
			dst.Waited += src.waited.Load()
			for r := range dst.Rejected {
				dst.Rejected[r] += src.rejected[r].Load()
			}
		}
	}
	return out
}
