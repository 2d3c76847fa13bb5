package lab

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/brownout/brownout/sim"
)

const (
	// Run is the length of each of the oracle's runs.
	Run = 300 * time.Second
	// Skip is the seconds at the start of a run that are not judged: the
	// gate's adaptive limit and the controller's first fall settle.
	Skip = 60
	// Seeds is how many seeds a level is pooled over, from Seed0: seeds
	// 1000…1019, not the acceptance tests' 1…10.
	Seeds = 20
	Seed0 = 1000
	// Grid is the step of the fixed levels tried.
	Grid = 0.05
)

// Loads returns the constant loads of the table: 0.9× to 1.5× the lab's
// capacity with every optional part on (100 req/s).
func Loads() []float64 { return []float64{90, 100, 110, 120, 130, 140, 150} }

// Row is one load of the table: θ* and its pooled in-time share and
// optional share (fixed level θ* serves optional parts to about θ* of the
// answers). Found is false when no level reaches 99 % in time: the row
// then holds level 0, the best there is.
type Row struct {
	Load, Theta, InTime, Optional float64
	P99                           time.Duration
	Found                         bool
}

// StaticWindow runs the lab at load with the fixed level theta for Run and
// summarizes it after the first Skip seconds.
func StaticWindow(load, theta float64, seed uint32) sim.Window {
	cfg := sim.BrownoutLab(sim.Constant(load), sim.Static(theta))
	cfg.Seed = seed
	cfg.Duration = Run
	return sim.Run(cfg).Between(Skip, int(Run/time.Second))
}

// Pooled averages windows of runs of the same length (each weighs the
// same) and takes the worst p99.
func Pooled(ws []sim.Window) (inTime, optional float64, p99 time.Duration) {
	for _, w := range ws {
		inTime += w.InTime / float64(len(ws))
		optional += w.Optional / float64(len(ws))
		p99 = max(p99, w.P99)
	}
	return inTime, optional, p99
}

// passes is the oracle's verdict on a level's pooled runs.
func passes(inTime float64, p99 time.Duration) bool {
	return inTime >= 0.99 && p99 <= sim.BrownoutTarget
}

// levels is how many steps of Grid make 1.
func levels() int { return int(math.Round(1 / Grid)) }

// Sweep measures θ* at each load: every level of the grid over the
// oracle's seeds (about 2.5 minutes for Loads on 2 cores).
func Sweep(loads []float64) []Row {
	n := levels()
	type key struct{ l, th int }
	out := map[key][]sim.Window{}
	var mu sync.Mutex
	per := (n + 1) * Seeds
	Each(len(loads)*per, func(i int) {
		l, th, s := i/per, (i%per)/Seeds, i%Seeds
		w := StaticWindow(loads[l], float64(th)*Grid, uint32(Seed0+s))
		mu.Lock()
		out[key{l, th}] = append(out[key{l, th}], w)
		mu.Unlock()
	})
	var rows []Row
	for l, load := range loads {
		row := Row{Load: load}
		for th := 0; th <= n; th++ {
			in, opt, p99 := Pooled(out[key{l, th}])
			if passes(in, p99) {
				row = Row{Load: load, Theta: float64(th) * Grid, InTime: in, Optional: opt, P99: p99, Found: true}
			}
		}
		if !row.Found { // the best there is: every optional part off
			in, opt, p99 := Pooled(out[key{l, 0}])
			row = Row{Load: load, InTime: in, Optional: opt, P99: p99}
		}
		rows = append(rows, row)
	}
	return rows
}

// ThetaStar finds θ* at one load by bisection over the grid (the in-time
// share falls as the level rises): a handful of levels over the oracle's
// seeds instead of Sweep's every level.
func ThetaStar(load float64) Row {
	eval := func(th int) Row {
		ws := make([]sim.Window, Seeds)
		Each(Seeds, func(s int) { ws[s] = StaticWindow(load, float64(th)*Grid, uint32(Seed0+s)) })
		in, opt, p99 := Pooled(ws)
		return Row{Load: load, Theta: float64(th) * Grid, InTime: in, Optional: opt, P99: p99, Found: passes(in, p99)}
	}
	n := levels()
	if r := eval(n); r.Found {
		return r
	}
	lo, hi := -1, n // lo passes (−1: none), hi fails
	var best Row
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if r := eval(mid); r.Found {
			lo, best = mid, r
		} else {
			hi = mid
		}
	}
	if lo < 0 {
		return eval(0)
	}
	return best
}

// Each runs f(0), …, f(n−1) on GOMAXPROCS goroutines and returns when all
// have.
func Each(n int, f func(i int)) {
	var wg sync.WaitGroup
	ch := make(chan int)
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for i := range ch {
				f(i)
			}
		})
	}
	for i := range n {
		ch <- i
	}
	close(ch)
	wg.Wait()
}

var header = []string{"load", "theta", "in_time", "optional", "p99_ms", "found"}

// WriteTable writes rows as CSV, with a header line.
func WriteTable(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	cw.Write(header)
	for _, r := range rows {
		cw.Write([]string{strconv.FormatFloat(r.Load, 'f', -1, 64), strconv.FormatFloat(r.Theta, 'f', 2, 64),
			strconv.FormatFloat(r.InTime, 'f', 5, 64), strconv.FormatFloat(r.Optional, 'f', 4, 64),
			strconv.FormatInt(r.P99.Milliseconds(), 10), strconv.FormatBool(r.Found)})
	}
	cw.Flush()
	return cw.Error()
}

// ReadTable reads what WriteTable wrote.
func ReadTable(r io.Reader) ([]Row, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("lab: oracle table: %w", err)
	}
	if len(recs) == 0 || len(recs[0]) != len(header) || recs[0][0] != header[0] {
		return nil, fmt.Errorf("lab: oracle table: want the header %v", header)
	}
	var rows []Row
	for i, rec := range recs[1:] {
		var v [5]float64
		for j := range v {
			if v[j], err = strconv.ParseFloat(rec[j], 64); err != nil {
				return nil, fmt.Errorf("lab: oracle table, line %d: %s: %w", i+2, header[j], err)
			}
		}
		rows = append(rows, Row{Load: v[0], Theta: v[1], InTime: v[2], Optional: v[3],
			P99: time.Duration(v[4]) * time.Millisecond, Found: rec[5] == "true"})
	}
	return rows, nil
}
