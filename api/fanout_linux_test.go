//go:build linux

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
	"net/netip"
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

// BenchmarkStreamFanoutProcess: 10 000 clients (BROWNOUT_FANOUT_CLIENTS)
// follow /v1/stream over 127.0.0.1 from a child process (this test
// binary again, fanoutChild) while the control loop ticks every second
// (the daemon's default: every tick is a "tick" event to every client).
// The server is the daemon's: server.New on a server.Listener, the API's
// streams owning their connections (Config.OwnStreamConns), with the
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
// same span.
//
// The anchor, run first, is the least a server can do on this machine:
// as many changes of the same size to as many followers of the same
// child, each connection a goroutine woken by a channel that writes the
// bytes to its socket, without HTTP's framing, ticks or bounds
// (bareStreams). Run with -benchtime 1x; nothing here asserts a time.
func BenchmarkStreamFanoutProcess(b *testing.B) {
	clients := envInt("BROWNOUT_FANOUT_CLIENTS", 10000)
	changes := envInt("BROWNOUT_FANOUT_CHANGES", 10)
	if err := raiseNoFile(uint64(clients + 1024)); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		bare := bareFanoutRun(b, clients, changes)
		b.Logf("anchor, %d bare followers: connected in %v; delivery p50 %v, p99 %v, max %v; %d missed; CPU per event delivered: server %v, clients %v",
			clients, bare.connect.Round(time.Millisecond), bare.p50, bare.p99, bare.max, bare.missed, bare.serverCPU, bare.clientCPU)
		r := fanoutRun(b, clients, changes)
		b.Logf("%d clients connected and had their first state in %v; %d changes: delivery p50 %v, p99 %v, max %v from publication; %d missed; the writes published %v after they were sent (max); tick lag p99 %.1f ms; CPU per event delivered: server %v, clients %v",
			clients, r.connect.Round(time.Millisecond), changes, r.p50, r.p99, r.max, r.missed, r.writeToPublish, r.tickLagP99, r.serverCPU, r.clientCPU)
		b.ReportMetric(r.connect.Seconds(), "connect-s")
		b.ReportMetric(float64(r.p50)/1e6, "p50-ms")
		b.ReportMetric(float64(r.p99)/1e6, "p99-ms")
		b.ReportMetric(float64(r.max)/1e6, "max-ms")
		b.ReportMetric(float64(r.missed+bare.missed), "missed")
		b.ReportMetric(r.tickLagP99, "tick-lag-p99-ms")
		b.ReportMetric(float64(r.serverCPU)/1e3, "server-cpu-us/event")
		b.ReportMetric(float64(r.clientCPU)/1e3, "client-cpu-us/event")
		b.ReportMetric(float64(bare.p99)/1e6, "bare-p99-ms")
		b.ReportMetric(float64(r.p99)/float64(bare.p99), "x-bare-p99")
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
	a, err := New(Config{Controller: ctl, Loopback: true, MaxStreams: clients + 64, OwnStreamConns: true})
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
	// The publications: a state's Time is when the controller published
	// it (an operator's write stamps it as it publishes).
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
				pubMu.Lock()
				published[a.eventID(st.Generation)] = st.Time
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
	fs := startFollowers(b, addr, clients)
	defer fs.stop()
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
	got, childCPU := fs.report(b)
	pubMu.Lock()
	r := deliveries(b, ids, published, got, clients)
	pubMu.Unlock()
	r.connect, r.writeToPublish, r.tickLagP99 = fs.connect, writeToPublish, 1000*a.hist.lagP99()
	r.serverCPU, r.clientCPU = cpu/time.Duration(fanouts*clients), childCPU/time.Duration(fanouts*clients)
	return r
}

// deliveries times each change's arrivals (got) from its publication.
func deliveries(b *testing.B, ids []string, published map[string]time.Time, got map[string][]int64, clients int) fanoutResult {
	var r fanoutResult
	var lat []time.Duration
	for _, id := range ids {
		r.missed += clients - len(got[id])
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
	if len(lat) == 0 {
		b.Fatal("nothing delivered")
	}
	slices.Sort(lat)
	r.p50, r.p99, r.max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	return r
}

// followers is the followers' process (fanoutChild).
type followers struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	connect time.Duration // until every one had its first state
}

// startFollowers starts clients followers of addr's /v1/stream and waits
// until every one has its first state.
func startFollowers(b *testing.B, addr string, clients int) *followers {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fanoutChildEnv+"="+addr+","+strconv.Itoa(clients))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	fs := &followers{cmd: cmd, in: in, out: bufio.NewReader(out)}
	line, err := fs.out.ReadString('\n')
	if err != nil {
		fs.stop()
		b.Fatalf("followers: %v (%q)", err, line)
	}
	var ns int64
	if _, err := fmt.Sscanf(line, "ready %d", &ns); err != nil {
		fs.stop()
		b.Fatalf("followers: %q", line)
	}
	fs.connect = time.Duration(ns)
	return fs
}

// report ends the followers and returns their arrivals (id → Unix
// nanoseconds) and their CPU time since they were ready.
func (fs *followers) report(b *testing.B) (map[string][]int64, time.Duration) {
	fs.in.Close()
	var rep struct {
		Got map[string][]int64
		CPU time.Duration
	}
	if err := json.NewDecoder(fs.out).Decode(&rep); err != nil {
		b.Fatalf("followers' report: %v", err)
	}
	return rep.Got, rep.CPU
}

func (fs *followers) stop() {
	fs.in.Close()
	fs.cmd.Process.Kill()
	fs.cmd.Wait()
}

// bareFanoutRun is the anchor: changes events the size of the daemon's
// state event to clients followers of a bareStreams, 700 ms apart, each
// timed from the moment the server starts giving it out.
func bareFanoutRun(b *testing.B, clients, changes int) fanoutResult {
	ctl := newController(b)
	a, err := New(Config{Controller: ctl})
	if err != nil {
		b.Fatal(err)
	}
	size := len(a.stateEvent())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	bs := &bareStreams{ln: ln}
	go bs.serve()
	defer bs.close()
	fs := startFollowers(b, ln.Addr().String(), clients)
	defer fs.stop()
	time.Sleep(2 * time.Second)
	cpu0 := cpuTime()
	published := map[string]time.Time{}
	var ids []string
	for i := range changes {
		id := "bare-" + strconv.Itoa(i+1)
		ev := []byte("id: " + id + "\nevent: state\ndata: ")
		ev = append(ev, bytes.Repeat([]byte("x"), max(size-len(ev)-2, 1))...)
		ev = append(ev, "\n\n"...)
		published[id] = time.Now()
		bs.send(ev)
		ids = append(ids, id)
		time.Sleep(700 * time.Millisecond)
	}
	time.Sleep(time.Second)
	cpu := cpuTime() - cpu0
	got, childCPU := fs.report(b)
	r := deliveries(b, ids, published, got, clients)
	r.connect = fs.connect
	r.serverCPU, r.clientCPU = cpu/time.Duration(changes*clients), childCPU/time.Duration(changes*clients)
	return r
}

// bareStreams serves every connection a stream of what send gives it:
// its request read to the blank line, a response's head, a first event,
// then each message written to the socket by the connection's own
// goroutine.
type bareStreams struct {
	ln     net.Listener
	mu     sync.Mutex
	subs   []chan []byte
	closed bool
	wg     sync.WaitGroup
}

func (bs *bareStreams) serve() {
	for {
		c, err := bs.ln.Accept()
		if err != nil {
			return
		}
		ch := make(chan []byte, 1)
		bs.wg.Go(func() {
			defer c.Close()
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					return
				}
				if len(line) <= 2 {
					break
				}
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nid: bare-0\n\n"); err != nil {
				return
			}
			bs.mu.Lock()
			if bs.closed {
				bs.mu.Unlock()
				return
			}
			bs.subs = append(bs.subs, ch)
			bs.mu.Unlock()
			for msg := range ch {
				if _, err := c.Write(msg); err != nil {
					return
				}
			}
		})
	}
}

// send gives msg to every connection (a full one keeps what it has).
func (bs *bareStreams) send(msg []byte) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for _, ch := range bs.subs {
		select {
		case ch <- msg:
		default:
		}
	}
}

func (bs *bareStreams) close() {
	bs.ln.Close()
	bs.mu.Lock()
	for _, ch := range bs.subs {
		close(ch)
	}
	bs.subs, bs.closed = nil, true
	bs.mu.Unlock()
	bs.wg.Wait()
}

// fanoutChildEnv is "<address>,<clients>" in the followers' process.
const fanoutChildEnv = "BROWNOUT_FANOUT_CHILD"

// fanoutChild opens the clients' streams (64 connecting at a time),
// prints "ready <nanoseconds>" once every one has its first state, records
// when each later state's id arrives at each client, and when in ends
// prints the arrivals as JSON (id → Unix nanoseconds) with its CPU time
// meanwhile, and returns its exit code. The clients are raw sockets read
// by one epoll loop: a goroutine per client, Go's netpoller between,
// cost 6–7 µs of CPU a delivery, taken from the cores the server shares
// with it, where the loop costs 3–5 µs.
func fanoutChild(spec string, in io.Reader, out, errs io.Writer) int {
	host, n, _ := strings.Cut(spec, ",")
	clients, err := strconv.Atoi(n)
	ap, err2 := netip.ParseAddrPort(host)
	if err != nil || err2 != nil || !ap.Addr().Is4() {
		fmt.Fprintln(errs, "fanout child: want <ipv4:port>,<clients>:", spec)
		return 2
	}
	if err := raiseNoFile(uint64(clients + 64)); err != nil {
		fmt.Fprintln(errs, "fanout child:", err)
		return 1
	}
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		fmt.Fprintln(errs, "fanout child: epoll:", err)
		return 1
	}
	defer syscall.Close(ep)
	fs := make([]follower, clients)
	for i := range fs {
		fs[i].fd = -1
	}
	defer func() {
		for _, f := range fs {
			if f.fd >= 0 {
				syscall.Close(f.fd)
			}
		}
	}()
	start := time.Now()
	req := []byte("GET /v1/stream HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
	sa := &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	next := make(chan int)
	var dialers sync.WaitGroup
	var failed atomic.Pointer[error]
	for range 64 {
		dialers.Go(func() {
			for i := range next {
				if err := fs[i].open(ep, i, sa, req); err != nil {
					err = fmt.Errorf("client %d: %w", i, err)
					failed.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	go func() {
		for i := range clients {
			next <- i
		}
		close(next)
	}()

	var stop atomic.Bool
	ready := make(chan struct{})
	loopDone := make(chan int64) // the streams that ended before their first state
	go func() {
		lost := int64(0)
		firsts := 0
		events := make([]syscall.EpollEvent, 256)
		buf := make([]byte, 64<<10)
		for !stop.Load() {
			n, err := syscall.EpollWait(ep, events, 100)
			if err != nil {
				if err == syscall.EINTR {
					continue
				}
				break
			}
			for _, ev := range events[:n] {
				f := &fs[ev.Fd]
				m, err := syscall.Read(f.fd, buf)
				if m <= 0 {
					if err == syscall.EAGAIN || err == syscall.EINTR {
						continue
					}
					syscall.EpollCtl(ep, syscall.EPOLL_CTL_DEL, f.fd, nil)
					if !f.first {
						lost++
						f.first = true
						if firsts++; firsts == clients {
							close(ready)
						}
					}
					continue
				}
				wasFirst := f.first
				f.read(buf[:m], time.Now().UnixNano())
				if !wasFirst && f.first {
					if firsts++; firsts == clients {
						close(ready)
					}
				}
			}
		}
		loopDone <- lost
	}()
	dialers.Wait()
	if err := failed.Load(); err != nil {
		stop.Store(true)
		<-loopDone
		fmt.Fprintln(errs, "fanout child:", *err)
		return 1
	}
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		stop.Store(true)
		<-loopDone
		fmt.Fprintln(errs, "fanout child: not every client had its first state after 2 minutes")
		return 1
	}
	fmt.Fprintf(out, "ready %d\n", time.Since(start).Nanoseconds())
	cpu0 := cpuTime()
	io.Copy(io.Discard, in)
	cpu := cpuTime() - cpu0
	stop.Store(true)
	if lost := <-loopDone; lost > 0 {
		fmt.Fprintf(errs, "fanout child: %d streams ended before their first state\n", lost)
		return 1
	}
	report := map[string][]int64{}
	for _, f := range fs {
		for _, a := range f.got {
			report[a.id] = append(report[a.id], a.at)
		}
	}
	if err := json.NewEncoder(out).Encode(map[string]any{"got": report, "cpu": cpu}); err != nil {
		return 1
	}
	return 0
}

// follower is one client's socket and what it read.
type follower struct {
	fd    int
	first bool   // its first state came
	tail  []byte // the start of a line not yet ended: a short one
	skip  bool   // in a long line (not an id's)
	got   []arrival
}

type arrival struct {
	id string
	at int64 // Unix nanoseconds
}

// open connects f (blocking), sends the stream's request and adds the
// socket, non-blocking, to the epoll set as client i.
func (f *follower) open(ep, i int, sa syscall.Sockaddr, req []byte) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f.fd = fd
	if err := syscall.Connect(fd, sa); err != nil {
		return err
	}
	if _, err := syscall.Write(fd, req); err != nil {
		return err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		return err
	}
	return syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(i)})
}

// read takes the bytes read at at: each line "id: …" is a state's
// arrival (the first one the state on connect).
func (f *follower) read(b []byte, at int64) {
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			if !f.skip && len(f.tail)+len(b) <= 64 {
				f.tail = append(f.tail, b...)
			} else {
				f.tail, f.skip = f.tail[:0], true
			}
			return
		}
		line := b[:nl]
		if len(f.tail) > 0 {
			line = append(f.tail, line...)
		}
		if !f.skip {
			if id, ok := bytes.CutPrefix(line, []byte("id: ")); ok {
				if !f.first {
					f.first = true
				} else {
					f.got = append(f.got, arrival{string(bytes.TrimSpace(id)), at})
				}
			}
		}
		f.tail, f.skip = f.tail[:0], false
		b = b[nl+1:]
	}
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
