package store

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// idGen makes order ids: "o-" + the creation time in microseconds since
// 1970 (14 hex digits, enough until the year 4253) + "-" + 48 random bits
// (12 hex digits). Fixed width, so they sort as strings in creation order;
// within a process they strictly increase (the time part moves on by 1 µs
// when two ids would share one); across processes the random part keeps
// them apart (and the primary key would refuse a collision).
type idGen struct{ last atomic.Int64 }

func (g *idGen) next(now time.Time) string {
	t := now.UnixMicro()
	for {
		last := g.last.Load()
		next := max(t, last+1)
		if g.last.CompareAndSwap(last, next) {
			return fmt.Sprintf("o-%014x-%012x", next, rand.Uint64()>>16)
		}
	}
}
