package testapp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/brownout/brownout/load"
	"github.com/brownout/brownout/signals"
)

// AppFlags are the flags of the app process (ServeMain) for cfg and stack.
func AppFlags(cfg Config, stack Stack) []string {
	cfg = cfg.withDefaults()
	var parts []string
	for _, p := range cfg.Parts {
		parts = append(parts, p.String())
	}
	args := []string{"--listen", "127.0.0.1:0", "--stack", string(stack), "--workers", strconv.Itoa(cfg.Workers),
		"--page", cfg.Page.String(), "--parts", strings.Join(parts, ",")}
	if cfg.Exponential {
		args = append(args, "--exponential")
	}
	if c := cfg.Contention; c.Alpha != 0 || c.Beta != 0 {
		args = append(args, "--contention", fmt.Sprintf("%g,%g", c.Alpha, c.Beta))
	}
	if cfg.WallTime {
		args = append(args, "--wall-time")
	}
	if len(cfg.Priors) > 0 {
		var ps []string
		for name, v := range cfg.Priors {
			ps = append(ps, fmt.Sprintf("%s=%g", name, v))
		}
		slices.Sort(ps)
		args = append(args, "--priors", strings.Join(ps, ","))
	}
	return args
}

// ServeMain is the app process: it parses AppFlags, serves, and prints
// "listening ADDR" on stdout once it listens. It returns when ctx is done.
func ServeMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("app", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address")
	stack := fs.String("stack", "brownout", "none, shed, failsafe or brownout")
	workers := fs.Int("workers", 4, "hidden concurrency")
	page := fs.Duration("page", 6*time.Millisecond, "a page's mandatory work")
	parts := fs.String("parts", "recommendations=2.5ms,reviews=1.5ms", "optional parts, name=cost[@remote],…")
	exp := fs.Bool("exponential", false, "exponential costs instead of exact ones")
	cont := fs.String("contention", "", "database-like contention alpha,beta")
	priors := fs.String("priors", "", "the controller's configured costs, name=share,…")
	wall := fs.Bool("wall-time", false, "do not report each page's time on its worker to the tallies (signals.Held): costs are then learned from the pages' wall time")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, err := ParseStack(*stack)
	if err != nil {
		return err
	}
	ps, err := ParseParts(*parts)
	if err != nil {
		return err
	}
	pr, err := ParsePriors(*priors)
	if err != nil {
		return err
	}
	cfg := Config{Workers: *workers, Page: *page, Parts: ps, Exponential: *exp, Priors: pr, WallTime: *wall}
	if *cont != "" {
		if cfg.Contention.Alpha, cfg.Contention.Beta, err = ParseContention(*cont); err != nil {
			return err
		}
	}
	return Serve(ctx, ServeConfig{Listen: *listen, App: cfg, Stack: st, Ready: func(addr string) {
		fmt.Fprintln(stdout, "listening", addr)
	}})
}

// HarnessConfig is one run of the real-HTTP harness: an app process behind
// a stack on loopback, and open-loop load from this process.
type HarnessConfig struct {
	App    Config
	Stack  Stack
	Phases []load.Phase
	// Critical is the share of critical requests. Default 0.3.
	Critical float64
	Users    int
	Seed     uint64
	// Timeout is the clients' timeout. Default 1 s.
	Timeout time.Duration
	// Skip: see load.Config. Default 5 s.
	Skip     time.Duration
	Progress io.Writer
	// Command returns the command that runs ServeMain with args in a new
	// process (the harness re-executes its own binary).
	Command func(ctx context.Context, args []string) *exec.Cmd
}

// HarnessResult is a run's report and what it cost.
type HarnessResult struct {
	Report *load.Report
	// AllOn and AllOff are the app's capacity in pages/s with every
	// optional part on and off.
	AllOn, AllOff float64
	// AppCPU and LoadCPU are the CPU time of the app process and of this
	// one over the run; Wall its length.
	AppCPU, LoadCPU, Wall time.Duration
	// Costs is what the controller had learned of each feature's cost
	// when the load ended (empty without a controller, or when the last
	// reading failed).
	Costs []LearnedCost
}

// RunHarness starts the app process, sends the load, and stops the app.
func RunHarness(ctx context.Context, cfg HarnessConfig) (*HarnessResult, error) {
	if cfg.Command == nil {
		return nil, errors.New("testapp: harness: no command to start the app")
	}
	if cfg.Critical <= 0 {
		cfg.Critical = 0.3
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := cfg.Command(actx, AppFlags(cfg.App, cfg.Stack))
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testapp: harness: start the app: %w", err)
	}
	defer func() {
		cancel() // SIGTERM: the app shuts down…
		cmd.Wait()
	}()
	addr, err := readAddr(out)
	if err != nil {
		return nil, err
	}
	base := "http://" + addr
	client := &http.Client{Timeout: time.Second}
	live := func(ctx context.Context) (Live, bool) {
		var l Live
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+StatsPath, nil)
		resp, err := client.Do(req)
		if err != nil {
			return l, false
		}
		defer resp.Body.Close()
		return l, json.NewDecoder(resp.Body).Decode(&l) == nil
	}
	sample := func(ctx context.Context) map[string]float64 {
		l, ok := live(ctx)
		if !ok {
			return nil
		}
		m := map[string]float64{"limit": l.Limit, "inflight": l.InFlight, "queued": float64(l.Queued), "shed": l.Shed}
		for f, v := range l.Levels {
			m[f] = v
		}
		for k, v := range l.Refused {
			m["refused."+k] = float64(v)
		}
		return m
	}
	res := &HarnessResult{}
	res.AllOn, res.AllOff = cfg.App.Capacity()
	appCPU0, _ := load.ProcessCPU(cmd.Process.Pid)
	selfCPU0 := load.SelfCPU()
	start := time.Now()
	rep, err := load.Run(ctx, load.Config{
		Target: base, Phases: cfg.Phases, Users: cfg.Users, Seed: cfg.Seed, Timeout: cfg.Timeout, Skip: cfg.Skip,
		Progress: cfg.Progress, Sample: sample, Optional: optionalParts,
		Mix: []load.Kind{{Name: "critical", Share: cfg.Critical, Class: signals.Critical, Path: "/page"},
			{Name: "default", Share: 1 - cfg.Critical, Class: signals.Default, Path: "/page"}},
	})
	if err != nil {
		return nil, err
	}
	res.Wall = time.Since(start)
	if l, ok := live(ctx); ok {
		res.Costs = l.Costs
	}
	appCPU1, _ := load.ProcessCPU(cmd.Process.Pid)
	res.AppCPU, res.LoadCPU = appCPU1-appCPU0, load.SelfCPU()-selfCPU0
	res.Report = rep
	return res, nil
}

func readAddr(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
			go io.Copy(io.Discard, r)
			return addr, nil
		}
	}
	return "", errors.New("testapp: harness: the app exited before listening")
}

// optionalParts counts the optional parts a page served.
func optionalParts(body []byte) (served, offered int) {
	var pg page
	if json.Unmarshal(body, &pg) != nil {
		return 0, 0
	}
	return len(pg.Sections), len(pg.Sections) + len(pg.Dimmed)
}

// Recovery reads the seconds after phase i ends: after how long no
// request was refused any more (by the gate or the cascade; the harness
// sets no rate limit), and after how long every optional part's level was
// back at 1 and stayed there. -1 when it did not happen before the run
// ended.
func (r *HarnessResult) Recovery(i int, parts []Part) (refusalsStop, fullAfter int) {
	end := 0
	for _, p := range r.Report.Phases[:i+1] {
		end = int(p.To / time.Second)
	}
	secs := r.Report.Seconds
	refusalsStop, fullAfter = -1, -1
	for s := len(secs) - 1; s >= end; s-- {
		if secs[s].Refused > 0 {
			break
		}
		refusalsStop = s - end
	}
	for s := len(secs) - 1; s >= end; s-- {
		full := secs[s].Sample != nil
		for _, p := range parts {
			if v, ok := secs[s].Sample[p.Name]; !ok || v < 1 {
				full = false
			}
		}
		if !full {
			break
		}
		fullAfter = s - end
	}
	return refusalsStop, fullAfter
}

// Fractional returns how many seconds of the run each feature's level was
// fractional (strictly between 0 and 1: some users got it and some did
// not, so its cost could be contrasted), by the per-second samples.
func (r *HarnessResult) Fractional() map[string]int {
	out := map[string]int{}
	for _, c := range r.Costs {
		out[c.Feature] = 0
	}
	for _, s := range r.Report.Seconds {
		for f := range out {
			if v, ok := s.Sample[f]; ok && v > 0 && v < 1 {
				out[f]++
			}
		}
	}
	return out
}
