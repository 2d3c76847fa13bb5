package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/internal/testsrv"
	"github.com/brownout/brownout/load"
)

// proc is a started binary, killed when the test ends.
type proc struct {
	cmd *exec.Cmd
	out *testsrv.Buffer
}

func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), out: &testsrv.Buffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

// waitOK polls url until it answers 200, for at most 30 s.
func waitOK(t testing.TB, url string, p *proc) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready in 30 s: %v\n%s", url, err, p.out)
		}
	}
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// daemonLevel reads recommendations' level from a brownoutd.
func daemonLevel(base string) (float64, error) {
	var st struct {
		Features []struct {
			Name  string  `json:"name"`
			Level float64 `json:"level"`
		} `json:"features"`
	}
	if err := getJSON(base+"/v1/state", &st); err != nil {
		return -1, err
	}
	for _, f := range st.Features {
		if f.Name == "recommendations" {
			return f.Level, nil
		}
	}
	return -1, fmt.Errorf("no recommendations in %s", base)
}

// learnedCosts lists the features whose cost the daemon at base has
// contrasted (/v1/state's features[].cost), as "name value ± se".
func learnedCosts(base string) []string {
	var st struct {
		Features []struct {
			Name string `json:"name"`
			Cost *struct {
				Value      float64 `json:"value"`
				SE         float64 `json:"se"`
				Contrasted int     `json:"contrasted_ticks"`
			} `json:"cost"`
		} `json:"features"`
	}
	if getJSON(base+"/v1/state", &st) != nil {
		return nil
	}
	var out []string
	for _, f := range st.Features {
		if f.Cost != nil && f.Cost.Contrasted > 0 {
			out = append(out, fmt.Sprintf("%s %.3g ± %.2g (%d ticks)", f.Name, f.Cost.Value, f.Cost.SE, f.Cost.Contrasted))
		}
	}
	return out
}

// shopLevels reads a shop's levels and generation as its provider sees them.
func shopLevels(base string) (map[string]float64, uint64, error) {
	var st struct {
		Levels     map[string]float64 `json:"levels"`
		Generation uint64             `json:"generation"`
	}
	err := getJSON(base+"/api/demo/state", &st)
	return st.Levels, st.Generation, err
}

// build compiles the commands into a temp dir.
func build(t *testing.T) (shopDemo, brownoutd string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "../cmd/shop-demo", "../cmd/brownoutd")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return filepath.Join(dir, "shop-demo"), filepath.Join(dir, "brownoutd")
}

// TestFleet: two shop-demo instances follow one brownoutd in promql mode
// (a real Prometheus scraping both every second) and share their rate
// limits in a real Redis. A bot spread over both is held to one bucket;
// an overload of both dims both, to the same levels; a second brownoutd
// in scrape mode watches the same fleet, for the lag; the promql daemon
// killed leaves the shops serving with their last-known levels.
func TestFleet(t *testing.T) {
	if race.Enabled {
		t.Skip("timing-sensitive: make test runs it without -race")
	}
	if testing.Short() {
		t.Skip("a one-minute fleet run")
	}
	shopBin, daemonBin := build(t)
	rds := testsrv.StartRedis(t)
	shops := []string{testsrv.FreeAddr(t), testsrv.FreeAddr(t)}
	prom := testsrv.StartPrometheus(t, shops...)

	dir := t.TempDir()
	common := `tick: 1s
targets:
  - {signal: latency.p99, target: 300ms}
  - {signal: reject.ratio, target: "0.01", dim_only: true}
features:
  - {name: recommendations, cost: 8}
  - {name: reviews, cost: 3}
  - {name: gallery, cost: 2, floor: 0.1}
`
	promCfg := filepath.Join(dir, "promql.yaml")
	require.NoError(t, os.WriteFile(promCfg, []byte(common+"sources:\n  promql: {url: "+prom+", range: 10s}\n"), 0o644))
	scrapeCfg := filepath.Join(dir, "scrape.yaml")
	require.NoError(t, os.WriteFile(scrapeCfg, []byte(common+"sources:\n  scrape: {targets: [http://"+shops[0]+"/metrics, http://"+shops[1]+"/metrics], window: 10s}\n"), 0o644))
	daemonAddr, scrapeAddr := testsrv.FreeAddr(t), testsrv.FreeAddr(t)
	daemon := start(t, daemonBin, "serve", "--config", promCfg, "--listen", daemonAddr, "--state-dir", filepath.Join(dir, "d1"))
	watcher := start(t, daemonBin, "serve", "--config", scrapeCfg, "--listen", scrapeAddr, "--state-dir", filepath.Join(dir, "d2"))
	waitOK(t, "http://"+daemonAddr+"/readyz", daemon)
	waitOK(t, "http://"+scrapeAddr+"/readyz", watcher)
	var shopProcs []*proc
	for i, addr := range shops {
		// The test plays the load balancer: its X-Forwarded-For names the
		// clients.
		p := start(t, shopBin, "serve", "--listen", addr, "--state", filepath.Join(dir, fmt.Sprintf("shop%d", i)),
			"--brownoutd", "http://"+daemonAddr, "--brownoutd-no-push", "--redis", "redis://"+rds.Addr, "--trusted-proxies", "127.0.0.1")
		waitOK(t, "http://"+addr+"/healthz", p)
		shopProcs = append(shopProcs, p)
	}

	// The bot: one address, a fresh user id each time, alternating between
	// the instances, 10 lookups a second for 5 s. The flash deal allows an
	// address 2/s with a burst of 10 — across the fleet.
	okDeals := 0
	for i := range 50 {
		req, _ := http.NewRequest(http.MethodGet, "http://"+shops[i%2]+"/api/deals/flash", nil)
		req.Header.Set("X-User-ID", fmt.Sprintf("bot-%d", i))
		req.Header.Set("X-Forwarded-For", "10.66.6.6")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			okDeals++
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("bot over both instances: %d of 50 flash-deal lookups served (one bucket: ≤ 10 + 2/s × 5 s = 20; two buckets would allow up to 40)", okDeals)
	assert.LessOrEqual(t, okDeals, 22, "held to one bucket across the fleet")
	assert.GreaterOrEqual(t, okDeals, 10, "the burst is served")

	// The overload: product pages at 1.6× each instance's all-on capacity
	// (160 pages/s), for 30 s, users with their own addresses.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start0 := time.Now()
	var wg sync.WaitGroup
	for _, addr := range shops {
		wg.Go(func() {
			load.Run(ctx, load.Config{Target: "http://" + addr, Users: 20000, Skip: time.Second,
				Phases: []load.Phase{{Name: "overload", Rate: 256, Duration: 30 * time.Second}},
				Mix:    []load.Kind{{Name: "page", Share: 1, Path: "/api/products/7"}},
				Addr:   func(u int) string { return fmt.Sprintf("10.%d.%d.%d", u>>16&255, u>>8&255, u&255) }})
		})
	}
	lag := func(base string) time.Duration {
		for time.Since(start0) < 28*time.Second {
			if l, err := daemonLevel(base); err == nil && l < 1 {
				return time.Since(start0)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return -1
	}
	var promLag, scrapeLag time.Duration
	var lagWG sync.WaitGroup
	lagWG.Go(func() { promLag = lag("http://" + daemonAddr) })
	lagWG.Go(func() { scrapeLag = lag("http://" + scrapeAddr) })
	lagWG.Wait()
	t.Logf("overload to dimming: promql mode %v, scrape mode %v", promLag.Round(100*time.Millisecond), scrapeLag.Round(100*time.Millisecond))
	require.Positive(t, promLag, "the promql daemon dims the fleet\n%s", daemon.out)
	assert.Positive(t, scrapeLag, "the scrape daemon sees the same overload")

	// Both instances follow the same levels.
	var same bool
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !same; time.Sleep(50 * time.Millisecond) {
		// The same levels (generations agree too, unless one instance
		// reconnected: a follower's local generation then runs ahead).
		l0, _, err0 := shopLevels("http://" + shops[0])
		l1, _, err1 := shopLevels("http://" + shops[1])
		same = err0 == nil && err1 == nil && fmt.Sprint(l0) == fmt.Sprint(l1) && l0["recommendations"] < 1
	}
	assert.True(t, same, "both instances show the daemon's levels")

	// The promql daemon learns the features' costs from the shops'
	// tallies, as Prometheus sums them over its periods (5 s each: half
	// the range; each read at least half a period after it ended): the
	// gallery, held at its floor of 0.1 through the overload, is rendered
	// for some requests and not for the others. (The period in which the
	// levels fell holds requests with every feature and without any:
	// no feature's contrast there is its own, and the estimator skips it.)
	var learned []string
	for time.Since(start0) < 29*time.Second && len(learned) == 0 {
		time.Sleep(500 * time.Millisecond)
		learned = learnedCosts("http://" + daemonAddr)
	}
	t.Logf("costs the promql daemon learned mid-overload: %v", learned)
	assert.NotEmpty(t, learned, "a cost learned from the PromQL source's tallies")

	// The daemon killed mid-overload: the shops keep serving, dimmed.
	daemon.kill()
	time.Sleep(500 * time.Millisecond)
	for _, addr := range shops {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/products/3", nil)
		req.Header.Set("X-User-ID", "after-the-daemon")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var pg struct {
			Dimmed []string `json:"dimmed"`
		}
		body := bufio.NewReader(resp.Body)
		json.NewDecoder(body).Decode(&pg)
		resp.Body.Close()
		assert.Contains(t, []int{200, 503}, resp.StatusCode, "served or shed, never an error")
		levels, _, err := shopLevels("http://" + addr)
		require.NoError(t, err)
		assert.Less(t, levels["recommendations"], 1.0, "%s: the last-known levels held", addr)
	}
	cancel()
	wg.Wait()
	for _, p := range shopProcs {
		assert.NotContains(t, p.out.String(), "panic")
	}
}
