package sim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Formats lists the output formats of WriteCases. Each call returns a new
// slice.
func Formats() []string { return []string{"table", "csv", "json"} }

// WriteCases writes a scenario's results: "table" prints one summary line
// per case (and, with series, each case's seconds), "csv" one row per case
// and second, "json" everything.
func WriteCases(w io.Writer, format string, cases []Case, series bool) error {
	switch format {
	case "table":
		return writeTable(w, cases, series)
	case "csv":
		return writeCSV(w, cases)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(cases)
	}
	return fmt.Errorf("sim: unknown format %q (want one of %s)", format, strings.Join(Formats(), ", "))
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" }

func pct1(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }

func recoveryText(s Summary) string {
	switch {
	case s.Recovery == nil:
		return "-"
	case *s.Recovery < 0:
		return "never"
	}
	return strconv.FormatFloat(s.Recovery.Seconds(), 'f', 0, 64) + " s"
}

func writeTable(w io.Writer, cases []Case, series bool) error {
	var b strings.Builder
	width := len("policy")
	for _, c := range cases {
		width = max(width, len([]rune(c.Policy)))
	}
	fmt.Fprintf(&b, "%-*s %5s %7s %7s %7s %8s %8s %8s %9s %8s %9s\n", width,
		"policy", "load", "good/s", "in time", "p99 ms", "refused", "dropped", "crit ok", "optional", "att/new", "recovery")
	for _, c := range cases {
		s := c.Result.Summary
		load := "-"
		if c.Load > 0 {
			load = strconv.FormatFloat(c.Load, 'f', -1, 64)
		}
		amp := 0.0
		if s.New > 0 {
			amp = float64(s.Attempts) / float64(s.New)
		}
		rec := recoveryText(s)
		fmt.Fprintf(&b, "%s %5s %7.1f %7s %7s %8d %8d %8s %9s %8.2f %9s\n",
			padEnd(c.Policy, width), load, s.GoodPerSec, pct1(s.InTime), ms(s.P99), s.Refused, s.Dropped, pct1(s.CriticalOK), pct(s.OptionalServed), amp, rec)
	}
	if series {
		for _, c := range cases {
			fmt.Fprintf(&b, "\n%s (load %v)\n%4s %8s %6s %6s %8s %8s %8s %8s %7s %5s %9s %9s\n", c.Policy, c.Load,
				"t", "arrivals", "good", "served", "refused", "dropped", "p99 ms", "wait ms", "level", "shed", "optional", "in system")
			for _, s := range c.Result.Seconds {
				ref := 0
				for _, r := range s.Refused {
					ref += r
				}
				fmt.Fprintf(&b, "%4d %8d %6d %6d %8d %8d %8s %8s %7.2f %5.2f %9s %9d\n", s.T, s.Arrivals, s.Good, s.Served,
					ref, s.Dropped, ms(s.P99), ms(s.Sojourn), s.Level, s.Shed, pct(s.Optional), s.InSystem)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCSV(w io.Writer, cases []Case) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"policy", "load", "t", "arrivals", "new", "served", "good", "refused_critical", "refused_default",
		"refused_sheddable", "dropped", "timeouts", "p99_ms", "sojourn_ms", "level", "shed", "optional", "in_system"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, c := range cases {
		for _, s := range c.Result.Seconds {
			cw.Write([]string{c.Policy, f(c.Load), strconv.Itoa(s.T), strconv.Itoa(s.Arrivals), strconv.Itoa(s.New),
				strconv.Itoa(s.Served), strconv.Itoa(s.Good), strconv.Itoa(s.Refused[0]), strconv.Itoa(s.Refused[1]),
				strconv.Itoa(s.Refused[2]), strconv.Itoa(s.Dropped), strconv.Itoa(s.Timeouts), f(float64(s.P99) / 1e6),
				f(float64(s.Sojourn) / 1e6), f(s.Level), f(s.Shed), f(s.Optional), strconv.Itoa(s.InSystem)})
		}
	}
	cw.Flush()
	return cw.Error()
}
