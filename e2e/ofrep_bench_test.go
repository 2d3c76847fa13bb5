package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/brownout/brownout/internal/pgtest"
	"github.com/brownout/brownout/internal/race"
)

// BenchmarkReplicasOFREP: single-flag OFREP evaluations (POST
// /ofrep/v1/evaluate/flags/recommendations, 64 users' contexts in turn)
// against two brownoutd replicas on a real PostgreSQL, from a closed loop
// in a child process (this test binary again, loadChild): 64 keep-alive
// connections (BROWNOUT_OFREP_CONNS) over 127.0.0.1, each sending its
// next request when the last is answered, for 10 s
// (BROWNOUT_OFREP_SECONDS) after 1 s of warm-up. First every connection
// on one replica (the anchor), then half on each. It reports the
// answered rate and its p50 and p99 for each, the ratio of two to one,
// the replicas' CPU per request, and the database's transactions
// (pg_stat_database: xact_commit + xact_rollback) during each load
// beside those of as long a span without load (the leader's tick and the
// follower's read of it): reads make no round trip to the database when
// the two are alike. Run with -benchtime 1x; nothing here asserts a time.
//
//	go test ./e2e -run '^$' -bench ReplicasOFREP -benchtime 1x -v
func BenchmarkReplicasOFREP(b *testing.B) {
	if race.Enabled {
		b.Skip("a measurement: without -race")
	}
	conns := envInt("BROWNOUT_OFREP_CONNS", 64)
	seconds := envInt("BROWNOUT_OFREP_SECONDS", 10)
	for b.Loop() {
		dsn := pgtest.Start(b)
		h := newHARig(b, dsn)
		ra, rb := h.start("a"), h.start("b")
		lead, _, _ := h.leader(10 * time.Second)
		b.Logf("%s leads", lead.name)
		db, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close(context.Background())
		xacts := func() int64 {
			var n int64
			if err := db.QueryRow(context.Background(), `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			return n
		}
		d := time.Duration(seconds) * time.Second
		// The database without reads, for as long as a load lasts.
		x0 := xacts()
		time.Sleep(d)
		idle := xacts() - x0

		phase := func(reps ...*replica) loadPhase {
			var urls []string
			for _, r := range reps {
				urls = append(urls, "http://"+r.addr)
			}
			x0 := xacts()
			res := runLoad(b, loadSpec{URLs: urls, Conns: conns, Warmup: time.Second, Duration: d,
				PIDs: []int{ra.p.cmd.Process.Pid, rb.p.cmd.Process.Pid}})
			p := loadPhase{loadResult: res, xacts: xacts() - x0}
			if res.Errors > 0 || res.Requests == 0 {
				b.Fatalf("%d requests, %d errors: %s", res.Requests, res.Errors, res.FirstError)
			}
			return p
		}
		one := phase(ra)
		two := phase(ra, rb)
		for _, x := range []struct {
			name string
			p    loadPhase
		}{{"one replica", one}, {"two replicas", two}} {
			b.Logf("%s: %.0f req/s (%v), p50 %v, p99 %v; %d requests, %d database transactions meanwhile (%d in as long without load); replicas' CPU %.1f µs a request, the load's %.1f µs",
				x.name, x.p.rate(), x.p.ByURL, x.p.P50, x.p.P99, x.p.Requests, x.p.xacts, idle,
				float64(x.p.ServerCPU.Microseconds())/float64(x.p.Requests), float64(x.p.CPU.Microseconds())/float64(x.p.Requests))
		}
		b.ReportMetric(two.rate(), "req/s")
		b.ReportMetric(float64(two.P99.Microseconds())/1e3, "p99-ms")
		b.ReportMetric(one.rate(), "req/s-one")
		b.ReportMetric(float64(one.P99.Microseconds())/1e3, "p99-ms-one")
		b.ReportMetric(two.rate()/one.rate(), "x-one")
		b.ReportMetric(float64(two.xacts), "db-xacts")
		b.ReportMetric(float64(idle), "db-xacts-idle")
	}
}

// loadPhase is one load's result with the database's transactions
// meanwhile.
type loadPhase struct {
	loadResult
	xacts int64
}

func (p loadPhase) rate() float64 { return float64(p.Requests) / p.Elapsed.Seconds() }

// procCPU is the CPU time (user and system) of the processes pids so
// far, to the 10 ms (Linux's clock ticks), 0 where /proc cannot tell.
func procCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis, from the
		// state (the 3rd): utime and stime are the 14th and 15th.
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		sum += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return sum
}

// envInt reads a positive integer from the environment, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// loadChildEnv holds the load's loadSpec (JSON) in the child process.
const loadChildEnv = "BROWNOUT_OFREP_LOAD"

// loadSpec is what the child sends: to URLs (the connections spread
// evenly), Conns connections, Duration measured after Warmup; PIDs are
// the servers' processes, whose CPU time it measures over the same span.
type loadSpec struct {
	URLs     []string
	Conns    int
	Warmup   time.Duration
	Duration time.Duration
	PIDs     []int
}

// loadResult is what the child reports of the measured span.
type loadResult struct {
	Requests   int64
	Errors     int64
	FirstError string
	ByURL      map[string]int64
	P50, P99   time.Duration
	Max        time.Duration
	Elapsed    time.Duration
	CPU        time.Duration // the child's own
	ServerCPU  time.Duration // the PIDs'
}

// runLoad runs the load in a child process and returns its report.
func runLoad(b *testing.B, spec loadSpec) loadResult {
	js, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), loadChildEnv+"="+string(js))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("load: %v\n%s", err, out.String())
	}
	var r loadResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		b.Fatalf("load's report: %v\n%s", err, out.String())
	}
	return r
}

// loadChild sends spec's load and prints its loadResult as JSON.
func loadChild(spec string, out, errs io.Writer) int {
	var s loadSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil || len(s.URLs) == 0 || s.Conns <= 0 {
		fmt.Fprintln(errs, "load child: bad spec:", spec, err)
		return 2
	}
	type worker struct {
		url      string
		lat      []time.Duration
		requests int64
		errors   int64
		err      error
	}
	ws := make([]*worker, s.Conns)
	start := time.Now()
	measureFrom, end := start.Add(s.Warmup), start.Add(s.Warmup+s.Duration)
	var wg sync.WaitGroup
	for i := range ws {
		w := &worker{url: s.URLs[i%len(s.URLs)], lat: make([]time.Duration, 0, 1<<14)}
		ws[i] = w
		wg.Go(func() {
			c, err := dialOFREP(w.url, i)
			if err != nil {
				w.errors, w.err = 1, err
				return
			}
			defer c.close()
			for {
				t := time.Now()
				if t.After(end) {
					return
				}
				err := c.do()
				if t.Before(measureFrom) {
					if err != nil {
						w.errors, w.err = 1, err
						return
					}
					continue
				}
				if err != nil {
					w.errors++
					w.err = err
					if c, err = dialOFREP(w.url, i); err != nil {
						return
					}
					continue
				}
				w.requests++
				w.lat = append(w.lat, time.Since(t))
			}
		})
	}
	time.Sleep(time.Until(measureFrom))
	cpu0, server0 := childCPU(), procCPU(s.PIDs)
	time.Sleep(time.Until(end))
	cpu, server := childCPU()-cpu0, procCPU(s.PIDs)-server0
	wg.Wait()
	r := loadResult{ByURL: map[string]int64{}, Elapsed: time.Since(measureFrom), CPU: cpu, ServerCPU: server}
	if r.Elapsed > s.Duration {
		r.Elapsed = s.Duration // the last answers came in after end; their requests were sent before it
	}
	var all []time.Duration
	for _, w := range ws {
		r.Requests += w.requests
		r.Errors += w.errors
		r.ByURL[w.url] += w.requests
		if w.err != nil && r.FirstError == "" {
			r.FirstError = w.err.Error()
		}
		all = append(all, w.lat...)
	}
	if len(all) > 0 {
		slices.Sort(all)
		r.P50, r.P99, r.Max = all[len(all)/2], all[len(all)*99/100], all[len(all)-1]
	}
	if err := json.NewEncoder(out).Encode(r); err != nil {
		return 1
	}
	return 0
}

func childCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ofrepConn is one keep-alive HTTP/1.1 connection sending single-flag
// evaluations, written and read by hand: net/http's client would cost the
// load more CPU than the replicas' answers on a 2-core machine.
type ofrepConn struct {
	c        net.Conn
	r        *bufio.Reader
	reqs     [][]byte // one per user, in turn
	next     int
	deadline time.Time // moved on every few seconds, not per request
	checked  bool      // the first answer's body was read
}

func dialOFREP(base string, seed int) (*ofrepConn, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		return nil, err
	}
	o := &ofrepConn{c: c, r: bufio.NewReaderSize(c, 4096), next: seed}
	for i := range 64 {
		body := fmt.Sprintf(`{"context":{"targetingKey":"user-%d","segment":"vip"}}`, 1000+i)
		o.reqs = append(o.reqs, []byte(fmt.Sprintf("POST /ofrep/v1/evaluate/flags/recommendations HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.Host, len(body), body)))
	}
	return o, nil
}

func (o *ofrepConn) close() { o.c.Close() }

var errAnswer = errors.New("load: not a 200 with a Content-Length")

// do sends the next request and reads its answer: 200 with a
// Content-Length, or an error.
func (o *ofrepConn) do() error {
	if now := time.Now(); o.deadline.Sub(now) < 5*time.Second {
		o.deadline = now.Add(10 * time.Second)
		o.c.SetDeadline(o.deadline)
	}
	req := o.reqs[o.next%len(o.reqs)]
	o.next++
	if _, err := o.c.Write(req); err != nil {
		return err
	}
	line, err := o.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("%w: %q", errAnswer, line)
	}
	n := -1
	for {
		line, err = o.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if n < 0 {
		return errAnswer
	}
	if !o.checked { // an evaluation, not only a 200
		body := make([]byte, n)
		if _, err := io.ReadFull(o.r, body); err != nil {
			return err
		}
		var ev struct {
			Key   string
			Value *bool
		}
		if err := json.Unmarshal(body, &ev); err != nil || ev.Key != "recommendations" || ev.Value == nil {
			return fmt.Errorf("load: not an evaluation of recommendations: %s", body)
		}
		o.checked = true
		return nil
	}
	_, err = o.r.Discard(n)
	return err
}
