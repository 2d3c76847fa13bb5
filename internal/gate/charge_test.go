package gate

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/signals"
)

// pool replays the gate, with its defaults, in front of W workers: the
// app queues in order what its workers cannot take yet (the gate's limit
// may admit more than there are workers), and a request's service time is
// exponential with mean its work × unit. The gate is charged what the
// caller says a request costs — its work, when the charge is right.
type pool struct {
	g       *Gate
	now     time.Time
	rng     *rand.Rand
	workers int
	unit    time.Duration
	inside  []job // admitted, waiting for a worker
	busy    ends
	refused int
	last    time.Time // the last refusal
	work    float64   // what an arriving request takes, in full requests
	charge  float64   // what it is charged
}

type job struct {
	t    *Ticket
	work float64
}

type end struct {
	at time.Time
	t  *Ticket
}

type ends []end

func (e ends) Len() int           { return len(e) }
func (e ends) Less(i, j int) bool { return e[i].at.Before(e[j].at) }
func (e ends) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *ends) Push(x any)        { *e = append(*e, x.(end)) }
func (e *ends) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

func newPool(workers int, seed uint64) *pool {
	return &pool{g: New(Config{}), now: t0, rng: rand.New(rand.NewPCG(seed, 1)), workers: workers,
		unit: 10 * time.Millisecond, work: 1, charge: 1}
}

func (p *pool) admit(t *Ticket) { p.inside = append(p.inside, job{t, p.work}) }

// dispatch hands the waiting requests to free workers, in order.
func (p *pool) dispatch() {
	for len(p.busy) < p.workers && len(p.inside) > 0 {
		j := p.inside[0]
		p.inside = p.inside[1:]
		d := time.Duration(p.rng.ExpFloat64() * j.work * float64(p.unit))
		heap.Push(&p.busy, end{p.now.Add(d), j.t})
	}
}

func (p *pool) drop(*Ticket, signals.Reason) {
	p.refused, p.last = p.refused+1, p.now
}

// advance moves the replay on by 1 ms and ends the work due by then,
// handing the freed workers what waits.
func (p *pool) advance() {
	p.now = p.now.Add(time.Millisecond)
	for len(p.busy) > 0 && !p.busy[0].at.After(p.now) {
		e := heap.Pop(&p.busy).(end)
		p.g.Done(p.now, e.t)
		p.dispatch()
	}
}

// run offers rate requests a second for dur, in steps of 1 ms.
func (p *pool) run(rate float64, dur time.Duration) {
	for stop := p.now.Add(dur); p.now.Before(stop); {
		p.advance()
		for range poisson(p.rng, rate/1000) {
			t := &Ticket{Class: signals.Default, Cost: p.charge, Arrival: p.now}
			switch dec, _ := p.g.Arrive(p.now, t, p.drop); dec {
			case Admitted:
				p.admit(t)
			case Refused:
				p.drop(t, 0)
			}
		}
		for t := p.g.Next(p.now, p.drop); t != nil; t = p.g.Next(p.now, p.drop) {
			p.admit(t)
		}
		p.dispatch()
	}
}

func poisson(rng *rand.Rand, mean float64) int {
	n, l, q := 0, math.Exp(-mean), rng.Float64()
	for q > l {
		n++
		q *= rng.Float64()
	}
	return n
}

// TestGateCalmAfterASpike: a spike of three times what the workers carry
// with every feature off, served dimmed (a request a fraction of a full
// one, and charged so), then a calm at 65 % of what they carry with every
// feature on, served bright from a second after the spike. The spike's
// overload ends with it: the gate's refusals stop within a few seconds
// of the brightening. Over the demand's 5-s rates alone the class stayed
// over capacity for about 9 s after the spike, and CoDel refused the
// calm's bursts until then.
func TestGateCalmAfterASpike(t *testing.T) {
	if race.Enabled {
		t.Skip("a single-threaded replay: make test runs it without -race")
	}
	for _, tc := range []struct {
		workers int
		dim     float64 // a dimmed request's work, in full requests
	}{{2, 1 / 1.6}, {2, 1 / 3.0}, {8, 1 / 3.0}, {4, 0.1}} {
		refused, latest := 0, time.Duration(0)
		for seed := range uint64(5) {
			p := newPool(tc.workers, seed)
			on := float64(tc.workers) / p.unit.Seconds()
			p.run(0.65*on, 20*time.Second)
			p.work, p.charge = tc.dim, tc.dim
			p.run(3*on/tc.dim, 20*time.Second)
			p.run(0.65*on, time.Second) // the first second: still dim
			p.refused, p.last = 0, time.Time{}
			p.work, p.charge = 1, 1
			bright := p.now
			p.run(0.65*on, 20*time.Second)
			refused += p.refused
			if p.refused > 0 {
				latest = max(latest, p.last.Sub(bright))
			}
		}
		t.Logf("%d workers, a dim request %.2f of a full one: %d refused in the calms after the spike (five seeds), the last %v after the brightening", tc.workers, tc.dim, refused, latest)
		assert.LessOrEqual(t, latest, 2*time.Second, "%d workers, dim %.2f", tc.workers, tc.dim)
	}
}

// TestGateChargeRevisedDown: at 65 % of what the workers carry, the charge
// falls from 1 to 0.3 with no change in the work (a cost estimate revised
// down). The gate keeps admitting what it admitted.
func TestGateChargeRevisedDown(t *testing.T) {
	for _, workers := range []int{2, 8} {
		refused := 0
		for seed := range uint64(5) {
			p := newPool(workers, seed)
			on := float64(workers) / p.unit.Seconds()
			p.run(0.65*on, 20*time.Second)
			p.refused = 0
			p.charge = 0.3
			p.run(0.65*on, 20*time.Second)
			refused += p.refused
		}
		t.Logf("%d workers: %d refused after the charge fell (five seeds)", workers, refused)
		assert.LessOrEqual(t, refused, 10, "%d workers", workers)
	}
}
