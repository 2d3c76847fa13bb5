package dimmer_test

import (
	"encoding/csv"
	"flag"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/brownout/brownout/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The oracle of issue 16: for a constant load, the best fixed level θ* is
// the highest level on a 0.05 grid whose in-time share, pooled over the
// oracle's seeds, is at least 99 % with p99 at most the target — judged
// after the first minute of a 300 s run of the brownout lab, with the same
// gate as every controller run. `go test ./dimmer -run Oracle
// -update-oracle` sweeps it again (about 2 minutes on 2 cores) and
// rewrites testdata/oracle.csv.
var updateOracle = flag.Bool("update-oracle", false, "sweep the fixed levels again and rewrite testdata/oracle.csv")

const (
	oracleRun   = 300 * time.Second
	oracleSkip  = 60 // seconds not counted
	oracleSeeds = 20
	oracleSeed0 = 1000 // seeds 1000…1019: not the acceptance tests' 1…10
	oracleGrid  = 0.05
)

// oracleLoads are the constant loads of the table: 0.9× to 1.5× the lab's
// capacity with every optional part on (100 req/s).
var oracleLoads = []float64{90, 100, 110, 120, 130, 140, 150}

// oracleRow is one load of the table: θ* and its pooled in-time share and
// optional share (fixed level θ* serves optional parts to about θ* of the
// answers). Found is false when no level reaches 99 % in time: the row then
// holds level 0, the best there is.
type oracleRow struct {
	Load, Theta, InTime, Optional float64
	P99                           time.Duration
	Found                         bool
}

// staticWindow runs the lab at a fixed level and summarizes it after the
// first minute.
func staticWindow(load, theta float64, seed uint32) sim.Window {
	cfg := sim.BrownoutLab(sim.Constant(load), sim.Static(theta))
	cfg.Seed = seed
	cfg.Duration = oracleRun
	return sim.Run(cfg).Between(oracleSkip, int(oracleRun/time.Second))
}

// pooled averages the windows of the oracle's seeds (each window weighs
// the same: every seed runs as long) and takes the worst p99.
func pooled(ws []sim.Window) (inTime, optional float64, p99 time.Duration) {
	for _, w := range ws {
		inTime += w.InTime / float64(len(ws))
		optional += w.Optional / float64(len(ws))
		p99 = max(p99, w.P99)
	}
	return inTime, optional, p99
}

func sweepOracle() []oracleRow {
	n := int(math.Round(1 / oracleGrid))
	type key struct{ l, th int }
	out := map[key][]sim.Window{}
	var mu sync.Mutex
	jobs := make(chan [3]int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range jobs {
				w := staticWindow(oracleLoads[j[0]], float64(j[1])*oracleGrid, uint32(oracleSeed0+j[2]))
				mu.Lock()
				out[key{j[0], j[1]}] = append(out[key{j[0], j[1]}], w)
				mu.Unlock()
			}
		})
	}
	for l := range oracleLoads {
		for th := 0; th <= n; th++ {
			for s := range oracleSeeds {
				jobs <- [3]int{l, th, s}
			}
		}
	}
	close(jobs)
	wg.Wait()
	var rows []oracleRow
	for l, load := range oracleLoads {
		row := oracleRow{Load: load}
		for th := 0; th <= n; th++ {
			in, opt, p99 := pooled(out[key{l, th}])
			if in >= 0.99 && p99 <= sim.BrownoutTarget {
				row = oracleRow{Load: load, Theta: float64(th) * oracleGrid, InTime: in, Optional: opt, P99: p99, Found: true}
			}
		}
		if !row.Found { // the best there is: every optional part off
			in, opt, p99 := pooled(out[key{l, 0}])
			row = oracleRow{Load: load, InTime: in, Optional: opt, P99: p99}
		}
		rows = append(rows, row)
	}
	return rows
}

func writeOracle(path string, rows []oracleRow) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"load", "theta", "in_time", "optional", "p99_ms", "found"})
	for _, r := range rows {
		w.Write([]string{strconv.FormatFloat(r.Load, 'f', -1, 64), strconv.FormatFloat(r.Theta, 'f', 2, 64),
			strconv.FormatFloat(r.InTime, 'f', 5, 64), strconv.FormatFloat(r.Optional, 'f', 4, 64),
			strconv.FormatInt(r.P99.Milliseconds(), 10), strconv.FormatBool(r.Found)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readOracle(t *testing.T) []oracleRow {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "oracle.csv"))
	require.NoError(t, err, "run go test ./dimmer -run Oracle -update-oracle to create")
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	var rows []oracleRow
	for _, r := range recs[1:] {
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			require.NoError(t, err)
			return v
		}
		rows = append(rows, oracleRow{Load: num(r[0]), Theta: num(r[1]), InTime: num(r[2]), Optional: num(r[3]),
			P99: time.Duration(num(r[4])) * time.Millisecond, Found: r[5] == "true"})
	}
	return rows
}

// TestLabOracle checks the θ* table against fresh runs: at each load, θ*
// itself meets 99 % in time over the oracle's seeds and θ* + 0.05 does
// not (the table is what the lab gives today, not a stale copy).
func TestLabOracle(t *testing.T) {
	if *updateOracle {
		rows := sweepOracle()
		require.NoError(t, writeOracle(filepath.Join("testdata", "oracle.csv"), rows))
		for _, r := range rows {
			t.Logf("load %v: θ* %.2f in time %.2f%% optional %.3f p99 %v (found %v)", r.Load, r.Theta, 100*r.InTime, r.Optional, r.P99, r.Found)
		}
	}
	if testing.Short() || raceEnabled {
		t.Skip("the oracle check runs 2 × 20 runs of 300 s per load; the race detector adds nothing to a single-goroutine lab")
	}
	rows := readOracle(t)
	require.Len(t, rows, len(oracleLoads))
	for _, r := range rows {
		check := func(theta float64) float64 {
			ws := make([]sim.Window, oracleSeeds)
			var wg sync.WaitGroup
			for s := range oracleSeeds {
				wg.Go(func() { ws[s] = staticWindow(r.Load, theta, uint32(oracleSeed0+s)) })
			}
			wg.Wait()
			in, _, _ := pooled(ws)
			return in
		}
		if r.Found {
			assert.InDelta(t, r.InTime, check(r.Theta), 1e-4, "load %v: θ* %.2f reproduces", r.Load, r.Theta)
			assert.GreaterOrEqual(t, r.InTime, 0.99, "load %v", r.Load)
		}
		if next := r.Theta + oracleGrid; next <= 1 {
			assert.Less(t, check(next), 0.99, "load %v: one grid step above θ* misses 99 %%", r.Load)
		}
	}
}
