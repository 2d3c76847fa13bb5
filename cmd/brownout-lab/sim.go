package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/brownout/brownout"
	"github.com/brownout/brownout/internal/cli"
	"github.com/brownout/brownout/sim"
)

func simUsage(w io.Writer) {
	fmt.Fprint(w, `brownout-lab — the lab: the deterministic simulator and the real-HTTP harness

Usage:
  brownout-lab seed NAME          print a source simulator's output, byte for byte
  brownout-lab run --scenario NAME [--seed N] [--duration D] [--format table|csv|json] [--series]
  brownout-lab real [--stack brownout|shed|failsafe|none] [--workers N] [--phases R:D|sine:…,…] …
                                  the embedded stack on real HTTP (brownout-lab real --help)
  brownout-lab explore VIEW [--load R] [--seed N] …
                                  the controller's law in the lab: traces and tables (brownout-lab explore --help)
  brownout-lab version            the build: version, commit, Go

Seeds:
`)
	seeds := sim.Seeds()
	var names []string
	for n := range seeds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, seeds[n].About)
	}
	fmt.Fprint(w, "\nScenarios:\n")
	for _, n := range sim.ScenarioNames() {
		s, _ := sim.Lookup(n)
		fmt.Fprintf(w, "  %-16s %s (default %s)\n", n, s.About, s.Duration)
	}
}

// run is the whole command behind main, so that tests can call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		simUsage(stderr)
		return usagef("no command: want seed, run, real or explore")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		simUsage(stdout)
		return nil
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "brownout-lab", brownout.Version())
		return nil
	case "seed":
		if len(args) == 2 && cli.IsHelp(args[1]) {
			simUsage(stdout)
			return nil
		}
		if len(args) != 2 {
			simUsage(stderr)
			return usagef("seed: want exactly one name")
		}
		s, ok := sim.Seeds()[args[1]]
		if !ok {
			return usagef("seed: unknown seed simulator %q", args[1])
		}
		return s.Run(stdout)
	case "run":
		return runScenario(ctx, args[1:], stdout, stderr)
	case "real":
		return runReal(ctx, args[1:], stdout, stderr)
	case "explore":
		return runExplore(ctx, args[1:], stdout, stderr)
	case "real-app":
		return runRealApp(ctx, args[1:], stdout, stderr)
	}
	simUsage(stderr)
	return usagef("unknown command %q", args[0])
}

func runScenario(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("brownout-lab run", flag.ContinueOnError)
	name := fs.String("scenario", "", "scenario to run (see brownout-lab --help)")
	seed := fs.Uint("seed", 1, "random seed; the same seed gives the same run")
	dur := fs.Duration("duration", 0, "length of each run (default: the scenario's)")
	format := fs.String("format", "table", "output format: "+strings.Join(sim.Formats(), ", "))
	series := fs.Bool("series", false, "with table: also print each case's per-second series")
	fs.Usage = func() { simUsage(fs.Output()); fmt.Fprintln(fs.Output(), "\nFlags:"); fs.PrintDefaults() }
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageError{err.Error()}
	}
	switch {
	case fs.NArg() > 0:
		return usagef("run: unexpected arguments %q", fs.Args())
	case *name == "":
		return usagef("run: --scenario is required (one of %s)", strings.Join(sim.ScenarioNames(), ", "))
	case *seed > 1<<32-1:
		return usagef("run: --seed %d does not fit in 32 bits", *seed)
	case *dur < 0 || (*dur > 0 && *dur < time.Second) || *dur > 24*time.Hour:
		return usagef("run: --duration %s: want between 1s and 24h", *dur)
	case !slices.Contains(sim.Formats(), *format):
		return usagef("run: --format %q: want one of %s", *format, strings.Join(sim.Formats(), ", "))
	}
	sc, err := sim.Lookup(*name)
	if err != nil {
		return usageError{err.Error()}
	}
	cases := sc.Run(sim.Options{Seed: uint32(*seed), Duration: *dur})
	return sim.WriteCases(stdout, *format, cases, *series)
}
