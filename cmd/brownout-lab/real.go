package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/brownout/brownout/internal/cli"
	"github.com/brownout/brownout/load"
	"github.com/brownout/brownout/testapp"
)

const realUsage = `Usage:
  brownout-lab real [flags]

Runs the embedded stack (the README's snippet, package defaults: the
controller on dimmer's model law) in front of a test app with a hidden
bottleneck, in its own process on 127.0.0.1, and sends it open-loop load
from this one. Prints one line a second to stderr and a table per phase
(each measured without its first 5 s) to stdout, then, with a controller,
what it had learned of each feature's cost when the load ended, beside the
part's true cost.

Flags:
`

// runReal is "brownout-lab real".
func runReal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("brownout-lab real", flag.ContinueOnError)
	stack := fs.String("stack", "brownout", "what protects the app: none, shed (the controller frozen: shedding alone), failsafe (failsafe-go's adaptive limiter with our controller dimming behind it), brownout")
	workers := fs.Int("workers", 4, "the app's hidden concurrency (one worker per page)")
	page := fs.Duration("page", 6*time.Millisecond, "a page's mandatory work")
	parts := fs.String("parts", "recommendations=2.5ms,reviews=1.5ms", "optional parts and their cost, name=duration,…; name=duration@remote is a call to another service, waited for without holding a worker")
	priors := fs.String("priors", "", "the controller's configured costs (dimmer.Feature.Cost: shares of the all-off page), name=share,…; default: none set (1 each)")
	exp := fs.Bool("exponential", false, "draw costs from an exponential distribution instead of holding them exactly")
	wall := fs.Bool("wall-time", false, "the app does not report each page's time on its worker to the tallies (signals.Held): costs are then learned from the pages' wall time (the wait for a worker and remote parts included) instead of the pool's")
	cont := fs.String("contention", "", "database-like contention alpha,beta: service time × (1 + alpha·(n−1) + beta·n·(n−1)) with n in service")
	phases := fs.String("phases", "", "offered load, phases in order, each rate:duration, sine:mean:amplitude:period:duration, square:mean:amplitude:period:duration or ramp:from:to:duration, e.g. 300:20s,sine:400:200:30s:2m (default: --calm × the all-on capacity for 20 s, --spike × the all-off capacity for 40 s, --calm × the all-on capacity for 30 s)")
	spike := fs.Float64("spike", 2, "the spike, in multiples of the all-off capacity (without --phases)")
	calm := fs.Float64("calm", 0.75, "the load before and after the spike, in multiples of the all-on capacity (without --phases)")
	critical := fs.Float64("critical", 0.3, "share of critical requests")
	users := fs.Int("users", 5000, "distinct users (X-User-ID)")
	seed := fs.Uint64("seed", 1, "seed of the users and the mix")
	timeout := fs.Duration("timeout", time.Second, "the clients' timeout")
	format := fs.String("format", "table", "output: table or json")
	quiet := fs.Bool("quiet", false, "no per-second progress")
	fs.Usage = func() { fmt.Fprint(fs.Output(), realUsage); fs.PrintDefaults() }
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageError{err.Error()}
	}
	st, err := testapp.ParseStack(*stack)
	if err != nil {
		return usageError{err.Error()}
	}
	ps, err := testapp.ParseParts(*parts)
	if err != nil {
		return usageError{err.Error()}
	}
	pr, err := testapp.ParsePriors(*priors)
	if err != nil {
		return usageError{err.Error()}
	}
	cfg := testapp.Config{Workers: *workers, Page: *page, Parts: ps, Exponential: *exp, Priors: pr, WallTime: *wall}
	if *cont != "" {
		if cfg.Contention.Alpha, cfg.Contention.Beta, err = testapp.ParseContention(*cont); err != nil {
			return usageError{err.Error()}
		}
	}
	switch {
	case fs.NArg() > 0:
		return usagef("real: unexpected arguments %q", fs.Args())
	case *workers < 1 || *workers > 10000:
		return usagef("real: --workers %d: want 1 to 10000", *workers)
	case *page <= 0:
		return usagef("real: --page %s: want a positive duration", *page)
	case !(*critical >= 0 && *critical < 1):
		return usagef("real: --critical %v: want 0 ≤ share < 1", *critical)
	case *timeout <= 0:
		return usagef("real: --timeout %s: want a positive duration", *timeout)
	case !(*spike > 0 && *spike <= 20) || !(*calm >= 0 && *calm <= 20):
		return usagef("real: --spike %v, --calm %v: want multiples between 0 and 20", *spike, *calm)
	case *format != "table" && *format != "json":
		return usagef("real: --format %q: want table or json", *format)
	}
	on, off := cfg.Capacity()
	var phs []load.Phase
	if *phases == "" {
		phs = []load.Phase{{Name: "before", Rate: *calm * on, Duration: 20 * time.Second},
			{Name: "spike", Rate: *spike * off, Duration: 40 * time.Second}, {Name: "after", Rate: *calm * on, Duration: 30 * time.Second}}
	} else if phs, err = load.ParsePhases(*phases); err != nil {
		return usageError{err.Error()}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var progress io.Writer = stderr
	if *quiet {
		progress = nil
	}
	fmt.Fprintf(stderr, "app: %d workers, page %s, parts %s: %.0f pages/s with every part on, %.0f off; stack %s\n", *workers, *page, *parts, on, off, st)
	res, err := testapp.RunHarness(ctx, testapp.HarnessConfig{
		App: cfg, Stack: st, Phases: phs, Critical: *critical, Users: *users, Seed: *seed, Timeout: *timeout, Progress: progress,
		Command: func(ctx context.Context, args []string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, exe, append([]string{"real-app"}, args...)...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // never outlive us
			return cmd
		},
	})
	if err != nil {
		return err
	}
	if *format == "json" {
		return res.Report.WriteJSON(stdout)
	}
	fmt.Fprintf(stdout, "stack %s, %d workers: capacity %.0f pages/s all on, %.0f all off\n", st, *workers, on, off)
	if err := res.Report.WriteTable(stdout); err != nil {
		return err
	}
	if len(phs) >= 2 && st != testapp.Unprotected {
		ps := cfg.Parts
		if ps == nil {
			ps = testapp.Default().Parts
		}
		stop, full := res.Recovery(len(phs)-2, ps)
		fmt.Fprintf(stdout, "after the last load change: refusals stopped after %s, every optional part back to full after %s\n", secondsOrNever(stop), secondsOrNever(full))
	}
	writeCosts(stdout, cfg, res)
	fmt.Fprintf(stdout, "cpu: app %.1f s, load generator %.1f s over %.0f s (%.0f%% and %.0f%% of one core)\n",
		res.AppCPU.Seconds(), res.LoadCPU.Seconds(), res.Wall.Seconds(),
		100*res.AppCPU.Seconds()/res.Wall.Seconds(), 100*res.LoadCPU.Seconds()/res.Wall.Seconds())
	for _, p := range res.Report.Phases {
		if !p.Valid {
			fmt.Fprintln(stdout, "the generator fell short of the offered rate: this run does not count (is the machine busy?)")
			break
		}
	}
	return nil
}

// writeCosts writes, a line per feature, what the controller had learned
// of its cost when the load ended, beside its truth: what the part takes
// from the worker pool (the bottleneck that overload exhausts) and its
// wall time, as shares of the all-off page's pool work. An estimate is
// within when it is within 20 % of the pool share or 0.05 of the all-off
// page of it — as a share of the measured base, and in seconds.
func writeCosts(w io.Writer, cfg testapp.Config, res *testapp.HarnessResult) {
	if len(res.Costs) == 0 {
		return
	}
	cfg = withParts(cfg)
	frac := res.Fractional()
	fmt.Fprintf(w, "learned costs when the load ended (true: the part's pool work and wall time, shares of the all-off page's %s of pool work):\n", cfg.Page)
	fmt.Fprintf(w, "%-16s %5s %5s %6s %15s %8s %8s %6s %10s  %s\n", "feature", "pool", "wall", "prior", "learned ± SE", "extra", "base", "ticks", "fractional", "within (share, seconds)")
	for _, c := range res.Costs {
		var part *testapp.Part
		for i := range cfg.Parts {
			if cfg.Parts[i].Name == c.Feature {
				part = &cfg.Parts[i]
			}
		}
		pool, wall, truth := "-", "-", math.NaN()
		if part != nil {
			p, wl := cfg.PoolShare(*part)
			pool, wall, truth = fmt.Sprintf("%.3f", p), fmt.Sprintf("%.3f", wl), p
		}
		learned, within := "unknown", "-"
		if c.Known {
			learned = fmt.Sprintf("%.3f ± %.3f", c.Value, c.SE)
			if !math.IsNaN(truth) {
				tol := max(0.2*truth, 0.05)
				within = fmt.Sprintf("%s, %s", yesNo(math.Abs(c.Value-truth) <= tol), yesNo(math.Abs(c.Seconds/cfg.Page.Seconds()-truth) <= tol))
			}
		}
		fmt.Fprintf(w, "%-16s %5s %5s %6.3g %15s %6.2fms %6.2fms %6d %9ds  %s\n", c.Feature, pool, wall, c.Prior, learned,
			1000*c.Seconds, 1000*c.Base, c.Contrasted, frac[c.Feature], within)
	}
}

// withParts fills cfg's parts with the app's defaults where it has none.
func withParts(cfg testapp.Config) testapp.Config {
	if cfg.Parts == nil {
		cfg.Parts = testapp.Default().Parts
	}
	if cfg.Page <= 0 {
		cfg.Page = testapp.Default().Page
	}
	return cfg
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func secondsOrNever(s int) string {
	if s < 0 {
		return "never (within the run)"
	}
	return fmt.Sprintf("%d s", s)
}

// runRealApp is the app process of "sim real" (not for people).
func runRealApp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return testapp.ServeMain(ctx, args, stdout, stderr)
}
