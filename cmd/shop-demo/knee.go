package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/brownout/brownout/load"
)

func runKnee(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("knee", flag.ContinueOnError)
	target := fs.String("target", "", "the URL to step up against, e.g. http://127.0.0.1:8081/api/products/7 (required)")
	from := fs.Float64("from", 50, "the first step's rate, requests per second")
	step := fs.Float64("step", 50, "added at each step")
	steps := fs.Int("steps", 12, "number of steps")
	hold := fs.Duration("hold", 6*time.Second, "each step's length (its first quarter, at most 2 s, is not measured)")
	timeout := fs.Duration("timeout", 2*time.Second, "the client's timeout")
	var headers headerFlags
	fs.Var(&headers, "H", "a header to send, \"Name: value\" (repeatable)")
	quiet := fs.Bool("quiet", false, "no progress line a second")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: shop-demo knee --target URL [flags]

An open-loop step test: raises the rate in steps, records goodput, p99 and
errors per step, reports where p99 turns steep, and suggests the settings
that follow (queue bounds K ≈ μ × wait, a concurrency limit from Little's
law, a p99 target, callers' timeouts).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if *target == "" {
		return usagef("knee: --target is required")
	}
	cfg := load.KneeConfig{URL: *target, From: *from, Step: *step, Steps: *steps, Hold: *hold, Timeout: *timeout, Header: http.Header(headers)}
	if !*quiet {
		cfg.Progress = stderr
	}
	k, err := load.FindKnee(ctx, cfg)
	if err != nil {
		return err
	}
	return k.WriteTable(stdout)
}

// headerFlags collects -H "Name: value".
type headerFlags http.Header

func (h *headerFlags) String() string { return "" }

func (h *headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("header %q: want \"Name: value\"", v)
	}
	if *h == nil {
		*h = headerFlags{}
	}
	http.Header(*h).Add(name, strings.TrimSpace(value))
	return nil
}
