package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/server"
	"github.com/brownout/brownout/signals"
)

// BenchmarkStreamFanout: 1000 clients follow /v1/stream over 127.0.0.1
// while the control loop ticks every 100 ms; each of 10 published changes
// is timed from its publication to its arrival at every client. Reports
// the p99 and max delivery time and the tick's lag p99 meanwhile. Run
// with -benchtime 1x.
func BenchmarkStreamFanout(b *testing.B) {
	const clients, changes = 1000, 10
	for b.Loop() {
		ctl, err := dimmer.New(dimmer.Config{Tick: 100 * time.Millisecond,
			Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
			Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}, {Name: "gallery", Rank: 2}}})
		if err != nil {
			b.Fatal(err)
		}
		a, err := New(Config{Controller: ctl})
		if err != nil {
			b.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: a.Handler()}
		go srv.Serve(ln)
		ctx, cancel := context.WithCancel(context.Background())
		// The loop ticks on a quiet source (nothing changes by itself).
		go a.Run(ctx, sourceFunc(func(ctx context.Context, now time.Time) (signals.Snapshot, error) {
			var s signals.Snapshot
			s.Time = now
			s.Set(signals.LatencyP99, 0.5)
			return s, nil
		}))

		var mu sync.Mutex
		got := map[string][]time.Time{} // event id → arrival times
		var ready sync.WaitGroup
		ready.Add(clients)
		for range clients {
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			conn.Write([]byte("GET /v1/stream HTTP/1.1\r\nHost: x\r\n\r\n"))
			go func() {
				sc := bufio.NewScanner(conn)
				first := true
				for sc.Scan() {
					line := sc.Text()
					if id, ok := strings.CutPrefix(line, "id: "); ok {
						now := time.Now()
						if first {
							first = false
							ready.Done()
							continue
						}
						mu.Lock()
						got[id] = append(got[id], now)
						mu.Unlock()
					}
				}
			}()
		}
		ready.Wait()
		published := map[string]time.Time{}
		for i := range changes {
			// Every change publishes (an operator's pin, level alternating);
			// the loop's subscription fans it out.
			st, err := ctl.Pin("reviews", []float64{0.3, 0.6}[i%2], time.Hour, "fan-out test")
			if err != nil {
				b.Fatal(err)
			}
			published[a.eventID(st.Generation)] = time.Now()
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		var lat []time.Duration
		missing := 0
		mu.Lock()
		for id, at := range published {
			missing += clients - len(got[id])
			for _, t := range got[id] {
				lat = append(lat, t.Sub(at))
			}
		}
		mu.Unlock()
		slices.Sort(lat)
		if len(lat) == 0 {
			b.Fatal("nothing delivered")
		}
		p99 := lat[len(lat)*99/100]
		b.ReportMetric(float64(p99)/1e6, "p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1])/1e6, "max-ms")
		b.ReportMetric(float64(missing), "missed")
		b.ReportMetric(1000*a.hist.lagP99(), "tick-lag-p99-ms")
		cancel()
		a.Shutdown()
		srv.Close()
	}
}

// BenchmarkStreamFanoutProcess: 10 000 clients (BROWNOUT_FANOUT_CLIENTS)
// follow /v1/stream over 127.0.0.1 from a child process (this test
// binary again, fanoutChild) while the control loop ticks every second
// (the daemon's default: every tick is a "tick" event to every client).
// The server is the daemon's: server.New on a server.Listener, with the
// bounds raised for the run — Limits.MaxConns and Config.MaxStreams
// above the clients, no per-client cap (every loopback address is one
// client). Each of 10 operator writes (BROWNOUT_FANOUT_CHANGES; an
// override over HTTP, 700 ms apart) is timed from the moment the
// controller publishes it to its arrival at every client. It reports
// how long the clients took to connect and get their first state, the
// p50, p99 and max delivery times, the deliveries missed, the tick's lag
// p99, and each process's CPU time per event delivered (changes and
// ticks, from the first change to the last);
// BROWNOUT_FANOUT_PROFILE=file writes the server's CPU profile over the
// same span. Run with -benchtime 1x.
func BenchmarkStreamFanoutProcess(b *testing.B) {
	clients := envInt("BROWNOUT_FANOUT_CLIENTS", 10000)
	changes := envInt("BROWNOUT_FANOUT_CHANGES", 10)
	if err := raiseNoFile(uint64(clients + 1024)); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		r := fanoutRun(b, clients, changes)
		b.Logf("%d clients connected and had their first state in %v; %d changes: delivery p50 %v, p99 %v, max %v from publication; %d missed; the writes published %v after they were sent (max); tick lag p99 %.1f ms; CPU per event delivered: server %v, clients %v",
			clients, r.connect.Round(time.Millisecond), changes, r.p50, r.p99, r.max, r.missed, r.writeToPublish, r.tickLagP99, r.serverCPU, r.clientCPU)
		b.ReportMetric(r.connect.Seconds(), "connect-s")
		b.ReportMetric(float64(r.p50)/1e6, "p50-ms")
		b.ReportMetric(float64(r.p99)/1e6, "p99-ms")
		b.ReportMetric(float64(r.max)/1e6, "max-ms")
		b.ReportMetric(float64(r.missed), "missed")
		b.ReportMetric(r.tickLagP99, "tick-lag-p99-ms")
		b.ReportMetric(float64(r.serverCPU)/1e3, "server-cpu-us/event")
		b.ReportMetric(float64(r.clientCPU)/1e3, "client-cpu-us/event")
	}
}

type fanoutResult struct {
	connect, p50, p99, max, writeToPublish time.Duration
	missed                                 int
	tickLagP99                             float64
	// serverCPU and clientCPU: the processes' CPU time (user and
	// system) from the first change to the last, per event delivered
	// (the changes and the ticks, to every client).
	serverCPU, clientCPU time.Duration
}

// cpuTime is the CPU time (user and system) of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fanoutRun serves the API, starts the followers' process, makes the
// changes and times their deliveries.
func fanoutRun(b *testing.B, clients, changes int) fanoutResult {
	ctl, err := dimmer.New(dimmer.Config{Tick: time.Second,
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}, {Name: "gallery", Rank: 2}}})
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(Config{Controller: ctl, Loopback: true, MaxStreams: clients + 64})
	if err != nil {
		b.Fatal(err)
	}
	// MaxConns a quarter over the clients: from an eighth under it on,
	// the listener closes the connections idle the longest (a connection
	// that has not sent its request yet among them).
	ln, err := server.ListenWith("127.0.0.1:0", server.Limits{MaxConns: clients + clients/4 + 64, PerClient: -1})
	if err != nil {
		b.Fatal(err)
	}
	srv := server.New(a.Handler())
	go srv.Serve(ln)
	defer srv.Close()
	defer a.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The publications, as the API's loop sees them (its own
	// subscription to the controller).
	var pubMu sync.Mutex
	published := map[string]time.Time{}
	sub, stop := ctl.Subscribe()
	defer stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case st := <-sub:
				now := time.Now()
				pubMu.Lock()
				published[a.eventID(st.Generation)] = now
				pubMu.Unlock()
			}
		}
	}()
	go a.Run(ctx, sourceFunc(func(ctx context.Context, now time.Time) (signals.Snapshot, error) {
		var s signals.Snapshot
		s.Time = now
		s.Set(signals.LatencyP99, 0.5) // quiet: nothing changes by itself
		return s, nil
	}))

	addr := ln.Addr().String()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fanoutChildEnv+"="+addr+","+strconv.Itoa(clients))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	out := bufio.NewReader(outPipe)
	line, err := out.ReadString('\n')
	if err != nil {
		b.Fatalf("followers: %v (%q)", err, line)
	}
	var connectNS int64
	if _, err := fmt.Sscanf(line, "ready %d", &connectNS); err != nil {
		b.Fatalf("followers: %q", line)
	}
	if ours, _ := a.Streams(); ours != clients {
		b.Fatalf("the server follows %d streams, want %d", ours, clients)
	}
	time.Sleep(2 * time.Second) // past the connections' garbage
	cpu0, ticks0 := cpuTime(), a.hist.ticks()
	if f := os.Getenv("BROWNOUT_FANOUT_PROFILE"); f != "" {
		pf, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		pprof.StartCPUProfile(pf)
		defer pf.Close()
		defer pprof.StopCPUProfile()
	}

	// The operator's writes, on one keep-alive connection.
	hc := &http.Client{Timeout: 10 * time.Second}
	var writeToPublish time.Duration
	ids := make([]string, 0, changes)
	for i := range changes {
		body := fmt.Sprintf(`{"level":%v,"ttl":"1h","reason":"fan-out benchmark"}`, []float64{0.3, 0.6}[i%2])
		req, _ := http.NewRequest(http.MethodPut, "http://"+addr+"/v1/features/reviews/override", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		sent := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var w struct{ Generation uint64 }
		json.NewDecoder(resp.Body).Decode(&w)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("override: %s", resp.Status)
		}
		id := a.eventID(w.Generation)
		ids = append(ids, id)
		time.Sleep(700 * time.Millisecond) // at other points of the tick each time
		pubMu.Lock()
		at, ok := published[id]
		pubMu.Unlock()
		if !ok {
			b.Fatalf("generation %d was not published", w.Generation)
		}
		writeToPublish = max(writeToPublish, at.Sub(sent))
	}
	time.Sleep(time.Second)
	cpu, fanouts := cpuTime()-cpu0, changes+int(a.hist.ticks()-ticks0)
	in.Close() // the followers report and leave
	var rep struct {
		Got map[string][]int64
		CPU time.Duration // from ready to the report
	}
	if err := json.NewDecoder(out).Decode(&rep); err != nil {
		b.Fatalf("followers' report: %v", err)
	}
	got := rep.Got
	var lat []time.Duration
	missed := 0
	pubMu.Lock()
	for _, id := range ids {
		missed += clients - len(got[id])
		var one []time.Duration
		for _, t := range got[id] {
			one = append(one, time.Unix(0, t).Sub(published[id]))
		}
		slices.Sort(one)
		if len(one) > 0 {
			b.Logf("change %s: first %v, p50 %v, p99 %v, max %v", id, one[0], one[len(one)/2], one[len(one)*99/100], one[len(one)-1])
		}
		lat = append(lat, one...)
	}
	pubMu.Unlock()
	if len(lat) == 0 {
		b.Fatal("nothing delivered")
	}
	slices.Sort(lat)
	return fanoutResult{connect: time.Duration(connectNS), p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], max: lat[len(lat)-1],
		missed: missed, writeToPublish: writeToPublish, tickLagP99: 1000 * a.hist.lagP99(),
		serverCPU: cpu / time.Duration(fanouts*clients), clientCPU: rep.CPU / time.Duration(fanouts*clients)}
}

// fanoutChildEnv is "<address>,<clients>" in the followers' process.
const fanoutChildEnv = "BROWNOUT_FANOUT_CHILD"

// fanoutChild opens the clients' streams (64 at a time), prints "ready
// <nanoseconds>" once every one has its first state, records when each
// later state's id arrives at each client, and when in ends prints the
// arrivals as JSON (id → Unix nanoseconds) and returns its exit code.
func fanoutChild(spec string, in io.Reader, out, errs io.Writer) int {
	addr, n, _ := strings.Cut(spec, ",")
	clients, err := strconv.Atoi(n)
	if err != nil {
		fmt.Fprintln(errs, "fanout child:", spec, err)
		return 2
	}
	if err := raiseNoFile(uint64(clients + 64)); err != nil {
		fmt.Fprintln(errs, "fanout child:", err)
		return 1
	}
	type arrival struct {
		id string
		at int64
	}
	got := make([][]arrival, clients)
	conns := make([]net.Conn, clients)
	var ready, done sync.WaitGroup
	var lost atomic.Int64 // streams that ended before their first state
	ready.Add(clients)
	follow := func(i int, c net.Conn) {
		defer done.Done()
		r := bufio.NewReaderSize(c, 4096)
		first, atStart := true, true
		for {
			line, err := r.ReadSlice('\n')
			if err != nil && err != bufio.ErrBufferFull {
				if first {
					lost.Add(1)
					ready.Done()
				}
				return
			}
			if id, ok := bytes.CutPrefix(line, []byte("id: ")); ok && atStart && err == nil {
				if first {
					first = false
					ready.Done()
				} else {
					got[i] = append(got[i], arrival{string(bytes.TrimSpace(id)), time.Now().UnixNano()})
				}
			}
			atStart = err == nil
		}
	}
	start := time.Now()
	next := make(chan int)
	var dialers sync.WaitGroup
	failed := make(chan error, 1)
	for range 64 {
		dialers.Go(func() {
			for i := range next {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err == nil {
					_, err = io.WriteString(c, "GET /v1/stream HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
				}
				if err != nil {
					select {
					case failed <- fmt.Errorf("client %d: %w", i, err):
					default:
					}
					ready.Done()
					continue
				}
				conns[i] = c
				done.Add(1)
				go follow(i, c)
			}
		})
	}
	for i := range clients {
		next <- i
	}
	close(next)
	dialers.Wait()
	all := make(chan struct{})
	go func() { ready.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(2 * time.Minute):
		fmt.Fprintln(errs, "fanout child: not every client had its first state after 2 minutes")
		return 1
	}
	select {
	case err := <-failed:
		fmt.Fprintln(errs, "fanout child:", err)
		return 1
	default:
	}
	if n := lost.Load(); n > 0 {
		fmt.Fprintf(errs, "fanout child: %d streams ended before their first state\n", n)
		return 1
	}
	fmt.Fprintf(out, "ready %d\n", time.Since(start).Nanoseconds())
	cpu0 := cpuTime()
	io.Copy(io.Discard, in)
	cpu := cpuTime() - cpu0
	for _, c := range conns {
		c.Close()
	}
	done.Wait()
	report := map[string][]int64{}
	for _, as := range got {
		for _, a := range as {
			report[a.id] = append(report[a.id], a.at)
		}
	}
	if err := json.NewEncoder(out).Encode(map[string]any{"got": report, "cpu": cpu}); err != nil {
		return 1
	}
	return 0
}

// raiseNoFile raises the soft limit of open files to at least n, up to
// the hard limit (Go raises it to the hard limit at start on Linux; this
// says so when even that is too few).
func raiseNoFile(n uint64) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= n {
		return nil
	}
	if l.Max < n {
		return fmt.Errorf("%d open files needed, the hard limit is %d", n, l.Max)
	}
	l.Cur = l.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

// envInt reads a positive integer from the environment, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
