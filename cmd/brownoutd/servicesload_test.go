package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/load"
)

// The services' real-time load: a `brownoutd serve` of several services
// in this process, on 127.0.0.1, and the pushing instances of its fleets
// in a child process (this test binary again, as TestPushersProcess), so
// that what the daemon's process spends (its CPU, its scheduling) is the
// daemon's alone. An instance pushes a synthetic body (simPush) every
// interval, from a random phase, saying its service in the header.

// pushGroup is a fleet of one service: instances pushing every interval
// (from random phases), each request latency long, bodies of width
// native buckets.
type pushGroup struct {
	Service   string        `json:"service"`
	Token     string        `json:"token,omitempty"`
	Instances int           `json:"instances"`
	Interval  time.Duration `json:"interval"`
	Latency   time.Duration `json:"latency"`
	Width     int           `json:"width"`
}

// fleetLoad is what the pushers' process does: every group's fleet,
// pushing to URL until stdin closes.
type fleetLoad struct {
	URL    string      `json:"url"`
	Groups []pushGroup `json:"groups"`
}

// pushResult is the pushers' process's report: pushes by status (0: no
// answer), their p99 round trip, and the bytes of a push.
type pushResult struct {
	Status    map[int]int   `json:"status"`
	P99       time.Duration `json:"p99"`
	BodyBytes int           `json:"body_bytes"`
}

const pushersEnv = "BROWNOUTD_TEST_PUSHERS"

// TestPushersProcess is the pushers' process of the services' load (run
// by startPushers, with the load in BROWNOUTD_TEST_PUSHERS); on its own
// it skips.
func TestPushersProcess(t *testing.T) {
	spec := os.Getenv(pushersEnv)
	if spec == "" {
		t.Skip("the pushers' process of the services' real-time tests and benchmarks (" + pushersEnv + ")")
	}
	var l fleetLoad
	require.NoError(t, json.Unmarshal([]byte(spec), &l))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }() // the parent closes stdin: stop
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256, IdleConnTimeout: time.Minute}
	c := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	var (
		mu     sync.Mutex
		status = map[int]int{}
		rtts   []time.Duration
		size   atomic.Int64
		wg     sync.WaitGroup
	)
	for _, g := range l.Groups {
		for i := range g.Instances {
			wg.Go(func() {
				sim := newSimPush(fmt.Sprintf("%s-%d", g.Service, i), time.Now(), uint64(max(1, int(g.Interval/(10*time.Millisecond)))), g.Latency, g.Width)
				t := time.NewTimer(rand.N(g.Interval))
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-t.C:
					}
					t.Reset(g.Interval)
					body := sim.next(time.Now())
					size.Store(int64(len(body)))
					start := time.Now()
					code := 0
					resp, err := c.Do(pushRequest(ctx, l.URL, g.Service, g.Token, body))
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						code = resp.StatusCode
					} else if ctx.Err() != nil {
						return
					}
					rtt := time.Since(start)
					mu.Lock()
					status[code]++
					rtts = append(rtts, rtt)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	slices.Sort(rtts)
	res := pushResult{Status: status, BodyBytes: int(size.Load())}
	if len(rtts) > 0 {
		res.P99 = rtts[(len(rtts)*99+99)/100-1]
	}
	b, _ := json.Marshal(res)
	fmt.Println("pushers:", string(b))
}

const probeEnv = "BROWNOUTD_TEST_LAG_PROBE"

// TestLagProbeProcess is the control of the services' real-time load
// (run by runLoad beside the pushers, with BROWNOUTD_TEST_LAG_PROBE set):
// an idle Go process whose 100 ms ticker's lateness, until stdin closes,
// is this machine's own — what a tick lag cannot go below here. On its
// own it skips.
func TestLagProbeProcess(t *testing.T) {
	if os.Getenv(probeEnv) == "" {
		t.Skip("the control process of the services' real-time tests and benchmarks (" + probeEnv + ")")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	var lags []time.Duration
	for {
		select {
		case <-ctx.Done():
			slices.Sort(lags)
			res := probeResult{N: len(lags)}
			if len(lags) > 0 {
				res.P99, res.Max = lags[(len(lags)*99+99)/100-1], lags[len(lags)-1]
			}
			b, _ := json.Marshal(res)
			fmt.Println("probe:", string(b))
			return
		case at := <-tk.C:
			lags = append(lags, time.Since(at))
		}
	}
}

// probeResult is the control's report: its ticks' lateness.
type probeResult struct {
	N   int           `json:"n"`
	P99 time.Duration `json:"p99"`
	Max time.Duration `json:"max"`
}

// pushers is a running child process: the pushers, or the control.
type pushers struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startPushers runs l in a child process until stop.
func startPushers(tb testing.TB, l fleetLoad) *pushers {
	tb.Helper()
	spec, err := json.Marshal(l)
	require.NoError(tb, err)
	return startChild(tb, "TestPushersProcess", pushersEnv+"="+string(spec))
}

// startChild runs this test binary's test as a child process with env
// added, until stop.
func startChild(tb testing.TB, test, env string) *pushers {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), env, "GOMAXPROCS=2")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(tb, err)
	out, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	require.NoError(tb, cmd.Start())
	p := &pushers{cmd: cmd, stdin: stdin, out: bufio.NewReader(out)}
	tb.Cleanup(func() { p.stdin.Close(); p.cmd.Wait() })
	return p
}

// stop ends the pushers and returns their report.
func (p *pushers) stop(tb testing.TB) pushResult {
	tb.Helper()
	var res pushResult
	p.report(tb, "pushers: ", &res)
	return res
}

// report ends the child and reads its report, the line after prefix,
// into v.
func (p *pushers) report(tb testing.TB, prefix string, v any) {
	tb.Helper()
	p.stdin.Close()
	for {
		line, err := p.out.ReadString('\n')
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			require.NoError(tb, json.Unmarshal([]byte(rest), v))
		}
		if err != nil {
			break
		}
	}
	require.NoError(tb, p.cmd.Wait())
}

// hangingTarget is a /metrics target that takes connections and never
// answers: a scrape of it fails by its deadline, every time.
func hangingTarget(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String() + "/metrics"
}

// servicesDaemon starts `brownoutd serve` with the configuration src (a
// daemon of several services) and no cap of connections per client.
func servicesDaemon(tb testing.TB, src string) *daemon {
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "b.yaml")
	require.NoError(tb, os.WriteFile(cfg, []byte(src), 0o600))
	args := []string{"--listen", "127.0.0.1:0", "--state-dir", dir, "--config", cfg, "--max-conns-per-client", "0", "--log-level", "error"}
	return startDaemon(tb, args...)
}

// serviceState reads one service's state of a daemon of several.
func serviceState(tb testing.TB, base, svc string) api.StateJSON {
	tb.Helper()
	resp, err := http.Get(base + "/services/" + svc + "/v1/state")
	require.NoError(tb, err)
	defer resp.Body.Close()
	var st api.StateJSON
	require.NoError(tb, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// serviceHistory reads one service's history since since.
func serviceHistory(tb testing.TB, base, svc string, since time.Time) []api.Point {
	tb.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/services/%s/v1/history?since=%d", base, svc, since.UnixMilli()))
	require.NoError(tb, err)
	defer resp.Body.Close()
	var h struct{ Points []api.Point }
	require.NoError(tb, json.NewDecoder(resp.Body).Decode(&h))
	return h.Points
}

// loadRun is one run of a daemon of several services under a load: what
// each service's ticks and the daemon's process came to.
type loadRun struct {
	lagP99  map[string]time.Duration // by service, over its ticks
	ticks   map[string]uint64
	cpu     time.Duration // the daemon's process (this one), during the run
	pushCPU time.Duration // the pushers' process, during the run
	loadAvg string        // the machine's /proc/loadavg at the end
	control probeResult   // an idle process's ticks meanwhile (TestLagProbeProcess)
	elapsed time.Duration
	pushes  pushResult
	states  map[string]api.StateJSON
	history map[string][]api.Point // after the warm-up
}

// runLoad starts a daemon of src, runs l against it for d (after a warm-up
// of warm, not counted in the history), and reports.
func runLoad(tb testing.TB, src string, l fleetLoad, warm, d time.Duration, services ...string) loadRun {
	tb.Helper()
	dm := servicesDaemon(tb, src)
	l.URL = dm.base + "/v1/signals"
	p := startPushers(tb, l)
	probe := startChild(tb, "TestLagProbeProcess", probeEnv+"=1")
	time.Sleep(warm) // a real-time load: the pushers' first pushes arrive, the windows fill
	from := time.Now()
	cpu0 := load.SelfCPU()
	pcpu0, _ := load.ProcessCPU(p.cmd.Process.Pid)
	time.Sleep(d)
	run := loadRun{cpu: load.SelfCPU() - cpu0, elapsed: time.Since(from), lagP99: map[string]time.Duration{}, ticks: map[string]uint64{},
		states: map[string]api.StateJSON{}, history: map[string][]api.Point{}}
	pcpu, _ := load.ProcessCPU(p.cmd.Process.Pid)
	run.pushCPU = pcpu - pcpu0
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		run.loadAvg = strings.TrimSpace(string(b))
	}
	for _, s := range services {
		st := serviceState(tb, dm.base, s)
		run.states[s], run.lagP99[s], run.ticks[s] = st, time.Duration(st.Tick.LagP99*float64(time.Second)), st.Tick.Ticks
		run.history[s] = serviceHistory(tb, dm.base, s, from)
	}
	run.pushes = p.stop(tb)
	probe.report(tb, "probe: ", &run.control)
	dm.stop(tb)
	return run
}
