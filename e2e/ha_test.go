package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/pgtest"
	"github.com/brownout/brownout/internal/testsrv"
)

// The replicas' rig: brownoutd built once, a real PostgreSQL, replicas
// started and killed as processes; the apps on them (startApp) push
// their signals to every replica.

const haConfig = `tick: 1s
targets:
  - {signal: latency.p99, target: 300ms}
features:
  - {name: recommendations, cost: 4}
  - {name: reviews, cost: 2}
  - {name: gallery, cost: 1}
sources:
  push: {window: 5s}
`

type replica struct {
	name, addr string
	p          *proc
	stopped    bool // SIGSTOPped: its reads hang, leader skips it
}

type haRig struct {
	t     testing.TB
	bin   string
	cfg   string
	store string
	reps  []*replica
}

func newHARig(t testing.TB, store string) *haRig {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "../cmd/brownoutd")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	cfg := filepath.Join(dir, "brownoutd.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(haConfig), 0o644))
	return &haRig{t: t, bin: filepath.Join(dir, "brownoutd"), cfg: cfg, store: store}
}

// start starts replica name (again, on its address, when it ran before).
func (h *haRig) start(name string) *replica {
	h.t.Helper()
	var r *replica
	for _, x := range h.reps {
		if x.name == name {
			r = x
		}
	}
	if r == nil {
		r = &replica{name: name, addr: testsrv.FreeAddr(h.t)}
		h.reps = append(h.reps, r)
	}
	r.p = &proc{cmd: exec.Command(h.bin, "serve", "--config", h.cfg, "--listen", r.addr, "--store", h.store), out: &testsrv.Buffer{}}
	r.p.cmd.Env = append(os.Environ(), "BROWNOUTD_REPLICA="+name)
	r.p.cmd.Stdout, r.p.cmd.Stderr = r.p.out, r.p.out
	require.NoError(h.t, r.p.cmd.Start())
	p := r.p
	h.t.Cleanup(p.kill)
	waitOK(h.t, "http://"+r.addr+"/readyz", r.p)
	return r
}

// haState is what the test reads of /v1/state.
type haState struct {
	Boot       int64  `json:"boot"`
	Generation uint64 `json:"generation"`
	Mode       string `json:"mode"`
	Frozen     bool   `json:"frozen"`
	// Time is the law's step's; Brightness its output; Action what it
	// did (hold, dim, brighten, shed).
	Time       time.Time `json:"time"`
	Brightness float64   `json:"brightness"`
	Action     string    `json:"action"`
	Reason     string    `json:"reason"`
	Features   []struct {
		Name     string  `json:"name"`
		Level    float64 `json:"level"`
		Override *struct {
			Level  float64 `json:"level"`
			Reason string  `json:"reason"`
		} `json:"override"`
	} `json:"features"`
	Cluster struct {
		Replica, Role, Leader, Store string
		Term                         uint64
		ConfigMismatch               []string `json:"config_mismatch"`
	} `json:"cluster"`
}

func (s haState) level(name string) float64 {
	for _, f := range s.Features {
		if f.Name == name {
			return f.Level
		}
	}
	return -1
}

func (s haState) override(name string) string {
	for _, f := range s.Features {
		if f.Name == name && f.Override != nil {
			return f.Override.Reason
		}
	}
	return ""
}

func (r *replica) state() (haState, error) { return r.stateAt("") }

// stateAt reads the /v1/state under prefix: "" for a daemon of one
// service, "/services/{name}" for one of several.
func (r *replica) stateAt(prefix string) (haState, error) {
	var s haState
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + r.addr + prefix + "/v1/state")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return s, fmt.Errorf("%s: %s", r.addr, resp.Status)
	}
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// until polls cond every 20 ms for at most d and says how long it took.
func until(d time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < d {
		if cond() {
			return time.Since(start), true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start), false
}

// leader waits for a replica to lead (among the running ones) and
// returns it with the other running ones.
func (h *haRig) leader(d time.Duration) (lead *replica, others []*replica, took time.Duration) {
	h.t.Helper()
	return h.leaderOf("", d)
}

// leaderOf is leader for the service under prefix ("/services/{name}").
func (h *haRig) leaderOf(prefix string, d time.Duration) (lead *replica, others []*replica, took time.Duration) {
	h.t.Helper()
	took, ok := until(d, func() bool {
		lead, others = nil, nil
		for _, r := range h.reps {
			if r.p.cmd.ProcessState != nil || r.stopped {
				continue
			}
			if s, err := r.stateAt(prefix); err == nil && s.Cluster.Role == "leader" {
				lead = r
			} else {
				others = append(others, r)
			}
		}
		return lead != nil
	})
	require.True(h.t, ok, "no replica leads %s after %v", prefix, d)
	return lead, others, took
}

// write sends an operator's write; it returns the status and the body.
func (r *replica) write(method, path, body string) (int, map[string]any) {
	req, _ := http.NewRequest(method, "http://"+r.addr+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, map[string]any{"error": err.Error()}
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	m["content-type"] = resp.Header.Get("Content-Type")
	return resp.StatusCode, m
}

// bulk evaluates every flag of the service under prefix ("" or
// "/services/{name}") over OFREP with etag as If-None-Match; it returns
// the status, the ETag and the levels answered.
func (r *replica) bulk(prefix, etag string) (int, string, map[string]any) {
	req, _ := http.NewRequest("POST", "http://"+r.addr+prefix+"/ofrep/v1/evaluate/flags", strings.NewReader(`{"context":{"targetingKey":"user-7"}}`))
	req.Header.Set("Content-Type", "application/json")
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", nil
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, resp.Header.Get("ETag"), m
}

// streamLog is what follow recorded of a stream: each event's type and
// id, and its data.
type streamLog struct {
	mu     sync.Mutex
	events []string // "type id"
	data   []string // events[i]'s data
	ended  bool
}

// follow follows r's /v1/stream and records each event until ctx ends or
// the stream does.
func follow(ctx context.Context, r *replica, log *streamLog) { followAt(ctx, r, "", log) }

// followAt follows the stream of the service under prefix ("" or
// "/services/{name}").
func followAt(ctx context.Context, r *replica, prefix string, log *streamLog) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+r.addr+prefix+"/v1/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var id, ev, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev = line[7:]
		case strings.HasPrefix(line, "data: "):
			data += line[6:]
		case line == "":
			if ev != "" {
				log.mu.Lock()
				log.events = append(log.events, ev+" "+id)
				log.data = append(log.data, data)
				log.mu.Unlock()
			}
			id, ev, data = "", "", ""
		}
	}
	log.mu.Lock()
	log.ended = ctx.Err() == nil
	log.mu.Unlock()
}

// TestFailoverTimes measures the failover BROWNOUT_FAILOVER_KILLS times
// each way (at least 10 for a figure; skipped when unset), with an app on
// both replicas (startApp: the root package, both URLs, its overload
// pushed to each): the leader SIGKILLed at a random point of its tick,
// then, as many times, the leader SIGSTOPped for longer than the lease
// and SIGCONTed once another leads. For each: the takeover (from the
// signal to another replica saying it leads), and at the app the time
// its provider said stale and its time in the dark (until it followed,
// not stale, a replica still running). It logs every figure, the medians
// and the maxima.
//
//	BROWNOUT_FAILOVER_KILLS=10 go test ./e2e -run '^TestFailoverTimes$' -count=1 -v
func TestFailoverTimes(t *testing.T) {
	kills, _ := strconv.Atoi(os.Getenv("BROWNOUT_FAILOVER_KILLS"))
	if kills <= 0 {
		t.Skip("a measurement: set BROWNOUT_FAILOVER_KILLS")
	}
	srv := pgtest.StartServer(t)
	h := newHARig(t, srv.DSN)
	a, b := h.start("a"), h.start("b")
	app := startApp(t, []string{a.url(), b.url()})
	require.True(t, app.until(30*time.Second, func(s appSample) bool {
		return s.mode != "stale" && s.levels["recommendations"] < 1
	}), "the overload dims the app's levels")
	report := func(what string, fs []failover) {
		var b bytes.Buffer
		for _, f := range fs {
			fmt.Fprintf(&b, "\n  %s of %s, the app on %s: takeover %.2f s, app stale %.2f s, app in the dark %.2f s",
				what, f.victim.name, f.appFollowed, f.takeover.Seconds(), f.appStale.Seconds(), f.appDark.Seconds())
		}
		t.Logf("%s × %d:%s", what, len(fs), b.String())
		for _, m := range []struct {
			name string
			get  func(failover) time.Duration
		}{{"takeover", func(f failover) time.Duration { return f.takeover }},
			{"app stale", func(f failover) time.Duration { return f.appStale }},
			{"app in the dark", func(f failover) time.Duration { return f.appDark }}} {
			ds := make([]time.Duration, len(fs))
			for i, f := range fs {
				ds[i] = m.get(f)
			}
			slices.Sort(ds)
			median := (ds[(len(ds)-1)/2] + ds[len(ds)/2]) / 2
			t.Logf("%s, %s: median %.2f s, max %.2f s", what, m.name, median.Seconds(), ds[len(ds)-1].Seconds())
		}
	}
	var killed, stopped []failover
	for i := range kills {
		h.leader(10 * time.Second)
		app.pushesTaken(15 * time.Second) // the next leader's windows are warm
		// At a random point of the leader's tick.
		time.Sleep(time.Duration(300+i*137%700) * time.Millisecond)
		f := h.loseLeader(app, syscall.SIGKILL)
		t.Logf("kill %d: %v", i+1, f)
		killed = append(killed, f)
		h.start(f.victim.name)
		_, ok := until(5*time.Second, func() bool {
			s, err := f.victim.state()
			return err == nil && s.Cluster.Role == "follower"
		})
		require.True(t, ok, "the killed replica is back as a follower")
	}
	for i := range kills {
		h.leader(10 * time.Second)
		app.pushesTaken(15 * time.Second)
		time.Sleep(time.Duration(300+i*137%700) * time.Millisecond)
		f := h.loseLeader(app, syscall.SIGSTOP)
		t.Logf("pause %d: %v", i+1, f)
		stopped = append(stopped, f)
		f.victim.signal(t, syscall.SIGCONT)
		_, ok := until(5*time.Second, func() bool {
			s, err := f.victim.state()
			return err == nil && s.Cluster.Role == "follower"
		})
		require.True(t, ok, "the woken replica follows")
	}
	report("SIGKILL", killed)
	report("SIGSTOP", stopped)
}
