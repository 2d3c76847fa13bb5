package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/internal/testsrv"
)

// TestAlertRules: the shipped alerting rules load in Prometheus and pass
// their unit tests, and the shipped prometheus.yml is valid.
func TestAlertRules(t *testing.T) {
	promtool := testsrv.Need(t, "prometheus", "promtool")
	dir := "../deploy/prometheus"
	for _, args := range [][]string{
		{"check", "rules", "brownout-alerts.yml"},
		{"test", "rules", "brownout-alerts_test.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "promtool %v:\n%s", args, out)
	}
}

// TestDashboard: every query of the shipped Grafana dashboard returns data
// from a real Prometheus scraping a brownoutd and a shop that pushes its
// signals to it, under a light load — and the metrics of both pass
// promtool's lint.
func TestDashboard(t *testing.T) {
	if race.Enabled {
		t.Skip("runs without -race in make test")
	}
	if testing.Short() {
		t.Skip("a 20 s run on real servers")
	}
	promtool := testsrv.Need(t, "prometheus", "promtool")
	raw, err := os.ReadFile("../deploy/grafana/brownout.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.NotEmpty(t, dash.Panels)

	shopBin, daemonBin := build(t)
	dir := t.TempDir()
	daemonAddr, shopAddr := testsrv.FreeAddr(t), testsrv.FreeAddr(t)
	prom := testsrv.StartPrometheus(t, daemonAddr, shopAddr)
	daemon := start(t, daemonBin, "serve", "--listen", daemonAddr, "--state-dir", filepath.Join(dir, "d"))
	waitOK(t, "http://"+daemonAddr+"/readyz", daemon)
	shop := start(t, shopBin, "serve", "--listen", shopAddr, "--state", filepath.Join(dir, "shop"), "--brownoutd", "http://"+daemonAddr)
	waitOK(t, "http://"+shopAddr+"/healthz", shop)

	// A light load for the rates: product pages at 20/s.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/api/products/%d", shopAddr, 1+i%20), nil)
			req.Header.Set("X-User-ID", fmt.Sprintf("u%d", i%500))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	// The shop pushes its signals: the daemon sees it and is not stale.
	var st struct {
		Mode    string `json:"mode"`
		Sources []struct {
			Name      string `json:"name"`
			OK        bool   `json:"ok"`
			Instances []struct {
				OK bool `json:"ok"`
			} `json:"instances"`
		} `json:"sources"`
	}
	pushed := false
	for deadline := time.Now().Add(15 * time.Second); !pushed && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := getJSON("http://"+daemonAddr+"/v1/state", &st); err == nil && len(st.Sources) == 1 {
			pushed = st.Sources[0].OK && len(st.Sources[0].Instances) == 1 && st.Sources[0].Instances[0].OK && st.Mode != "stale"
		}
	}
	assert.True(t, pushed, "the shop's pushes reach the daemon: %+v", st)

	for _, addr := range []string{daemonAddr, shopAddr} {
		resp, err := http.Get("http://" + addr + "/metrics")
		require.NoError(t, err)
		lint := exec.Command(promtool, "check", "metrics")
		lint.Stdin = resp.Body
		out, err := lint.CombinedOutput()
		resp.Body.Close()
		assert.NoError(t, err, "promtool check metrics on %s:\n%s", addr, out)
	}

	query := func(expr string) (int, error) {
		resp, err := http.Get(prom + "/api/v1/query?query=" + url.QueryEscape(expr))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var r struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return 0, err
		}
		if r.Status != "success" {
			return 0, fmt.Errorf("%s", r.Error)
		}
		return len(r.Data.Result), nil
	}
	// Every query answers within 30 s (rates need two scrapes of 1 s, the
	// controller a few ticks of pushed signals).
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			var n int
			var err error
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
				if n, err = query(tg.Expr); err != nil || n > 0 {
					break
				}
			}
			require.NoError(t, err, "%s: %s", p.Title, tg.Expr)
			assert.Positive(t, n, "%s: %s returned no data", p.Title, tg.Expr)
		}
	}
}
