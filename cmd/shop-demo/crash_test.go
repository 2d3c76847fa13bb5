package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/shop"
	"github.com/brownout/brownout/shop/deps"
	"github.com/brownout/brownout/shop/store"
)

// childEnv makes the test binary the shop-demo command: TestMain runs
// main() with the arguments the test gave, so that TestCrashMidSale can
// SIGKILL a real `shop-demo serve` process (the same build, -race
// included) without a go build step.
const childEnv = "SHOP_DEMO_CRASH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main() // exits 1 or 2 on an error
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCrashMidSale is the issue's "kill the shop mid-sale (SIGKILL) and
// restart it: no order without its SMS, no SMS for an order that did not
// commit". The test process runs the payment gateway, the SMS provider and
// the recommendation engine, so that what they saw survives the shop; the
// shop is a child `shop-demo serve` on a state directory. Buyers check out
// concurrently, each with its own Idempotency-Key, retrying the same key
// when the connection fails (as a client whose answer was lost does) or
// the shop answers "not now" (409 in progress, 503 overloaded); the
// shop is killed with requests in flight and its outbox holding messages,
// then restarted on the same SQLite database. Once the outbox is empty,
// every order in the database has had its SMS delivered exactly once,
// and nothing else was delivered.
func TestCrashMidSale(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns shop processes and kills one: not under -short")
	}
	began := time.Now()

	sms := deps.NewSMSProvider(deps.Options{})
	pay := deps.NewPaymentGateway(deps.Options{})
	ids := make([]string, store.CatalogueSize)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	recs := deps.NewRecsEngine(deps.Options{}, ids)
	startDep := func(name string, start func(string) (*deps.Server, error)) string {
		srv, err := start("127.0.0.1:0")
		require.NoError(t, err, "starting the %s", name)
		t.Cleanup(func() { srv.Close() })
		return srv.URL
	}
	smsURL := startDep("SMS provider", sms.Start)
	payURL := startDep("payment gateway", pay.Start)
	recsURL := startDep("recommendation engine", recs.Start)

	dir := t.TempDir()
	args := []string{"serve", "--listen", "127.0.0.1:0", "--state", dir,
		"--payment", payURL, "--sms", smsURL, "--recs", recsURL}
	hc := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
			MaxIdleConnsPerHost: 16,
		},
	}
	t.Cleanup(hc.CloseIdleConnections)

	first := startShop(t, "first", args)
	var info shop.DepsInfo
	require.NoError(t, getJSON(hc, first.url+"/api/demo/deps", &info), "GET /api/demo/deps%s", first.tail())
	require.Equal(t, [3]string{payURL, smsURL, recsURL}, [3]string{info.Payment, info.SMS, info.Recs},
		"the shop uses the dependencies given by --payment, --sms and --recs")

	// The buyers. A key claimed by the killed shop answers 409 (in
	// progress) until its lease runs out; inProgressFor bounds how long a
	// buyer keeps retrying it. A 503 (the admission gate's refusal, or the
	// payment guard's) is no answer either: the claim, perhaps charged,
	// waits for a retry with its key (or for Reconcile, a minute later),
	// so the buyer retries it too, within the same bound.
	const buyers = 8
	const inProgressFor = store.Lease + 15*time.Second
	var (
		target    atomic.Pointer[string]
		stopNew   atomic.Bool  // no new checkouts
		giveUp    atomic.Int64 // unix ns after which a failing key is abandoned (0: never)
		killedAt  atomic.Int64 // unix ns of the SIGKILL (0: not yet)
		inFlight  atomic.Int64
		l         loadCounts
		wg        sync.WaitGroup
		acked     sync.Map // Idempotency-Key → order id, for every 201 or 200
		loadStart = time.Now()
	)
	target.Store(&first.url)
	for g := range buyers {
		wg.Go(func() {
			for i := 0; !stopNew.Load(); i++ {
				key := fmt.Sprintf("crash-%d-%d", g, i)
				for attempt := 0; ; attempt++ {
					if attempt > 0 {
						l.retries.Add(1)
					}
					url := *target.Load()
					startedAt := time.Now().UnixNano()
					inFlight.Add(1)
					status, order, err := checkout(hc, url, key)
					inFlight.Add(-1)
					if err != nil {
						l.transport.Add(1)
						if k := killedAt.Load(); k != 0 && startedAt < k && url == first.url {
							l.interrupted.Add(1) // sent before the kill, cut by it
						}
						if d := giveUp.Load(); d != 0 && time.Now().UnixNano() > d {
							l.abandoned.Add(1)
							break
						}
						time.Sleep(20 * time.Millisecond) // the shop is down: retry the same key
						continue
					}
					if status == http.StatusConflict && time.Since(loadStart) < inProgressFor {
						// The checkout under this key is in progress — the
						// killed shop's, until its lease runs out: retry
						// after the Retry-After, as a careful client does.
						l.inProgress.Add(1)
						time.Sleep(200 * time.Millisecond)
						continue
					}
					if status == http.StatusServiceUnavailable && time.Since(loadStart) < inProgressFor {
						// Refused for now (Retry-After: 1): retry the key.
						l.unavailable.Add(1)
						time.Sleep(time.Second)
						continue
					}
					switch status {
					case http.StatusCreated:
						l.created.Add(1)
						if url != first.url {
							l.createdAfter.Add(1)
						}
						acked.Store(key, order)
					case http.StatusOK:
						l.replayed.Add(1)
						acked.Store(key, order)
					default:
						l.refused(status)
					}
					break
				}
			}
		})
	}
	stopLoad := func() {
		stopNew.Store(true)
		giveUp.Store(time.Now().Add(10 * time.Second).UnixNano())
	}
	t.Cleanup(func() { // on an early failure: the buyers give up at once
		stopNew.Store(true)
		giveUp.Store(time.Now().UnixNano())
		wg.Wait()
	})

	// Mid-sale: once orders flow and at least half the sale's 1.5 s has
	// gone, with checkouts in flight, SIGKILL.
	deadline := time.Now().Add(15 * time.Second)
	for (l.created.Load() < 30 || time.Since(loadStart) < 750*time.Millisecond) && time.Now().Before(deadline) && !first.exited() {
		time.Sleep(10 * time.Millisecond)
	}
	if l.created.Load() < 30 {
		stopLoad()
		t.Fatalf("the first shop answered only %d checkouts in %v (%s)%s", l.created.Load(), time.Since(loadStart).Round(time.Millisecond), l.String(), first.tail())
	}
	var before shop.SaleReport
	require.NoError(t, getJSON(hc, first.url+"/api/demo/report", &before), "GET /api/demo/report before the kill%s", first.tail())
	smsBefore := sms.Stats()
	for inFlight.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	killedAt.Store(time.Now().UnixNano())
	flightAtKill := inFlight.Load()
	answeredAtKill := l.created.Load() + l.replayed.Load()
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	require.True(t, first.wait(10*time.Second), "the killed shop did not exit within 10 s")
	t.Logf("SIGKILL after %v: %d checkouts in flight, %d answered; the outbox held %d of the shop's %d orders, the provider had delivered %d SMS",
		time.Since(loadStart).Round(time.Millisecond), flightAtKill, answeredAtKill, before.Queued, before.Orders, smsBefore.Delivered)

	// Restart on the same state: the same SQLite database and outbox.
	second := startShop(t, "second", args)
	target.Store(&second.url)
	restartedIn := time.Since(time.Unix(0, killedAt.Load()))
	time.Sleep(750 * time.Millisecond) // the rest of the sale, on the restarted shop
	stopLoad()
	loadDone := make(chan struct{})
	go func() { wg.Wait(); close(loadDone) }()
	select {
	case <-loadDone:
	case <-time.After(inProgressFor):
		t.Fatalf("the buyers did not finish within %v of the sale's end (%s)%s", inProgressFor, l.String(), second.tail())
	}
	t.Logf("restarted in %v; buyers: %s", restartedIn.Round(time.Millisecond), l.String())

	// The outbox drains: what the killed shop had claimed comes back when
	// its lease (10 s) runs out.
	var rep shop.SaleReport
	drainStart := time.Now()
	deadline = drainStart.Add(30 * time.Second)
	for {
		err := getJSON(hc, second.url+"/api/demo/report", &rep)
		if err == nil && rep.Queued == 0 && sms.Stats().Pending == 0 {
			break
		}
		if time.Now().After(deadline) || second.exited() {
			t.Fatalf("the outbox did not drain within 30 s: report %+v (err %v), provider %+v%s", rep, err, sms.Stats(), second.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	assert.Zero(t, rep.Dead, "messages dead-lettered")
	drained := time.Since(drainStart)

	// Stop the second shop (SIGTERM: it shuts down and closes its
	// database), then read what it committed.
	require.NoError(t, second.cmd.Process.Signal(syscall.SIGTERM))
	if !second.wait(15 * time.Second) {
		t.Fatalf("the restarted shop did not exit within 15 s of SIGTERM%s", second.tail())
	}
	require.NoError(t, second.err, "the restarted shop's exit%s", second.tail())

	path := filepath.Join(dir, "shop.db")
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	orders := map[string]string{} // order id → Idempotency-Key
	byKey := map[string]string{}  // Idempotency-Key → order id
	rows, err := db.Query(`SELECT id, idem_key FROM shop_orders`)
	require.NoError(t, err)
	for rows.Next() {
		var id, key string
		require.NoError(t, rows.Scan(&id, &key))
		orders[id] = key
		if prev, ok := byKey[key]; ok {
			t.Errorf("Idempotency-Key %q bought two orders: %s and %s", key, prev, id)
		}
		byKey[key] = id
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.NotEmpty(t, orders)

	// Every answered checkout is a committed order.
	ackedN := 0
	acked.Range(func(k, v any) bool {
		ackedN++
		if id, ok := byKey[k.(string)]; !ok || id != v.(string) {
			t.Errorf("checkout %s was answered with order %s, but the database has %q", k, v, id)
		}
		return true
	})

	// No order without its SMS, none twice, and no SMS without an order.
	lost, twice := 0, 0
	for id := range orders {
		switch sms.Delivered("sms-" + id) {
		case 1:
		case 0:
			lost++
			if lost <= 5 {
				t.Errorf("order %s (key %s): no SMS delivered", id, orders[id])
			}
		default:
			twice++
		}
	}
	st := sms.Stats()
	assert.Zero(t, lost, "orders without their SMS")
	assert.Zero(t, twice, "orders whose SMS was delivered twice")
	assert.Equal(t, int64(len(orders)), st.Delivered, "SMS delivered: one per committed order, none for a checkout that did not commit")
	assert.Zero(t, st.DeliveredTwice, "keys delivered twice")
	assert.Zero(t, st.RepeatedContent, "the same text delivered under another key")
	assert.Zero(t, st.Aborted, "messages the provider accepted and never delivered")

	// The books balance, and they are these orders.
	ctx := context.Background()
	s, err := store.Open(ctx, path)
	require.NoError(t, err)
	defer s.Close()
	books, err := s.Stats(ctx)
	require.NoError(t, err)
	assert.NoError(t, books.Check(), "stock books")
	assert.Equal(t, int64(len(orders)), books.Orders, "orders in the books")
	assert.Equal(t, int64(len(orders)), books.Products[12].Sold, "units of product 12 sold (one an order)")

	// The money: every order on one live charge of its own, every live
	// charge behind one order — the checkouts cut by the kill were
	// finished by their retries, on the charge made before it if there
	// was one.
	ps := pay.Stats()
	pays, err := s.Payments(ctx)
	require.NoError(t, err)
	assert.NoError(t, shop.CheckCharges(pays, pay.Charges()))
	pending, err := s.Pending(ctx)
	require.NoError(t, err)
	assert.Zero(t, pending, "checkouts left unsettled")
	assert.Positive(t, l.createdAfter.Load(), "the restarted shop took orders")
	assert.Positive(t, l.interrupted.Load(), "checkouts sent before the kill were cut by it")
	assert.Zero(t, l.abandoned.Load(), "checkouts whose key never got an answer")
	t.Logf("orders %d (%d answered to buyers, %d of them replays of a key after the restart); SMS delivered %d, lost %d, twice %d; provider requests %d, duplicates absorbed %d, 429s %d; charges %d (%d voided, %d replayed), %d retries of a key in progress; outbox drained %v after the restart; whole test %v",
		len(orders), ackedN, l.replayed.Load(), st.Delivered, lost, twice, st.Requests, st.DuplicatesAbsorbed, st.Rejected429,
		ps.Charges, ps.Voided, ps.Replayed, l.inProgress.Load(), drained.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// loadCounts are the buyers' outcomes.
type loadCounts struct {
	created, createdAfter, replayed atomic.Int64
	transport, interrupted, retries atomic.Int64
	abandoned, inProgress           atomic.Int64
	unavailable                     atomic.Int64 // 503s, retried
	mu                              sync.Mutex
	statuses                        map[int]int
}

func (l *loadCounts) refused(status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.statuses == nil {
		l.statuses = map[int]int{}
	}
	l.statuses[status]++
}

func (l *loadCounts) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d created (%d by the restarted shop), %d replayed, refused %v, %d 503s retried, %d connection errors (%d checkouts cut by the kill), %d retries of a key, %d abandoned",
		l.created.Load(), l.createdAfter.Load(), l.replayed.Load(), l.statuses, l.unavailable.Load(), l.transport.Load(), l.interrupted.Load(), l.retries.Load(), l.abandoned.Load())
}

// checkout posts one checkout of product 12; a non-nil error is a
// connection failure (no answer).
func checkout(hc *http.Client, base, key string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/api/checkout", strings.NewReader(`{"items":[{"product":12,"qty":1}]}`))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(shop.UserHeader, "buyer-"+key) // its own rate-limit bucket
	req.Header.Set(shop.IdempotencyHeader, key)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return 0, "", err // cut mid-answer
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return resp.StatusCode, "", nil
	}
	var out shop.CheckoutResponse
	if err := json.Unmarshal(body, &out); err != nil || out.Order == "" {
		return resp.StatusCode, "", fmt.Errorf("checkout %s: answer %d without an order: %q", key, resp.StatusCode, body)
	}
	return resp.StatusCode, out.Order, nil
}

func getJSON(hc *http.Client, url string, v any) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// shopProcess is a child `shop-demo serve`.
type shopProcess struct {
	name           string
	cmd            *exec.Cmd
	url            string // http://127.0.0.1:PORT
	stdout, stderr *output
	done           chan struct{} // closed when it has exited
	err            error         // Wait's, once done
}

// startShop starts the test binary as `shop-demo args…` (a serve) and
// waits for the URL on its first line of output.
func startShop(t *testing.T, name string, args []string) *shopProcess {
	t.Helper()
	p, line := startChild(t, name, args)
	rest, ok := strings.CutPrefix(line, "shop-demo: serving ")
	u, _, _ := strings.Cut(rest, " ")
	if !ok || !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("the %s shop's first line %q: want \"shop-demo: serving http://127.0.0.1:PORT/ …\"%s", name, line, p.tail())
	}
	p.url = strings.TrimSuffix(u, "/")
	return p
}

// startChild starts the test binary as `shop-demo args…` and waits (at
// most 30 s) for its first line of output, which it returns. Cleanup
// kills it.
func startChild(t *testing.T, name string, args []string) (*shopProcess, string) {
	t.Helper()
	p := &shopProcess{name: name, stdout: newOutput(), stderr: newOutput(), done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), childEnv+"=1")
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	require.NoError(t, p.cmd.Start(), "starting the %s", name)
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill()
			p.wait(10 * time.Second)
		}
	})
	select {
	case <-p.stdout.first:
	case <-p.done:
		t.Fatalf("the %s exited before its first line: %v%s", name, p.err, p.tail())
	case <-time.After(30 * time.Second):
		t.Fatalf("the %s printed nothing within 30 s%s", name, p.tail())
	}
	line, _, _ := strings.Cut(p.stdout.String(), "\n")
	return p, line
}

func (p *shopProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits at most d for the process to exit.
func (p *shopProcess) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// tail is the end of the process's output, for failure messages.
func (p *shopProcess) tail() string {
	cut := func(s string) string {
		if len(s) > 2000 {
			s = "…" + s[len(s)-2000:]
		}
		return s
	}
	return fmt.Sprintf("\n--- the %s shop's stdout:\n%s\n--- its stderr:\n%s", p.name, cut(p.stdout.String()), cut(p.stderr.String()))
}

// output collects a child's stream; first is closed at its first newline.
type output struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	first chan struct{}
	seen  bool
}

func newOutput() *output { return &output{first: make(chan struct{})} }

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.buf.Len() < 1<<20 {
		o.buf.Write(b)
	}
	if !o.seen && bytes.IndexByte(o.buf.Bytes(), '\n') >= 0 {
		o.seen = true
		close(o.first)
	}
	return len(b), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// TestServeDependencyURLs: the crash test's --payment, --sms and --recs
// take absolute http(s) URLs; anything else is a usage error naming the
// flag, before the shop starts.
func TestServeDependencyURLs(t *testing.T) {
	for _, bad := range []string{"127.0.0.1:9090", "/v1", "ftp://127.0.0.1:21", "http://", "http://:9090",
		"http://127.0.0.1:", "http://u:p@127.0.0.1:9090", "http://127.0.0.1:9090/?x=1", "http://127.0.0.1:9090#f", "http:127.0.0.1"} {
		for _, flag := range []string{"payment", "sms", "recs"} {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"serve", "--" + flag, bad}, &stdout, &stderr)
			var ue usageError
			if assert.ErrorAs(t, err, &ue, "--%s %q", flag, bad) {
				assert.Contains(t, ue.Error(), "--"+flag, "the error names the flag")
			}
			assert.Empty(t, stdout.String(), "--%s %q: nothing served", flag, bad)
		}
	}
	for in, want := range map[string]string{
		"":                             "",
		"http://127.0.0.1:9090":        "http://127.0.0.1:9090",
		"http://127.0.0.1:9090/":       "http://127.0.0.1:9090",
		"https://sms.example.com/api/": "https://sms.example.com/api",
		"http://[::1]:9090":            "http://[::1]:9090",
	} {
		got, err := baseURL("sms", in)
		assert.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
}
