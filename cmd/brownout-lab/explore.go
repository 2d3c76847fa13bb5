package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/cli"
	"github.com/brownout/brownout/internal/lab"
	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/sim"
)

const exploreUsage = `Usage:
  brownout-lab explore VIEW [flags]

Runs the brownout lab (sim.BrownoutLab: capacity 100 req/s with every
optional part on, p99 target 300 ms, package shed's gate) to look at the
controller's law from the side: traces, trajectories and tables, no
verdicts (package dimmer's Lab tests are the verdicts). θ* is the best
fixed level at a constant load (package internal/lab): read from --oracle,
or found by bisection for a load the table does not hold. Output goes to
stdout, progress (one line a second) to stderr.

Views (defaults in brackets):
  controller  per load, the controller against θ*: in time, optional share,
              changes of direction, swing [loads 90…150, 20 seeds from 1000, 300 s]
  trace       one run: the level, the signals and the controller's status
              at every change of level, every second with --all [load 120, seed 1001, 300 s]
  step        the same trace through the lab's step, 80 → 150 → 80 req/s, the
              overload held --hold [seed 1, 90 s, 30 s]
  traj        per seed, the level every 5 s [load 120, 20 seeds from 1000, 300 s]
  dip         per seed, the level every 10 s through a capacity dip to
              --dip-to of it from 120 s to 420 s; --dip-trace: a trace of
              the first seed from --dip-from [load 100, 20 seeds from 1000,
              600 s, 70 %]
  landing     per load and seed, the first four moves of the level and the
              median level after 2 minutes [loads 100…150, 20 seeds from 1000, 300 s]
  react       seconds from full brightness at 29 s to 0.5 after the step,
              as a histogram [100 seeds from 1, 90 s]
  turns       the step's calm over seeds, as TestLabStep counts it: runs
              whose level changes direction (two quanta) more than twice
              from the step on, twice or more during the overload, and
              more than once after the return, and when each first dims
              from full brightness after the return; an overload longer
              than a minute is also judged as a constant load is, past
              its first minute (more than two turns, or a swing over
              0.2); --hold is the overload's length, --duration the
              run's (90 s: 30 s after a 30-s overload) [100 seeds from
              1, 90 s]
  swings      the parts lab (a part per feature, sim.BrownoutPartsLab) under
              sines and squares around the capacity at level 0.5, ±40 and
              ±60 %, every 10, 30 and 60 s, at one worker and four: the
              controller against the reference (told the load a tick
              ahead, the costs and the capacity, at the set point a sweep
              finds best on the first seed), the same told the load a
              tick late, the same told the last interval's count of
              arrivals (what a controller can know, noise and all), and
              the per-second oracle's optional share, after the first
              minute [3 seeds from 1, 300 s]
  oracle      per load, in time and p99 at every fixed level of the 0.05
              grid [loads 90…150, 20 seeds from 1000, 300 s]
  static      per low load, in time, optional share and p99 at fixed levels
              0.8, 0.9 and 1 [loads 60…90, 20 seeds from 1000, 300 s]
  signals     per load and fixed level, each signal's mean ± standard
              deviation after the first minute [loads 90 100 120 150, 4 seeds from 1, 120 s]
  discrim     per load, each signal at θ* and its change at θ* + 0.1 in
              standard deviations [loads 90…140, 4 seeds from 1, 120 s]
  model       per load and seed, the level a capacity model estimates from
              each saturated second of the first 40: λ·c(θ) = u·T·c(b),
              c(b) = 1 − 0.4·(1 − b) [loads 90…150, 5 seeds from 1000, 120 s]

The controller's knobs (--rr, --low, --setpoint, --tick) change
sim.BrownoutConfig for the views that run the controller (dimmer's model
law); 0 keeps the lab's. --tick sets the lab's period too. --untallied
feeds it what brownoutd's scrape and PromQL sources give: no feature
tallies and no work (sim.Untallied).

Flags:
`

// exploreViews are the views, in the order of the usage.
var exploreViews = []string{"controller", "trace", "step", "traj", "dip", "landing", "react", "turns", "swings", "oracle", "static", "signals", "discrim", "model"}

// explorer is one run of "brownout-lab explore": a view and its options.
type explorer struct {
	ctx         context.Context
	out, errOut io.Writer
	view        string

	loads     []float64
	load      float64
	seed      uint32
	seed0     uint32
	seeds     int
	dur       time.Duration
	all       bool
	verbose   bool
	swingFrom int
	slices    int
	gate      string
	oracle    string
	u         float64
	dipTrace  bool
	dipFrom   int
	dipTo     float64
	hold      time.Duration
	tick      time.Duration
	quiet     bool
	byPhase   bool

	rr, low, setpoint float64
	untallied         bool
}

// viewDefaults are each view's loads, load, seed, first seed, seed count
// and run length, where the flags leave them.
type viewDefaults struct {
	loads        []float64
	load         float64
	seed, seed0  uint32
	seeds        int
	dur          time.Duration
	minDur       time.Duration // what the view reads of a run
	needsOracle  bool
	runsControll bool
}

func defaultsFor(view string) viewDefaults {
	d := viewDefaults{loads: lab.Loads(), load: 120, seed: 1001, seed0: 1000, seeds: 20, dur: 300 * time.Second, minDur: 91 * time.Second, runsControll: true}
	switch view {
	case "trace":
		d.minDur = 10 * time.Second
	case "controller":
		d.needsOracle = true
	case "step":
		d.seed, d.dur, d.minDur = 1, 90*time.Second, 10*time.Second
	case "dip":
		d.load, d.dur = 100, 600*time.Second
	case "landing":
		d.loads = []float64{100, 110, 120, 130, 140, 150}
	case "react":
		d.seed0, d.seeds, d.dur, d.minDur = 1, 100, 90*time.Second, 31*time.Second
	case "turns":
		d.seed0, d.seeds, d.dur, d.minDur = 1, 100, 90*time.Second, 31*time.Second
	case "swings":
		d.seed0, d.seeds = 1, 3
	case "oracle", "static":
		d.runsControll = false
		if view == "static" {
			d.loads = []float64{60, 70, 80, 90}
		}
	case "signals", "discrim":
		d.runsControll, d.seed0, d.seeds, d.dur = false, 1, 4, 120*time.Second
		d.loads = []float64{90, 100, 120, 150}
		if view == "discrim" {
			d.loads, d.needsOracle = []float64{90, 100, 110, 120, 130, 140}, true
		}
	case "model":
		d.seeds, d.dur, d.minDur = 5, 120*time.Second, 10*time.Second
	}
	return d
}

// runExplore is "brownout-lab explore".
func runExplore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("brownout-lab explore", flag.ContinueOnError)
	e := &explorer{ctx: ctx, out: stdout, errOut: stderr}
	loads := fs.String("loads", "", "constant loads of the per-load views, req/s, comma-separated (default: the view's)")
	fs.Float64Var(&e.load, "load", 0, "constant load of trace, traj and dip, req/s (default: the view's)")
	seed := fs.Uint("seed", 0, "seed of trace and step (default: the view's)")
	seed0 := fs.Uint("seed0", 0, "first seed of the views over many seeds (default: the view's)")
	fs.IntVar(&e.seeds, "seeds", 0, "how many seeds (default: the view's)")
	fs.DurationVar(&e.dur, "duration", 0, "length of each run (default: the view's)")
	fs.BoolVar(&e.all, "all", false, "trace and step: every second, not only the changes of level")
	fs.BoolVar(&e.verbose, "verbose", false, "controller: list the seeds that swing over 0.2 or turn more than twice; turns: the seeds that turn")
	fs.IntVar(&e.swingFrom, "swing-from", lab.Skip, "controller and traj: the second the swing is measured from")
	fs.IntVar(&e.slices, "slices", 0, "the latency window's one-second slices (default: the lab's 5)")
	fs.DurationVar(&e.tick, "tick", 0, "the controller's period, and the lab's (default: the lab's 1s)")
	fs.StringVar(&e.gate, "gate", "lab", "admission: lab (sim.BrownoutLab's gate) or default (shed.GateConfig{})")
	fs.StringVar(&e.oracle, "oracle", "dimmer/testdata/oracle.csv", "the θ* table (from the module's root); empty: θ* by bisection at every load")
	fs.Float64Var(&e.u, "u", 0.85, "model: the utilisation u of the capacity model")
	fs.BoolVar(&e.dipTrace, "dip-trace", false, "dip: trace the first seed from --dip-from instead")
	fs.IntVar(&e.dipFrom, "dip-from", 410, "dip: the second the trace starts at (70 s of it)")
	fs.Float64Var(&e.dipTo, "dip-to", 0.7, "dip: the share of its capacity the server keeps through the dip, in (0, 1]")
	fs.DurationVar(&e.hold, "hold", 30*time.Second, "step and turns: how long the step's overload lasts")
	fs.BoolVar(&e.quiet, "quiet", false, "no progress on stderr")
	fs.BoolVar(&e.byPhase, "by-phase", false, "swings: under each load, where in its period users were late and optional content served, the controller beside the reference")
	fs.Float64Var(&e.rr, "rr", 0, "the controller's reject.ratio target (the lab's: 0.01)")
	fs.Float64Var(&e.low, "low", 0, "the controller's Low")
	fs.Float64Var(&e.setpoint, "setpoint", 0, "the controller's Setpoint")
	fs.BoolVar(&e.untallied, "untallied", false, "the controller reads no feature tallies nor work, as from brownoutd's scrape or PromQL source (sim.Untallied)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), exploreUsage); fs.PrintDefaults() }

	if len(args) > 0 && cli.IsHelp(args[0]) {
		fs.SetOutput(stdout)
		fs.Usage()
		return flag.ErrHelp
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs.SetOutput(stderr)
		fs.Usage()
		return usagef("explore: want a view first: %s", strings.Join(exploreViews, ", "))
	}
	e.view = args[0]
	if !slices.Contains(exploreViews, e.view) {
		return usagef("explore: unknown view %q: want one of %s", e.view, strings.Join(exploreViews, ", "))
	}
	if err := cli.Parse(fs, args[1:], stdout, stderr); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageError{err.Error()}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	d := defaultsFor(e.view)
	e.loads = d.loads
	if set["loads"] {
		e.loads = nil
		for f := range strings.SplitSeq(*loads, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || v <= 0 || v > 1e5 {
				return usagef("explore: --loads %q: want positive rates, comma-separated", *loads)
			}
			e.loads = append(e.loads, v)
		}
	}
	if !set["load"] {
		e.load = d.load
	}
	e.seed, e.seed0 = d.seed, d.seed0
	if set["seed"] {
		e.seed = uint32(*seed)
	}
	if set["seed0"] {
		e.seed0 = uint32(*seed0)
	}
	if !set["seeds"] {
		e.seeds = d.seeds
	}
	if !set["duration"] {
		e.dur = d.dur
	}
	switch {
	case fs.NArg() > 0:
		return usagef("explore: unexpected arguments %q", fs.Args())
	case *seed > math.MaxUint32 || *seed0 > math.MaxUint32:
		return usagef("explore: a seed must fit in 32 bits")
	case e.load <= 0 || e.load > 1e5:
		return usagef("explore: --load %v: want a positive rate", e.load)
	case e.seeds < 1 || e.seeds > 10000:
		return usagef("explore: --seeds %d: want 1 to 10000", e.seeds)
	case e.dur < d.minDur || e.dur > 24*time.Hour:
		return usagef("explore: --duration %s: want %s to 24h for %s", e.dur, d.minDur, e.view)
	case e.swingFrom < 0 || (e.view == "controller" || e.view == "traj") && time.Duration(e.swingFrom)*time.Second >= e.dur:
		return usagef("explore: --swing-from %d: want a second within the run", e.swingFrom)
	case e.gate != "lab" && e.gate != "default":
		return usagef("explore: --gate %q: want lab or default", e.gate)
	case e.slices < 0 || e.slices > 600:
		return usagef("explore: --slices %d: want 1 to 600 (0: the lab's)", e.slices)
	case e.tick != 0 && (e.tick < 100*time.Millisecond || e.tick > 10*time.Second):
		return usagef("explore: --tick %s: want 100ms to 10s (0: the lab's)", e.tick)
	case !(e.dipTo > 0 && e.dipTo <= 1):
		return usagef("explore: --dip-to %v: want a share of the capacity in (0, 1]", e.dipTo)
	case e.dipFrom < 0:
		return usagef("explore: --dip-from %d: want a second of the run", e.dipFrom)
	case e.hold < time.Second || (e.view == "turns" || e.view == "step") && stepUp+e.hold >= e.dur:
		return usagef("explore: --hold %s: want at least 1s, the load's return within the run (--duration %s)", e.hold, e.dur)
	}
	if d.runsControll {
		if _, err := dimmer.New(e.config()); err != nil {
			return usagef("explore: the controller's configuration: %v", err)
		}
	}
	var table []lab.Row
	if d.needsOracle && e.oracle != "" {
		var err error
		if table, err = readTable(e.oracle); err != nil {
			return fmt.Errorf("explore: %w (run from the module's root, give --oracle, or --oracle '' to find θ* by bisection)", err)
		}
	}
	switch e.view {
	case "controller":
		return e.controller(table)
	case "trace":
		return e.trace(sim.Constant(e.load), e.seed)
	case "step":
		return e.trace(e.stepLoad(), e.seed)
	case "traj":
		return e.traj()
	case "dip":
		return e.dip()
	case "landing":
		return e.landing()
	case "react":
		return e.react()
	case "turns":
		return e.turns()
	case "swings":
		return e.swings()
	case "oracle":
		return e.oracleSweep()
	case "static":
		return e.static()
	case "signals":
		return e.signals()
	case "discrim":
		return e.discrim(table)
	}
	return e.modelEstimates()
}

func readTable(path string) ([]lab.Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return lab.ReadTable(f)
}

// config is the lab's controller with the knobs given.
func (e *explorer) config() dimmer.Config {
	cfg := sim.BrownoutConfig(sim.BrownoutTarget)
	if e.rr != 0 {
		cfg.Targets[1].Target = e.rr
	}
	if e.low != 0 {
		cfg.Low = e.low
	}
	if e.setpoint != 0 {
		cfg.Setpoint = e.setpoint
	}
	cfg.Tick = e.tick
	return cfg
}

// newRecorder is a fresh controller on config, recorded.
func (e *explorer) newRecorder(trace bool) *lab.Recorder {
	c, err := dimmer.New(e.config())
	if err != nil {
		panic(err) // checked before any run
	}
	return &lab.Recorder{C: c, Trace: trace}
}

// labConfig is one run of the lab with d, the gate and the window asked for.
func (e *explorer) labConfig(load sim.Profile, d sim.Dimmer, seed uint32, dur time.Duration) sim.Config {
	if e.untallied && d != nil {
		d = sim.Untallied(d)
	}
	cfg := sim.BrownoutLab(load, d)
	cfg.Seed, cfg.Duration, cfg.Tick = seed, dur, e.tick
	if e.slices > 0 {
		cfg.Signals.Latency.Slices = e.slices
	}
	if e.gate == "default" {
		cfg.Admission = sim.NewShed(shed.GateConfig{})
	}
	return cfg
}

// run runs the lab at load with d for dur.
func (e *explorer) run(load sim.Profile, d sim.Dimmer, seed uint32, dur time.Duration) sim.Result {
	return sim.Run(e.labConfig(load, d, seed, dur))
}

// judged is a run judged after the first minute.
type judged struct {
	w        sim.Window
	dirs     int
	swing    float64
	min, max float64
}

func (e *explorer) judge(res sim.Result, rec *lab.Recorder) judged {
	x := judged{w: res.Between(lab.Skip, int(e.dur/time.Second)), dirs: lab.DirectionChanges(res.Seconds[lab.Skip:]), min: 2, max: -1}
	for _, s := range res.Seconds[lab.Skip:] {
		x.min, x.max = min(x.min, s.Level), max(x.max, s.Level)
	}
	if rec != nil {
		x.swing = lab.Swing(rec.Levels[min(e.swingFrom, len(rec.Levels)):])
	}
	return x
}

// each runs f(0…n−1) in parallel, with a line of progress on stderr a
// second; it stops starting runs once the context is done.
func (e *explorer) each(n int, f func(i int)) error {
	var done atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if !e.quiet {
		wg.Go(func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					fmt.Fprintf(e.errOut, "explore %s: %d/%d runs\n", e.view, done.Load(), n)
				}
			}
		})
	}
	lab.Each(n, func(i int) {
		if e.ctx.Err() != nil {
			return
		}
		f(i)
		done.Add(1)
	})
	close(stop)
	wg.Wait()
	return e.ctx.Err()
}

// thetaStar is θ* and its in-time share at each of loads: from the table,
// 1 with everything in time under 90 req/s, else by bisection.
func (e *explorer) thetaStar(table []lab.Row, loads []float64) (map[float64]lab.Row, error) {
	star := map[float64]lab.Row{}
	for _, r := range table {
		star[r.Load] = r
	}
	var missing []float64
	for _, l := range loads {
		if _, ok := star[l]; ok {
			continue
		}
		if l < 90 {
			star[l] = lab.Row{Load: l, Theta: 1, InTime: 1, Optional: 1, Found: true}
			continue
		}
		missing = append(missing, l)
	}
	if len(missing) > 0 && !e.quiet {
		fmt.Fprintf(e.errOut, "explore %s: θ* by bisection at %v\n", e.view, missing)
	}
	for _, l := range missing {
		if e.ctx.Err() != nil {
			return nil, e.ctx.Err()
		}
		star[l] = lab.ThetaStar(l)
	}
	return star, nil
}

// controller: goal 1 (optional share against θ*'s, in time) and calm, per
// load.
func (e *explorer) controller(table []lab.Row) error {
	star, err := e.thetaStar(table, e.loads)
	if err != nil {
		return err
	}
	n := e.seeds
	out := make([]judged, len(e.loads)*n)
	bad := make([]string, len(out))
	err = e.each(len(out), func(i int) {
		l, s := i/n, i%n
		rec := e.newRecorder(true)
		seed := e.seed0 + uint32(s)
		res := e.run(sim.Constant(e.loads[l]), rec, seed, e.dur)
		x := e.judge(res, rec)
		out[i] = x
		if e.verbose && (x.dirs > 2 || x.swing > 0.2) {
			var lv []float64
			for _, sec := range res.Seconds[min(120, len(res.Seconds)-1):] {
				lv = append(lv, sec.Level)
			}
			slices.Sort(lv)
			bad[i] = fmt.Sprintf("bad: load %v seed %d dirs %d swing %.2f  b60 %.2f b90 %.2f med %.2f range %.2f–%.2f\n", e.loads[l], seed, x.dirs, x.swing,
				res.Seconds[60].Level, res.Seconds[90].Level, lv[len(lv)/2], x.min, x.max)
		}
	})
	if err != nil {
		return err
	}
	for _, b := range bad {
		fmt.Fprint(e.out, b)
	}
	for l, load := range e.loads {
		var it, op, maxSwing float64
		maxDirs, nd, ns := 0, 0, 0
		for _, x := range out[l*n : (l+1)*n] {
			it += x.w.InTime / float64(n)
			op += x.w.Optional / float64(n)
			maxDirs, maxSwing = max(maxDirs, x.dirs), max(maxSwing, x.swing)
			if x.dirs > 2 {
				nd++
			}
			if x.swing > 0.2 {
				ns++
			}
		}
		st := star[load]
		okOpt := op >= 0.9*st.Theta || (st.Theta < 0.2 && op >= st.Theta-0.02)
		okIT := it >= st.InTime-0.005
		fmt.Fprintf(e.out, "load %v: θ* %.2f in-time %.2f%% (θ* %.2f%%) %v optional %.3f %v dirs(max) %d (>2: %d) swing(max) %.2f (>0.2: %d)\n",
			load, st.Theta, 100*it, 100*st.InTime, okIT, op, okOpt, maxDirs, nd, maxSwing, ns)
	}
	return nil
}

// trace runs the controller once and prints its state and the signals at
// every second where the level changed (every second with --all, and
// always the first 13).
func (e *explorer) trace(load sim.Profile, seed uint32) error {
	rec := e.newRecorder(true)
	res := e.run(load, rec, seed, e.dur)
	for i, s := range res.Seconds {
		if i >= len(rec.Snapshots) {
			break
		}
		if !e.all && i > 12 && s.Level == res.Seconds[i-1].Level {
			continue
		}
		sn := rec.Snapshots[i]
		get := func(k signals.Key) float64 { v, _ := sn.Get(k); return v }
		st := rec.Status[i]
		fmt.Fprintf(e.out, "t=%d level=%.2f p99=%.0f rr=%.3f arr=%.0f tp=%.0f lim=%.1f busy=%.2f util=%.2f b=%.3f p=%.2f %s: %s\n", s.T, s.Level,
			get(signals.LatencyP99)*1000, get(signals.RejectRatio), get(signals.ArrivalRate), get(signals.Throughput),
			get(signals.GateLimit), get(signals.GateBusy), get(signals.GateUtilization), st.Brightness, st.Pressure, st.Action, st.Reason)
	}
	return e.ctx.Err()
}

// traj prints, per seed, the level every 5 s.
func (e *explorer) traj() error {
	lines := make([]string, e.seeds)
	err := e.each(e.seeds, func(i int) {
		seed := e.seed0 + uint32(i)
		rec := e.newRecorder(false)
		res := e.run(sim.Constant(e.load), rec, seed, e.dur)
		x := e.judge(res, rec)
		var b strings.Builder
		fmt.Fprintf(&b, "%d d%d s%.2f:", seed, x.dirs, x.swing)
		for t := 0; t < len(res.Seconds); t += 5 {
			fmt.Fprintf(&b, " %2.0f", 100*res.Seconds[t].Level)
		}
		lines[i] = b.String()
	})
	if err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Fprintln(e.out, l)
	}
	return nil
}

// dip prints, per seed, the level every 10 s from 100 s through a capacity
// dip; with --dip-trace, a trace of the first seed around its end.
func (e *explorer) dip() error {
	const from, length = 120 * time.Second, 300 * time.Second
	factor := e.dipTo
	runDip := func(seed uint32, trace bool) (sim.Result, *lab.Recorder) {
		rec := e.newRecorder(trace)
		cfg := e.labConfig(sim.Constant(e.load), rec, seed, e.dur)
		cfg.Server.Capacity = sim.Dip(from, length, factor)
		return sim.Run(cfg), rec
	}
	if e.dipTrace {
		res, rec := runDip(e.seed0, true)
		for i := e.dipFrom; i < e.dipFrom+70 && i < len(rec.Snapshots) && i < len(res.Seconds); i++ {
			p99, _ := rec.Snapshots[i].Get(signals.LatencyP99)
			rr, _ := rec.Snapshots[i].Get(signals.RejectRatio)
			st := rec.Status[i]
			fmt.Fprintf(e.out, "t=%d level=%.2f p99=%.0f rr=%.3f b=%.3f p=%.2f %s: %s\n", i, res.Seconds[i].Level, p99*1000, rr, st.Brightness, st.Pressure, st.Action, st.Reason)
		}
		return e.ctx.Err()
	}
	lines := make([]string, e.seeds)
	err := e.each(e.seeds, func(i int) {
		seed := e.seed0 + uint32(i)
		res, _ := runDip(seed, false)
		var b strings.Builder
		fmt.Fprintf(&b, "%d:", seed)
		for t := 100; t < len(res.Seconds); t += 10 {
			fmt.Fprintf(&b, " %2.0f", 100*res.Seconds[t].Level)
		}
		lines[i] = b.String()
	})
	if err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Fprintln(e.out, l)
	}
	return nil
}

// landing prints, per load and seed, the first four moves of the level
// with the pressure of latency (p, p99 over the target) and of refusals
// (r, over their 1 %) at each, and the median level after two minutes:
// where the law lands after the fall, against where it settles.
func (e *explorer) landing() error {
	n := e.seeds
	lines := make([]string, len(e.loads)*n)
	err := e.each(len(lines), func(i int) {
		load, seed := e.loads[i/n], e.seed0+uint32(i%n)
		rec := e.newRecorder(true)
		res := e.run(sim.Constant(load), rec, seed, e.dur)
		var lv []float64
		for _, sec := range res.Seconds[min(120, len(res.Seconds)-1):] {
			lv = append(lv, sec.Level)
		}
		slices.Sort(lv)
		var b strings.Builder
		fmt.Fprintf(&b, "%v %d med %.2f:", load, seed, lv[len(lv)/2])
		moves := 0
		for t := 1; t < len(res.Seconds) && t < len(rec.Snapshots) && moves < 4; t++ {
			if res.Seconds[t].Level == res.Seconds[t-1].Level {
				continue
			}
			p99, _ := rec.Snapshots[t].Get(signals.LatencyP99)
			rr, _ := rec.Snapshots[t].Get(signals.RejectRatio)
			fmt.Fprintf(&b, "  t%d %.2f→%.2f p%.1f r%.1f", t, res.Seconds[t-1].Level, res.Seconds[t].Level, p99/sim.BrownoutTarget.Seconds(), rr/0.01)
			moves++
		}
		lines[i] = b.String()
	})
	if err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Fprintln(e.out, l)
	}
	return nil
}

// react prints how many seconds after the step (at 30 s) the level first
// reaches 0.5, over the seeds at full brightness at 29 s.
func (e *explorer) react() error {
	took := make([]int, e.seeds) // −1: not at full at 29 s; −2: never
	err := e.each(e.seeds, func(i int) {
		res := e.run(sim.BrownoutStep(), e.newRecorder(false), e.seed0+uint32(i), e.dur)
		took[i] = -1
		if res.Seconds[29].Level < 0.99 {
			return
		}
		took[i] = -2
		for _, s := range res.Seconds[30:] {
			if s.Level <= 0.5 {
				took[i] = s.T - 30
				break
			}
		}
	})
	if err != nil {
		return err
	}
	hist := map[int]int{}
	full := 0
	for _, d := range took {
		if d == -1 {
			continue
		}
		full++
		if d >= 0 {
			hist[d]++
		}
	}
	fmt.Fprintf(e.out, "react (from full at t=29, %d seeds): %v\n", full, hist)
	return nil
}

// stepUp is when the lab's step (sim.BrownoutStep) rises to its overload.
const stepUp = 30 * time.Second

// stepLoad is the lab's step, 80 → 150 → 80 req/s, with its overload held
// e.hold (sim.BrownoutStep's at 30 s).
func (e *explorer) stepLoad() sim.Steps {
	return sim.Steps{At: []time.Duration{0, stepUp, stepUp + e.hold}, Rates: []float64{80, 150, 80}}
}

// A constant load is calm (the oracle's goal in package dimmer's tests)
// when, past its first calmAfter — the landing, which a constant load
// from the start forgives — its level turns at most twice and swings by
// at most calmSwing.
const (
	calmAfter = time.Minute
	calmSwing = 0.2
)

// calm reports whether the level over secs turns at most twice (two
// quanta, lab.DirectionChanges) and swings by at most calmSwing.
func calm(secs []sim.Second) bool {
	lo, hi := 2.0, -1.0
	for _, s := range secs {
		lo, hi = min(lo, s.Level), max(hi, s.Level)
	}
	return lab.DirectionChanges(secs) <= 2 && hi-lo <= calmSwing
}

// turns runs the lab's step, 80 → 150 → 80 req/s with the overload held
// e.hold, for e.seeds seeds, and prints how many runs change direction as
// TestLabStep counts it (lab.DirectionChanges, two quanta): more than
// twice from the step on, twice or more during the overload, more than
// once after the load's return (a dim from full brightness and back) —
// and, for the runs that dim from full brightness after the return, how
// many seconds after it. The step's 30 s after the return say little of
// the last: a law may hold full brightness at a knee for a while and dim
// after it. An overload longer than calmAfter is also judged as a
// constant load is (see calmAfter): past its first calmAfter, more than
// two turns or a swing over calmSwing.
func (e *explorer) turns() error {
	down := stepUp + e.hold
	load := e.stepLoad()
	up, back := int(stepUp/time.Second), int(down/time.Second)
	settled := up + int(calmAfter/time.Second)
	type counts struct {
		from, during, after, dimAt int
		unsettled                  bool // past calmAfter into the overload: more than two turns, or a swing over calmSwing
	}
	runs := make([]counts, e.seeds)
	err := e.each(e.seeds, func(i int) {
		res := e.run(load, e.newRecorder(false), e.seed0+uint32(i), e.dur)
		c := counts{
			from:   lab.DirectionChanges(res.Seconds[up:]),
			during: lab.DirectionChanges(res.Seconds[up : back+1]),
			after:  lab.DirectionChanges(res.Seconds[back:]),
			dimAt:  -1,
		}
		if settled < back {
			c.unsettled = !calm(res.Seconds[settled:back])
		}
		full := false
		for _, s := range res.Seconds[back:] {
			if s.Level >= 1 {
				full = true
			} else if full && s.Level <= 1-0.02 { // (two quanta, as lab.DirectionChanges counts them)
				c.dimAt = s.T - back
				break
			}
		}
		runs[i] = c
	})
	if err != nil {
		return err
	}
	var from, during, after, unsettled int
	var dims []int
	for i, c := range runs {
		unsettled += b2i(c.unsettled)
		if e.verbose && (c.from > 2 || c.during >= 2 || c.after > 1) {
			fmt.Fprintf(e.out, "seed %d: %d turns from the step on, %d during the overload, %d after the return\n", e.seed0+uint32(i), c.from, c.during, c.after)
		}
		from += b2i(c.from > 2)
		during += b2i(c.during >= 2)
		after += b2i(c.after > 1)
		if c.dimAt >= 0 {
			dims = append(dims, c.dimAt)
		}
	}
	slices.Sort(dims)
	fmt.Fprintf(e.out, "step 80 → 150 → 80 req/s, overload %s, %s after the return, %d seeds from %d: more than two turns from the step on %d; twice or more during the overload %d; more than once after the return %d; dimmed from full brightness after the return %d, seconds after it %v",
		e.hold, e.dur-down, e.seeds, e.seed0, from, during, after, len(dims), dims)
	if settled < back {
		fmt.Fprintf(e.out, "; past the overload's first %s, more than two turns or a swing over %.1f %d", calmAfter, calmSwing, unsettled)
	}
	fmt.Fprintln(e.out)
	return nil
}

// swingLevel is the level at whose capacity the swings' loads are
// centred: half of every part on, where a swing of ±50 % is absorbed by
// dimming alone (sim.BrownoutParts).
const swingLevel = 0.5

// swingRhos are the reference's set points a swing's sweep tries.
var swingRhos = []float64{0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95}

// swingCase is one load of the swings view.
type swingCase struct {
	workers int
	square  bool
	period  time.Duration
	amp     float64
}

// swings runs the parts lab under the moving loads the model law is
// judged on (sines and squares, ±40 and ±60 %, every 10, 30 and 60 s, one
// worker and four) and prints, per load, the controller's users in time
// and optional share against the reference's and the per-second oracle's
// (see sim.NewReference, sim.NewOracle), after the first minute.
func (e *explorer) swings() error {
	var cases []swingCase
	for _, w := range []int{1, 4} {
		for _, sq := range []bool{false, true} {
			for _, p := range []time.Duration{10 * time.Second, 30 * time.Second, 60 * time.Second} {
				for _, a := range []float64{0.4, 0.6} {
					cases = append(cases, swingCase{w, sq, p, a})
				}
			}
		}
	}
	// The loads of one worker count share the oracle's grid (centred on
	// the same mean), so they share its constant runs.
	tables := map[int]*sim.OracleTable{}
	for _, c := range cases {
		if tables[c.workers] == nil {
			tables[c.workers] = &sim.OracleTable{}
		}
	}
	lines := make([]string, len(cases))
	if err := e.each(len(cases), func(i int) { lines[i] = e.swing(cases[i], tables[cases[i].workers]) }); err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Fprintln(e.out, l)
	}
	return nil
}

// swing is one line of the swings view; table holds the oracle's grid
// loads measured for the same worker count.
func (e *explorer) swing(c swingCase, table *sim.OracleTable) string {
	build := func(load sim.Profile, d sim.Dimmer) sim.Config {
		if e.untallied && d != nil {
			d = sim.Untallied(d)
		}
		cfg := sim.BrownoutPartsLab(load, d, c.workers)
		cfg.Duration, cfg.Tick = e.dur, e.tick
		if e.gate == "default" {
			cfg.Admission = sim.NewShed(shed.GateConfig{})
		}
		return cfg
	}
	total := 0.0
	for _, p := range sim.BrownoutParts() {
		total += p.Cost
	}
	mean := sim.MandatoryCapacity(build(nil, nil)) / (1 + swingLevel*total)
	var shape sim.Profile = sim.Sine{Mean: mean, Amplitude: c.amp, Period: c.period}
	name := "sine"
	if c.square {
		shape, name = sim.Square{Mean: mean, Amplitude: c.amp, Period: c.period}, "square"
	}
	grid := sim.OracleGrid{Duration: 20 * time.Second, Table: table}
	for i := range 15 {
		grid.Loads = append(grid.Loads, mean*(0.3+1.4*float64(i)/14))
	}
	for i := range 21 {
		grid.Shares = append(grid.Shares, float64(i)/20)
	}
	end := int(e.dur / time.Second)
	oShare := sim.NewOracle(build, shape, e.dur, grid).OptionalShare(lab.Skip, end)
	first := func() sim.Config { cfg := build(shape, nil); cfg.Seed = e.seed0; return cfg }
	tick := build(shape, nil).Tick
	if tick <= 0 {
		tick = time.Second // (sim's default)
	}
	rho, _ := sim.SweepRho(first, swingRhos)
	rhoLate, _ := sim.SweepRhoLate(first, swingRhos, tick)
	rhoCounted, _ := sim.SweepRhoCounted(first, swingRhos)
	var law, ref, late, counted sim.Window
	var phases [2]swingPhases // the controller's, the reference's
	n := float64(e.seeds)
	add := func(to *sim.Window, w sim.Window) {
		to.InTime += w.InTime / n
		to.OptionalShare += w.OptionalShare / n
	}
	for i := range e.seeds {
		seed := e.seed0 + uint32(i)
		cfg := build(shape, sim.NewController(e.config()))
		cfg.Seed = seed
		res := sim.Run(cfg)
		add(&law, res.Between(lab.Skip, end))
		phases[0].add(res, c.period, lab.Skip, end)
		for _, r := range []struct {
			to      *sim.Window
			rho     float64
			lag     time.Duration
			counted bool
		}{{&ref, rho.Setting, 0, false}, {&late, rhoLate.Setting, tick, false}, {&counted, rhoCounted.Setting, 0, true}} {
			rc := build(shape, nil)
			rc.Seed = seed
			d := sim.NewReference(rc, r.rho)
			d.Lag, d.Counted = r.lag, r.counted
			rc.Dimmer = d
			res := sim.Run(rc)
			add(r.to, res.Between(lab.Skip, end))
			if r.to == &ref {
				phases[1].add(res, c.period, lab.Skip, end)
			}
		}
	}
	byPhase := ""
	if e.byPhase {
		byPhase = "\n" + phases[0].String(phases[1], shape, c.period)
	}
	return fmt.Sprintf("%d worker(s), %-6s every %2.0fs ±%2.0f%%: controller %6.2f%% in time at %.2f of the oracle's share; reference (set point %.2f) %6.2f%% at %.2f, %+.2f points; told the load a tick late (%.2f) %6.2f%% at %.2f, %+.2f points; told the last interval's count (%.2f) %6.2f%% at %.2f, %+.2f points",
		c.workers, name, c.period.Seconds(), 100*c.amp, 100*law.InTime, law.OptionalShare/oShare,
		rho.Setting, 100*ref.InTime, ref.OptionalShare/oShare, 100*(law.InTime-ref.InTime),
		rhoLate.Setting, 100*late.InTime, late.OptionalShare/oShare, 100*(law.InTime-late.InTime),
		rhoCounted.Setting, 100*counted.InTime, counted.OptionalShare/oShare, 100*(law.InTime-counted.InTime)) + byPhase
}

// phaseBins is how many parts of its period the swings view's --by-phase
// splits a moving load into at most: twelfths, and no part shorter than a
// second (the lab's seconds are its unit: a 10-s period has ten parts).
const phaseBins = 12

// swingPhases sums a moving load's seconds by the part of its period they
// fall in: the users, those of them not in time, and the optional share.
type swingPhases struct {
	bins                  int
	users, late, share, n [phaseBins]float64
}

// parts is how many parts a period is split into.
func parts(period time.Duration) int {
	return max(min(phaseBins, int(period/time.Second)), 1)
}

// add folds in seconds [from, to) of run r of a load of the given period.
func (p *swingPhases) add(r sim.Result, period time.Duration, from, to int) {
	p.bins = parts(period)
	secs := period.Seconds()
	for t := from; t < min(to, len(r.Seconds)); t++ {
		s := r.Seconds[t]
		b := min(int(math.Mod(float64(t)+0.5, secs)/secs*float64(p.bins)), p.bins-1)
		p.users[b] += float64(s.Users)
		p.late[b] += float64(s.Users - s.UsersInTime)
		p.share[b] += s.OptionalShare
		p.n[b]++
	}
}

// String prints p beside ref, a part of the period a column: the load
// (shape's rate in the part's middle), the users not in time, per
// thousand of all the part's users, and the optional share.
func (p *swingPhases) String(ref swingPhases, shape sim.Profile, period time.Duration) string {
	var load, late, share strings.Builder
	for b := range p.bins {
		fmt.Fprintf(&load, " %9.0f", shape.Rate(time.Duration((float64(b)+0.5)/float64(p.bins)*float64(period))))
		fmt.Fprintf(&late, " %4.0f/%-4.0f", 1000*ratio(p.late[b], p.users[b]), 1000*ratio(ref.late[b], ref.users[b]))
		fmt.Fprintf(&share, " %.2f/%.2f", ratio(p.share[b], p.n[b]), ratio(ref.share[b], ref.n[b]))
	}
	return fmt.Sprintf("  in %d parts of the period from its start, controller/reference:", p.bins) +
		"\n  load, req/s   " + load.String() + "\n  users late ‰  " + late.String() + "\n  optional share" + share.String()
}

// ratio is a/b, 0 where b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// b2i is 1 for true.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// oracleSweep prints, per load, the pooled in-time share and the worst p99
// at every level of the grid.
func (e *explorer) oracleSweep() error {
	grid := int(math.Round(1 / lab.Grid))
	n, per := e.seeds, (grid+1)*e.seeds
	ws := make([]sim.Window, len(e.loads)*per)
	err := e.each(len(ws), func(i int) {
		l, th, s := i/per, (i%per)/n, i%n
		ws[i] = e.run(sim.Constant(e.loads[l]), sim.Static(float64(th)*lab.Grid), e.seed0+uint32(s), e.dur).Between(lab.Skip, int(e.dur/time.Second))
	})
	if err != nil {
		return err
	}
	for l, load := range e.loads {
		fmt.Fprintf(e.out, "load %v:", load)
		for th := 0; th <= grid; th++ {
			in, _, p99 := lab.Pooled(ws[l*per+th*n : l*per+(th+1)*n])
			fmt.Fprintf(e.out, " %.2f:%.2f%%/%dms", float64(th)*lab.Grid, 100*in, p99.Milliseconds())
		}
		fmt.Fprintln(e.out)
	}
	return nil
}

// static prints in time, the optional share and p99 at high fixed levels
// and low loads.
func (e *explorer) static() error {
	thetas := []float64{0.8, 0.9, 1}
	n := e.seeds
	ws := make([]sim.Window, len(e.loads)*len(thetas)*n)
	err := e.each(len(ws), func(i int) {
		l, th, s := i/(len(thetas)*n), (i/n)%len(thetas), i%n
		ws[i] = e.run(sim.Constant(e.loads[l]), sim.Static(thetas[th]), e.seed0+uint32(s), e.dur).Between(lab.Skip, int(e.dur/time.Second))
	})
	if err != nil {
		return err
	}
	for l, load := range e.loads {
		for th, theta := range thetas {
			k := (l*len(thetas) + th) * n
			it, op, p99 := lab.Pooled(ws[k : k+n])
			fmt.Fprintf(e.out, "load %v θ %.2f: in-time %.2f%% optional %.3f p99 %v\n", load, theta, 100*it, op, p99)
		}
	}
	return nil
}

// snapshots keeps every snapshot a Dimmer is given.
type snapshots struct {
	d sim.Dimmer
	s []signals.Snapshot
}

func (r *snapshots) Step(now time.Time, s signals.Snapshot) sim.Dim {
	r.s = append(r.s, s)
	return r.d.Step(now, s)
}

// signalStats is, per key, the mean and standard deviation of the signal
// after the first minute of runs at the fixed level th over the seeds.
func (e *explorer) signalStats(load, th float64, keys []signals.Key) (mean, sd []float64) {
	sum, sq, n := make([]float64, len(keys)), make([]float64, len(keys)), make([]int, len(keys))
	for s := range e.seeds {
		d := &snapshots{d: sim.Static(th)}
		e.run(sim.Constant(load), d, e.seed0+uint32(s), e.dur)
		for _, sn := range d.s[min(lab.Skip, len(d.s)):] {
			for j, k := range keys {
				if v, ok := sn.Get(k); ok {
					sum[j] += v
					sq[j] += v * v
					n[j]++
				}
			}
		}
	}
	for j := range keys {
		m := sum[j] / float64(n[j])
		mean, sd = append(mean, m), append(sd, math.Sqrt(max(sq[j]/float64(n[j])-m*m, 0)))
	}
	return mean, sd
}

// signals prints each signal's mean ± standard deviation per load and
// fixed level.
func (e *explorer) signals() error {
	keys := []signals.Key{signals.LatencyP99, signals.RejectRatio, signals.GateBusy, signals.GateUtilization, signals.GateLimit, signals.InFlight, signals.GateQueued, signals.SojournP99}
	thetas := []float64{0, 0.2, 0.4, 0.6, 0.8, 1}
	lines := make([]string, len(e.loads)*len(thetas))
	err := e.each(len(lines), func(i int) {
		load, th := e.loads[i/len(thetas)], thetas[i%len(thetas)]
		m, sd := e.signalStats(load, th, keys)
		var b strings.Builder
		fmt.Fprintf(&b, "load %v θ %.1f:", load, th)
		for j, k := range keys {
			fmt.Fprintf(&b, " %s=%.3f±%.3f", k, m[j], sd[j])
		}
		lines[i] = b.String()
	})
	if err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Fprintln(e.out, l)
	}
	return nil
}

// discrim prints, per load, each signal at θ* and how far it moves at
// θ* + 0.1 in standard deviations at θ*: which signals tell the two apart.
func (e *explorer) discrim(table []lab.Row) error {
	keys := []signals.Key{signals.LatencyP99, signals.LatencyP90, signals.LatencyP50, signals.LatencyMean, signals.SojournP99, signals.SojournMin, signals.RejectRatio, signals.GateBusy}
	star, err := e.thetaStar(table, e.loads)
	if err != nil {
		return err
	}
	lines := make([]string, len(e.loads))
	err = e.each(len(lines), func(i int) {
		load := e.loads[i]
		th := star[load].Theta
		m0, s0 := e.signalStats(load, th, keys)
		m1, _ := e.signalStats(load, min(th+0.1, 1), keys)
		var b strings.Builder
		fmt.Fprintf(&b, "load %v θ*=%.2f:", load, th)
		for j, k := range keys {
			fmt.Fprintf(&b, " %s=%.3f(d=%.2f)", k, m0[j], (m1[j]-m0[j])/s0[j])
		}
		lines[i] = b.String()
	})
	if err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Fprintln(e.out, l)
	}
	return nil
}

// modelEstimates prints, per load and seed, the controller's level b and
// the level θ a capacity model estimates at each saturated second (refusals
// of 2 % or more) of the first 40: λ·c(θ) = u·T·c(b), c(b) = 1 − S(1 − b)
// with S = 0.4, the optional share of a page's cost.
func (e *explorer) modelEstimates() error {
	const S = 0.4
	n := e.seeds
	lines := make([]string, len(e.loads)*n)
	err := e.each(len(lines), func(i int) {
		load, seed := e.loads[i/n], e.seed0+uint32(i%n)
		rec := e.newRecorder(true)
		res := e.run(sim.Constant(load), rec, seed, e.dur)
		var b strings.Builder
		fmt.Fprintf(&b, "%v %d:", load, seed)
		for t, sec := range res.Seconds {
			if t >= len(rec.Snapshots) || t > 40 {
				break
			}
			sn := rec.Snapshots[t]
			rr, _ := sn.Get(signals.RejectRatio)
			tp, _ := sn.Get(signals.Throughput)
			ar, _ := sn.Get(signals.ArrivalRate)
			if rr < 0.02 || ar == 0 {
				continue
			}
			est := (e.u*tp*(1-S*(1-sec.Level))/ar - (1 - S)) / S
			fmt.Fprintf(&b, " %d:%.2f/%.2f", t, sec.Level, est)
		}
		lines[i] = b.String()
	})
	if err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Fprintln(e.out, l)
	}
	return nil
}
