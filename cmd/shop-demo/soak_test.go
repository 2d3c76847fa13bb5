package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/pgtest"
	"github.com/brownout/brownout/load"
	"github.com/brownout/brownout/shop"
	"github.com/brownout/brownout/shop/deps"
	"github.com/brownout/brownout/shop/sale"
	"github.com/brownout/brownout/shop/store"
)

// soakEnv sets the soak's length (make soak-shop: SOAK_SHOP, default
// 20m); without it TestShopSoak is skipped.
const soakEnv = "SOAK_SHOP"

// The soak's measures, stated for a 20-minute run; a shorter one scales
// them: its "minute" is a twentieth of the run.
const (
	// soakMinutes is the run in minutes.
	soakMinutes = 20
	// soakSteadyFrom is the minute (from 1) from which the shop's heap and
	// goroutines must hold: the first ones fill the caches, the pools and
	// the rate limiters' tables.
	soakSteadyFrom = 5
	// soakHeapGrowth is the most the heap may grow from minute 5 to the
	// end, relative to minute 5: the heap besides the connections' own
	// (soakConnBytes each), which the generator's churn moves by as much
	// as 0.6 MB from one minute to the next.
	soakHeapGrowth = 0.10
	// soakGoroutineBand is how far the goroutines may stray from minute
	// 5's count, either way, relative to it: the goroutines besides the
	// connections' own (rest), since the generator opens and closes
	// connections as its requests time out (each one goroutine: 144–220
	// from one minute to the next at a steady load).
	soakGoroutineBand = 0.05
	// soakSamples is the shop's /metrics samples a minute. A minute's heap
	// is the median of its go_gc_heap_live_bytes, the heap live after the
	// last collection — what the shop keeps, not the garbage of the moment
	// (go_memstats_heap_inuse_bytes swings by half with the collector's
	// cycle: printed beside), less soakConnBytes a connection open; its
	// goroutines the least of its samples' goroutines less connections
	// open (rest), between bursts of requests in flight (each with
	// net/http's background read: the median of rest moves by ±7 of
	// ~110), the raw least printed beside.
	soakSamples = 12
	// soakConnBytes is what one open connection keeps in the heap:
	// net/http's 4 KiB read and 4 KiB write buffers and its state. Fitted
	// over minutes 5–20 of a soak (live heap against connections open):
	// 10.6 KB a connection on SQLite, 10.1 KB on PostgreSQL.
	soakConnBytes = 10 << 10
	// soakLoad is the offered load, × the shop's all-off capacity.
	soakLoad = 2
	// soakConnections is the load generator's pool of connections to the
	// shop, as a load balancer's: far more than the requests in flight
	// (at 840 req/s and 0.3 s each, 250; most are refused in
	// microseconds). Unbounded, the shop held one for each request in
	// flight at the run's worst moment — 1400 goroutines, 35 MB of heap
	// — until its idle timeout, a minute later: the generator's peak,
	// not the shop's keep.
	soakConnections = 256
)

// TestShopSoak is make soak-shop: the sale's traffic at twice the shop's
// all-off capacity for SOAK_SHOP (default 20 minutes), against a
// `shop-demo serve` on its defaults (trusting the load generator on this
// machine as its proxy, as the sale's own shops do), on SQLite and then on
// PostgreSQL, the simulated dependencies in a `shop-demo deps` process of
// their own (they keep every key by design, so their memory is not the
// shop's). It samples the shop's heap and goroutines from its /metrics
// and prints them, one line a minute; from minute 5 to the end the heap
// grows at most 10 % and the goroutines stay within ±5 %. Once the load
// has stopped and the outbox and the checkouts in flight have settled:
// every order stands on exactly one live charge and every live charge
// behind one order, every order's SMS was delivered exactly once and no
// other, and nothing is left queued.
func TestShopSoak(t *testing.T) {
	v := os.Getenv(soakEnv)
	if v == "" {
		t.Skip("make soak-shop runs it (" + soakEnv + "=20m)")
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "%s=%q: want a duration, e.g. 20m", soakEnv, v)
	require.GreaterOrEqual(t, d, time.Minute, "%s: at least a minute (its minutes are a twentieth of it)", soakEnv)
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) { soak(t, db, d) })
	}
}

// sample is one reading of the shop's /metrics: the heap live after the
// last collection, the heap in use, the goroutines, the connections open.
type sample struct{ live, inuse, goroutines, conns float64 }

func live(s sample) float64       { return s.live }
func inuse(s sample) float64      { return s.inuse }
func goroutines(s sample) float64 { return s.goroutines }

// rest is the goroutines besides the connections' own (one each): what a
// leak would grow, without the generator's churn of connections.
func rest(s sample) float64 { return s.goroutines - s.conns }

// kept is the live heap besides the connections' own (soakConnBytes
// each).
func kept(s sample) float64 { return s.live - soakConnBytes*s.conns }

func soak(t *testing.T, db string, d time.Duration) {
	hc := &http.Client{Timeout: 10 * time.Second}
	depsProc, line := startChild(t, "dependencies", []string{"deps"})
	flags := strings.Fields(strings.TrimPrefix(line, "shop-demo: dependencies: "))
	require.Len(t, flags, 6, "the dependencies' first line %q%s", line, depsProc.tail())
	payURL, smsURL := flags[1], flags[3]

	dir := t.TempDir()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--state", dir, "--trusted-proxies", "127.0.0.1"}, flags...)
	dsn := filepath.Join(dir, "shop.db")
	if db == "postgres" {
		dsn = pgtest.Start(t)
		args = append(args, "--db", dsn)
	}
	sh := startShop(t, "shop", args)
	var info shop.DepsInfo
	require.NoError(t, getJSON(hc, sh.url+"/api/demo/deps", &info), "GET /api/demo/deps%s", sh.tail())
	rate := soakLoad * info.Capacity.MixOff
	minute := d / soakMinutes
	t.Logf("%s: the sale's traffic at %.0f req/s (%d × the all-off capacity, %s) for %v; a minute is %v",
		db, rate, soakLoad, info.Capacity, d, minute)

	// The sampler: soakSamples readings a minute, a line a minute.
	minutes := make([][]sample, soakMinutes)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel, below: the sampler ends before the test does
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	wg.Go(func() {
		tick := time.NewTicker(minute / soakSamples)
		defer tick.Stop()
		for m := 0; m < soakMinutes; {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if i := int(time.Since(start) / minute); i > m {
				logMinute(t, m+1, minutes[m], hc, sh.url)
				m = i
				if m >= soakMinutes {
					return
				}
			}
			s, err := scrape(hc, sh.url+"/metrics")
			if err != nil {
				t.Errorf("minute %d: %v", m+1, err)
				continue
			}
			minutes[m] = append(minutes[m], s)
		}
	})
	lc := sale.Load(sh.url, []load.Phase{{Name: "soak", Rate: rate, Duration: d}}, 1)
	lc.MaxConnections = soakConnections
	rep, err := load.Run(ctx, lc)
	require.NoError(t, err)
	wg.Wait()
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	t.Logf("the load:\n%s", table.String())

	// Settled: the outbox empty, the checkouts in flight finished or,
	// abandoned by their clients, reconciled (a lease, then a minute).
	var sr shop.SaleReport
	deadline := time.Now().Add(store.Lease + store.AbandonAfter + time.Minute)
	for {
		err := getJSON(hc, sh.url+"/api/demo/report", &sr)
		if err == nil && sr.Queued == 0 && sr.Pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled %v after the load: report %+v (err %v)%s", time.Since(start)-d, sr, err, sh.tail())
		}
		time.Sleep(time.Second)
	}
	t.Logf("settled %v after the load: %d orders, %d replays; %d charges voided (%d of checkouts abandoned), %d voids failed; %d dead letters",
		(time.Since(start) - d).Round(time.Second), sr.Orders, sr.Replays, sr.Voided, sr.Cancelled, sr.Unmatched, sr.Dead)

	// The shop's memory and goroutines.
	n := soakMinutes
	heap, liveHeap, gor, raw := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, ss := range minutes {
		if !assert.NotEmpty(t, ss, "minute %d: no sample", i+1) {
			continue
		}
		heap[i], liveHeap[i], gor[i], raw[i] = median(ss, kept), median(ss, live), least(ss, rest), least(ss, goroutines)
	}
	base := soakSteadyFrom - 1
	var curve strings.Builder
	for i := range soakMinutes {
		fmt.Fprintf(&curve, "minute %2d: heap besides connections %5.2f MB (%+5.1f %%), live heap %5.2f MB (%+5.1f %%); goroutines besides connections %4.0f (%+5.1f %%), goroutines %4.0f (%+5.1f %%)\n",
			i+1, heap[i]/(1<<20), 100*(heap[i]/heap[base]-1), liveHeap[i]/(1<<20), 100*(liveHeap[i]/liveHeap[base]-1),
			gor[i], 100*(gor[i]/gor[base]-1), raw[i], 100*(raw[i]/raw[base]-1))
	}
	t.Logf("%s: the shop's heap besides its connections and live heap (the medians of each minute), goroutines besides its connections and goroutines (the least of each minute), against minute %d:\n%s", db, soakSteadyFrom, curve.String())
	for i := base; i < soakMinutes; i++ {
		assert.LessOrEqual(t, heap[i], (1+soakHeapGrowth)*heap[base], "minute %d: the heap besides connections grew more than %.0f %% since minute %d", i+1, 100*soakHeapGrowth, soakSteadyFrom)
		assert.InDelta(t, gor[base], gor[i], soakGoroutineBand*gor[base], "minute %d: goroutines besides connections", i+1)
	}

	// The books, read once the shop has stopped.
	assert.Zero(t, sr.Dead, "messages dead-lettered")
	require.NoError(t, sh.cmd.Process.Signal(syscall.SIGTERM))
	require.True(t, sh.wait(15*time.Second), "the shop did not exit within 15 s of SIGTERM%s", sh.tail())
	st, err := store.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer st.Close()
	pays, err := st.Payments(context.Background())
	require.NoError(t, err)
	books, err := st.Stats(context.Background())
	require.NoError(t, err)
	assert.NoError(t, books.Check(), "stock books")
	charges, err := deps.PaymentClient{BaseURL: payURL, HTTP: hc}.Charges(context.Background())
	require.NoError(t, err)
	assert.NoError(t, shop.CheckCharges(pays, charges), "every order on one live charge, every live charge behind one order")
	delivered, err := deps.SMSClient{BaseURL: smsURL, HTTP: hc}.Deliveries(context.Background())
	require.NoError(t, err)
	lost, twice := 0, 0
	for id := range pays {
		switch delivered["sms-"+id] {
		case 1:
		case 0:
			lost++
		default:
			twice++
		}
	}
	assert.Zero(t, lost, "orders without their SMS")
	assert.Zero(t, twice, "orders whose SMS was delivered more than once")
	assert.Len(t, delivered, len(pays), "SMS delivered for no order")
	voided := 0
	for _, c := range charges {
		if c.Voided {
			voided++
		}
	}
	t.Logf("%s: %d orders on %d charges (%d voided); %d SMS delivered, %d lost, %d twice", db, len(pays), len(charges), voided, len(delivered), lost, twice)
}

// logMinute prints a minute's line: its samples and the orders so far.
func logMinute(t *testing.T, m int, ss []sample, hc *http.Client, base string) {
	var sr shop.SaleReport
	getJSON(hc, base+"/api/demo/report", &sr)
	if len(ss) == 0 {
		t.Logf("minute %2d: no sample", m)
		return
	}
	t.Logf("minute %2d: live heap %.1f MB (in use %.1f), goroutines %.0f (median %.0f; besides connections %.0f); %d orders, %d queued, %d checkouts unsettled",
		m, median(ss, live)/(1<<20), median(ss, inuse)/(1<<20), least(ss, goroutines), median(ss, goroutines), median(ss, rest), sr.Orders, sr.Queued, sr.Pending)
}

// scrape reads the live heap, the heap in use and the goroutines from a
// /metrics page.
func scrape(hc *http.Client, url string) (sample, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	var s sample
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case "go_gc_heap_live_bytes":
			dst = &s.live
		case "go_memstats_heap_inuse_bytes":
			dst = &s.inuse
		case "go_goroutines":
			dst = &s.goroutines
		case "brownout_http_connections_open":
			dst = &s.conns
		default:
			continue
		}
		if *dst, err = strconv.ParseFloat(value, 64); err != nil {
			return sample{}, fmt.Errorf("%s: %s %q: %w", url, name, value, err)
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return sample{}, err
	}
	if found != 4 {
		return sample{}, fmt.Errorf("%s: want go_gc_heap_live_bytes, go_memstats_heap_inuse_bytes, go_goroutines and brownout_http_connections_open", url)
	}
	return s, nil
}

// least is the least of a minute's samples of f.
func least(ss []sample, f func(sample) float64) float64 {
	v := f(ss[0])
	for _, s := range ss[1:] {
		v = min(v, f(s))
	}
	return v
}

// median is the median of a minute's samples of f.
func median(ss []sample, f func(sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	return v[len(v)/2]
}
