package gate

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/signals"
)

// demand is the gate's model of who overloads the server: the cost each
// class brings per second (Λc), and the cost the server completes per
// second while it is saturated (X, its throughput). Class c is over
// capacity when the classes that come before it in the queues' order —
// itself and those above — bring more than the server completes:
//
//	Λ≤c = Σ_{k ≤ c} Λk  >  (1 + overMargin) · X
//
// (with the same sum over the last second, Λ'≤c, not under X) and stays
// so until Λ≤c or Λ'≤c falls under X (see demandDrop). Only such a
// class is cut short by CoDel: a standing queue of a class within
// capacity stands because of the classes below it (which the priority
// order already keeps out while it waits) or of chance, and refusing it
// at CoDel's target would turn away work the server can do in time — a
// priority inversion when the class is critical and lower classes are
// served between its bursts.
// A class within capacity waits its MaxWait, which the door's estimate
// and the sweep still enforce.
//
// The rates are exponentially weighted over demandWindow (Λ' over
// demandDrop). Arrivals and completions are counted lock-free (the fast
// path counts its arrivals too) and folded in at most every foldEvery
// under the gate's serialization. X moves only over time in which the
// server was saturated — an arrival found no room or a request queued —
// since an unsaturated server completes what arrives, not what it can;
// before its first saturated moment X is unknown and no class is over
// capacity.
type demand struct {
	// Lock-free.
	arrived [signals.NumClasses]atomic.Int64 // micro-units since the last fold
	done    atomic.Int64                     // micro-units completed since the last fold
	began   atomic.Int64                     // unix ns of the first arrival: when counting began

	// Serialized.
	queued  bool // a request waited at the last fold
	emptied bool // the queues emptied since the last fold
	last    time.Time
	rate    [signals.NumClasses]timeMean // Λc, cost units per second
	recent  [signals.NumClasses]timeMean // Λ'c: the same over demandDrop
	tput    timeMean                     // X, cost units per second, over saturated time; 0: unknown
	served  timeMean                     // cost units per second completed, over all time
	over    [signals.NumClasses]bool
}

const (
	// demandWindow is the time constant of both rates: long enough that a
	// class of 100 requests a second is known within about ±5 % (500
	// arrivals), short enough that a load that triples crosses the
	// margin within about a second.
	demandWindow = 5 * time.Second
	// overMargin: a class is over capacity only when its demand is
	// clearly over the throughput — twice the estimates' noise at 100
	// requests a second — so that a class running at 95 % of capacity is
	// never cut by chance.
	overMargin = 0.1
	// demandDrop is the time constant of the rates that end an overload.
	// Over demandWindow alone a class stayed over capacity for 9 s after
	// a spike of three times the throughput fell to 65 % of it (the mean
	// decays by e every 5 s: from 3 to 1 takes ln(2.35/0.35) ≈ 1.9 time
	// constants), and CoDel refused the calm's bursts meanwhile — 10–20
	// requests on real HTTP, up to 9 s after the spike. Over a second the
	// end of a spike shows within two. The price is noise: at 100
	// requests a second the rate over a second is known to about ±7 %, so
	// a load 1.2 times the throughput reads under it (2.6 standard
	// deviations) in about one fold in two hundred; at 20 a second, ±16 %.
	// A false end only lets the queue wait its MaxWait, as a class within
	// capacity does. A class enters the overload on the 5-s rate over the
	// margin, with the last second's merely not under the throughput — it
	// may not enter on what would end it at once, and asking the noisier
	// rate for the margin too kept a class at 1.15 times the throughput,
	// at 23 requests a second, out of the overload after every moment its
	// queue emptied (a fresh-context review: 5 % more default work let in
	// beside critical work over capacity).
	demandDrop = time.Second
	// foldEvery is how often the counts are folded into the rates.
	foldEvery = 50 * time.Millisecond
)

// arrive counts an arriving request's cost; safe for concurrent use.
func (d *demand) arrive(c signals.Class, cost int64, now time.Time) {
	if d.began.Load() == 0 {
		d.began.CompareAndSwap(0, now.UnixNano())
	}
	d.arrived[c].Add(cost)
}

// fold brings the rates up to now; queued says whether a request waits
// now. Callers serialize it.
func (d *demand) fold(now time.Time, queued bool) {
	if d.last.IsZero() {
		// The first fold: the counts began at the first arrival — the
		// fast path counts without folding, and a server that never
		// queued has not folded since — so they are rates over the time
		// since then, a first period like any other (and not saturated).
		// Divided by one fold's 50 ms instead, 20 s of a calm read as 400
		// times its rate: X at 4 762 units a second where the server did
		// 200, and once the demand decayed faster than X the class read
		// as within capacity for 9 s of a spike. Dropped, the calm was
		// forgotten, and the 5-s rates read a spike's first second as if
		// it had lasted 5 s: critical work over capacity at once, before
		// the dimmer had had a tick to make it cheaper.
		b := d.began.Load()
		if b == 0 || now.UnixNano() <= b {
			d.last = now
			return
		}
		d.last = time.Unix(0, b)
	}
	dt := now.Sub(d.last)
	if dt < foldEvery {
		return
	}
	saturated := d.queued && queued && !d.emptied
	d.last, d.queued, d.emptied = now, queued, false
	sec := dt.Seconds()
	for c := range d.rate {
		obs := float64(d.arrived[c].Swap(0)) / 1e6 / sec
		d.rate[c].add(obs, sec, demandWindow)
		d.recent[c].add(obs, sec, demandDrop)
	}
	done := float64(d.done.Swap(0)) / 1e6 / sec
	d.served.add(done, sec, demandWindow)
	if saturated {
		d.tput.add(done, sec, demandWindow)
	}
	var cum, cumRecent float64
	tput := d.throughput()
	for c := range d.rate {
		cum += d.rate[c].v
		cumRecent += d.recent[c].v
		switch {
		case tput <= 0 || !queued:
			// Nothing waits: the server takes all that comes, and no
			// class is over capacity (a stale X must not shut a class
			// out for good once the others are refused).
			d.over[c] = false
		case cum > (1+overMargin)*tput && cumRecent > tput:
			d.over[c] = true
		case cum < tput || cumRecent < tput:
			d.over[c] = false
		}
	}
}

// throughput is X: over saturated time, and at least what the server
// completed on average over all time (a stale X measured under a lower
// limit is corrected by what the server does since); 0 when unknown.
func (d *demand) throughput() float64 {
	if d.tput.v <= 0 {
		return 0
	}
	return max(d.tput.v, d.served.v)
}

// timeMean is a rate averaged over time: the plain mean of what it has
// seen until that spans its window (a process that just started, or a
// first saturated stretch, is not averaged with the zeros before it),
// exponentially weighted over the window after.
type timeMean struct{ v, span float64 }

func (m *timeMean) add(obs, sec float64, over time.Duration) {
	window := over.Seconds()
	if m.span < window {
		m.v = (m.v*m.span + obs*sec) / (m.span + sec)
		m.span = min(m.span+sec, window)
		return
	}
	m.v += (1 - math.Exp(-sec/window)) * (obs - m.v)
}
