package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/open-feature/go-sdk-contrib/providers/ofrep"
	"github.com/open-feature/go-sdk/openfeature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/internal/pgtest"
	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/internal/testsrv"
	"github.com/brownout/brownout/provider"
)

// do sends a request with headers (name, value pairs) and returns the
// answer with its body read.
func do(t *testing.T, method, url, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	return resp, string(b)
}

// servicesOf reads the root's GET /v1/state of a daemon of several
// services; t may be an Eventually's collector.
func servicesOf(t require.TestingT, base string) servicesJSON {
	resp, err := http.Get(base + "/v1/state")
	require.NoError(t, err)
	defer resp.Body.Close()
	var m servicesJSON
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	return m
}

// writeFiles writes name → content files into dir and returns their paths.
func writeFiles(t *testing.T, dir string, files map[string]string) map[string]string {
	out := map[string]string{}
	for name, s := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o600))
		out[name] = p
	}
	return out
}

// TestServeServices runs `brownoutd serve` with two services: each
// takes its own pushes (by header at the root and by path), behind its
// own push tokens; one dims, the other does not move; OFREP answers each
// one's flags by path and by header (the OFREP Go provider unmodified),
// the remote provider follows one by its Service option; an operator's
// override on one leaves the other alone; the root lists both; a request
// without a service, or with one the daemon does not serve, is refused
// saying which there are; metrics carry the service; each keeps its
// operators' state in its own directory.
func TestServeServices(t *testing.T) {
	dir := t.TempDir()
	opTok, shopTok, searchTok, evalTok := "operator-secret-0123456789", "shop-push-0123456789", "search-push-0123456789", "search-eval-0123456789"
	f := writeFiles(t, dir, map[string]string{"ops": "alice " + opTok + "\n", "shop-push": "shop " + shopTok + "\n",
		"search-push": "search " + searchTok + "\n", "search-eval": "app " + evalTok + "\n"})
	cfg := writeFiles(t, dir, map[string]string{"b.yaml": `tick: 100ms
auth:
  operator_tokens_file: ` + f["ops"] + `
services:
  - name: shop
    features: [{name: recommendations}, {name: reviews}]
    auth: {push_tokens_file: ` + f["shop-push"] + `}
  - name: search
    targets: [{signal: latency.p99, target: 200ms}]
    features: [{name: suggestions}, {name: spelling, default: false}]
    auth: {push_tokens_file: ` + f["search-push"] + `, eval_tokens_file: ` + f["search-eval"] + `}
`})["b.yaml"]
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", dir, "--config", cfg)
	base := d.base
	assert.Contains(t, d.out.String(), "service shop at "+base+"/services/shop/ (features recommendations, reviews; state "+filepath.Join(dir, "services", "shop")+")")

	// The shop pushes slow answers at the root, saying its service; the
	// search pushes fast ones under its path.
	servicePushes(t, base+"/v1/signals", "shop", shopTok, 900*time.Millisecond)
	servicePushes(t, base+"/services/search/v1/signals", "search", searchTok, 20*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m := servicesOf(c, base)
		require.Len(c, m.Services, 2)
		shop, search := m.Services[0].State, m.Services[1].State
		assert.Equal(c, "shop", shop.Service)
		assert.Equal(c, "/services/search", m.Services[1].Base)
		assert.Less(c, feature(shop, "recommendations").Level, 1.0, "the shop dims")
		require.NotEmpty(c, search.Sources)
		assert.True(c, search.Sources[0].OK, "the search's pushes arrive")
		assert.Equal(c, 1.0, feature(search, "suggestions").Level, "the search does not")
		require.Len(c, search.Sources[0].Instances, 1, "its own instances only")
		assert.Equal(c, "search-1", search.Sources[0].Instances[0].Name)
	}, 15*time.Second, 50*time.Millisecond)
	st := stateOf(t, base+"/services/shop")
	assert.Equal(t, "shop", st.Service)
	require.Len(t, st.Sources[0].Instances, 1, "the shop's source has the shop's instance only")

	push := `{"v":1,"instance":"x","time":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}`
	for _, tc := range []struct {
		name, url string
		headers   []string
		status    int
		says      string
	}{
		{"another service's push token", base + "/services/search/v1/signals", []string{"Authorization", "Bearer " + shopTok}, 401, "push token"},
		{"its token, another service named", base + "/v1/signals", []string{"Authorization", "Bearer " + shopTok, service.Header, "search"}, 401, "push token"},
		{"no service at the root", base + "/v1/signals", []string{"Authorization", "Bearer " + shopTok}, 400, "several services (shop, search)"},
		{"an unknown service by header", base + "/v1/signals", []string{service.Header, "cart"}, 404, `"cart": no such service here: shop, search`},
		{"an unknown service by path", base + "/services/cart/v1/signals", nil, 404, `no service "cart" here`},
		{"path and header disagree", base + "/services/shop/v1/signals", []string{service.Header, "search"}, 400, "the path names service \"shop\" and X-Brownout-Service \"search\""},
	} {
		resp, body := do(t, "POST", tc.url, push, tc.headers...)
		assert.Equal(t, tc.status, resp.StatusCode, tc.name)
		assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), tc.name)
		var pb struct{ Detail string }
		require.NoError(t, json.Unmarshal([]byte(body), &pb), tc.name)
		assert.Contains(t, pb.Detail, tc.says, tc.name)
	}

	// OFREP: by path and by header; the search's evaluation token.
	ec := `{"context":{"targetingKey":"u1"}}`
	resp, body := do(t, "POST", base+"/services/search/ofrep/v1/evaluate/flags/suggestions", ec, "Authorization", "Bearer "+evalTok)
	assert.Equal(t, 200, resp.StatusCode, body)
	assert.Contains(t, body, `"value":true`)
	resp, _ = do(t, "POST", base+"/services/search/ofrep/v1/evaluate/flags/suggestions", ec)
	assert.Equal(t, 401, resp.StatusCode, "the search's evaluations need its token")
	resp, body = do(t, "POST", base+"/ofrep/v1/evaluate/flags/recommendations", ec, service.Header, "shop")
	assert.Equal(t, 200, resp.StatusCode, body)
	resp, body = do(t, "POST", base+"/ofrep/v1/evaluate/flags/suggestions", ec, service.Header, "shop")
	assert.Equal(t, 404, resp.StatusCode, "the search's flag is not the shop's")
	assert.Contains(t, body, "FLAG_NOT_FOUND")
	resp, body = do(t, "POST", base+"/ofrep/v1/evaluate/flags/recommendations", ec)
	assert.Equal(t, 400, resp.StatusCode)
	assert.JSONEq(t, `{"key":"recommendations","errorCode":"GENERAL","errorDetails":"this daemon serves several services (shop, search): say which with the path /services/{name}/… or the header X-Brownout-Service"}`, body, "OFREP's error shape")
	resp, body = do(t, "POST", base+"/services/shop/ofrep/v1/evaluate/flags", ec)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, body, `"requestUri":"/services/shop/ofrep/v1/events"`, "the bulk answer advertises the service's stream")

	for _, tc := range []struct {
		name string
		opts []ofrep.Option
	}{
		{"base path", []ofrep.Option{ofrep.WithBearerToken(evalTok)}},
		{"header", []ofrep.Option{ofrep.WithBearerToken(evalTok), ofrep.WithHeader(service.Header, "search")}},
	} {
		url := base
		if tc.name == "base path" {
			url = base + "/services/search"
		}
		require.NoError(t, openfeature.SetNamedProviderAndWait("search-"+tc.name, ofrep.NewProvider(url, tc.opts...)))
		c := openfeature.NewClient("search-" + tc.name)
		on, err := c.BooleanValue(context.Background(), "suggestions", false, openfeature.NewEvaluationContext("u1", nil))
		require.NoError(t, err, tc.name)
		assert.True(t, on, "%s: the OFREP Go provider, unmodified, evaluates the search's flags", tc.name)
	}

	// The remote provider follows the search by its Service option.
	remote, err := provider.NewRemote(provider.RemoteOptions{URL: base, Service: "search", Token: evalTok})
	require.NoError(t, err)
	rctx, rcancel := context.WithCancel(context.Background())
	t.Cleanup(rcancel)
	go remote.Run(rctx)
	require.Eventually(t, func() bool { return remote.Connected() }, 5*time.Second, 20*time.Millisecond)
	names := []string{}
	for _, ft := range remote.State().Features {
		names = append(names, ft.Name)
	}
	assert.Equal(t, []string{"suggestions", "spelling"}, names)

	// An operator pins the search; the shop is untouched.
	shopGen := stateOf(t, base+"/services/shop").Generation
	resp, body = do(t, "PUT", base+"/services/search/v1/features/spelling/override", `{"level":0.3,"ttl":"10m","reason":"test"}`, "Authorization", "Bearer "+opTok)
	require.Equal(t, 200, resp.StatusCode, body)
	require.Eventually(t, func() bool {
		st := remote.State()
		i, ok := st.FeatureIndex("spelling")
		return ok && st.LevelAt(i, -1) == 0.3
	}, 5*time.Second, 20*time.Millisecond, "the remote follows the search's override")
	shop := stateOf(t, base+"/services/shop")
	for _, ft := range shop.Features {
		assert.Nil(t, ft.Override, "the shop has no override")
	}
	var events struct{ Events []api.Event }
	resp, body = do(t, "GET", base+"/services/shop/v1/events", "")
	require.Equal(t, 200, resp.StatusCode)
	require.NoError(t, json.Unmarshal([]byte(body), &events))
	for _, e := range events.Events {
		assert.NotEqual(t, "override", e.Kind, "the shop's events have no override: %+v", e)
	}
	assert.GreaterOrEqual(t, shop.Generation, shopGen)

	// The dials, the metrics.
	resp, _ = do(t, "GET", base+"/services/shop", "")
	assert.Equal(t, 301, resp.StatusCode)
	assert.Equal(t, "/services/shop/", resp.Header.Get("Location"))
	resp, body = do(t, "GET", base+"/services/shop/", "")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, body, "brownout dial")
	resp, body = do(t, "GET", base+"/metrics", "")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, body, `brownout_feature_level{feature="spelling",service="search"} 0.3`)
	assert.Contains(t, body, `brownout_feature_level{feature="recommendations",service="shop"}`)

	d.stop(t)
	b, err := os.ReadFile(filepath.Join(dir, "services", "search", "operator.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"feature": "spelling"`, "the search's override is in its own state file")
	b, err = os.ReadFile(filepath.Join(dir, "services", "shop", "operator.json"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "spelling")
}

// TestOneServiceRefusesAServiceName: a daemon of one service (no
// services:) answers as before, and refuses a request that names a
// service — a client meant for a daemon of several — instead of handing
// it the levels of a service it did not ask for.
func TestOneServiceRefusesAServiceName(t *testing.T) {
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", t.TempDir())
	ec := `{"context":{"targetingKey":"u1"}}`
	resp, _ := do(t, "POST", d.base+"/ofrep/v1/evaluate/flags/reviews", ec)
	assert.Equal(t, 200, resp.StatusCode)
	resp, body := do(t, "POST", d.base+"/ofrep/v1/evaluate/flags/reviews", ec, service.Header, "shop")
	assert.Equal(t, 404, resp.StatusCode)
	assert.Contains(t, body, `"errorCode":"GENERAL"`)
	assert.Contains(t, body, "this daemon serves one service")
	resp, body = do(t, "GET", d.base+"/v1/state", "", service.Header, "shop")
	assert.Equal(t, 404, resp.StatusCode)
	assert.Contains(t, body, "urn:brownout:api:unknown-service")
	resp, _ = do(t, "GET", d.base+"/services/shop/v1/state", "")
	assert.Equal(t, 404, resp.StatusCode)
}

// TestServeServicesReload: SIGHUP reloads every service of a valid file —
// features added, an operator's override kept, a service added (see
// reload_test.go) — and none of an invalid one, even where only one
// service is wrong; a service's tick changed waits for the restart, said
// in the log; a file without services is refused.
func TestServeServicesReload(t *testing.T) {
	dir := t.TempDir()
	opTok := "operator-secret-0123456789"
	f := writeFiles(t, dir, map[string]string{"ops": "alice " + opTok + "\n"})
	file := filepath.Join(dir, "b.yaml")
	write := func(s string) {
		require.NoError(t, os.WriteFile(file, []byte("tick: 100ms\nauth: {operator_tokens_file: "+f["ops"]+"}\n"+s), 0o600))
	}
	write(`services:
  - {name: a, features: [{name: x}, {name: y}]}
  - {name: b, features: [{name: z}]}
`)
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", dir, "--config", file)
	names := func(svc string) []string {
		var out []string
		for _, ft := range stateOf(t, d.base+"/services/"+svc).Features {
			out = append(out, ft.Name)
		}
		return out
	}
	resp, body := do(t, "PUT", d.base+"/services/b/v1/features/z/override", `{"level":0.3,"ttl":"1h","reason":"war room"}`, "Authorization", "Bearer "+opTok)
	require.Equal(t, 200, resp.StatusCode, body)
	hup := func() { require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP)) }

	write(`services:
  - {name: a, tick: 200ms, features: [{name: x}, {name: y}, {name: w}]}
  - {name: b, features: [{name: z}, {name: v}]}
  - {name: c, features: [{name: u}]}
`)
	// The services' laws are reconfigured before a service added is
	// routed: wait for the reload's last line.
	reloaded(t, false, d)
	assert.Len(t, stateOf(t, d.base+"/services/a").Features, 3)
	assert.Len(t, stateOf(t, d.base+"/services/b").Features, 2)
	assert.Equal(t, []string{"z", "v"}, names("b"))
	assert.Equal(t, 0.3, feature(stateOf(t, d.base+"/services/b"), "z").Level, "the override survived the reload")
	assert.Equal(t, "100ms", stateOf(t, d.base+"/services/a").Tick.Period, "a's tick waits for the restart")
	require.Eventually(t, func() bool { return strings.Contains(d.errs.String(), `settings=services[a].tick`) }, 5*time.Second, 50*time.Millisecond, "and the log says so: %s", d.errs.String())
	resp, _ = do(t, "GET", d.base+"/services/c/v1/state", "")
	assert.Equal(t, 200, resp.StatusCode, "a service added is served at once")

	for _, bad := range []string{
		"services:\n  - {name: a, features: [{name: x}]}\n  - {name: b, features: [{name: z, floor: 7}]}\n",
		"features: [{name: x}]\n",
	} {
		write(bad)
		before := strings.Count(d.errs.String(), "reload refused")
		hup()
		require.Eventually(t, func() bool { return strings.Count(d.errs.String(), "reload refused") > before }, 5*time.Second, 50*time.Millisecond, "the refusal is logged")
		assert.Equal(t, []string{"x", "y", "w"}, names("a"), "nothing of a refused file applies")
	}
}

// TestServeServicesReplicas: two `brownoutd serve` of the same services
// on one PostgreSQL store: each service has its own rows, lease and
// leader; an override of one service, written at either replica, is
// served by both, and the other service has none.
func TestServeServicesReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("a real PostgreSQL")
	}
	dsn := pgtest.Start(t)
	dir := t.TempDir()
	cfg := writeFiles(t, dir, map[string]string{"b.yaml": `tick: 200ms
services:
  - {name: shop, features: [{name: recommendations}, {name: reviews}]}
  - {name: search, features: [{name: suggestions}]}
`})["b.yaml"]
	var reps []*daemon
	for range 2 { // each its own port: a replica's name is the host's and its port
		reps = append(reps, startDaemon(t, "--listen", testsrv.FreeAddr(t), "--config", cfg, "--store", dsn))
	}
	assert.Contains(t, reps[0].out.String(), "service search at "+reps[0].base+"/services/search/ (features suggestions; state store ")
	leaders := map[string]string{}
	for _, svc := range []string{"shop", "search"} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var seen []string
			for _, r := range reps {
				st := stateOf(c, r.base+"/services/"+svc)
				require.NotNil(c, st.Cluster)
				assert.NotEmpty(c, st.Cluster.Leader)
				seen = append(seen, st.Cluster.Leader)
			}
			assert.Equal(c, seen[0], seen[1], "%s: one leader, known to both", svc)
			leaders[svc] = seen[0]
		}, 20*time.Second, 100*time.Millisecond, "%s has a leader", svc)
	}
	t.Logf("leaders: %v", leaders)

	resp, body := do(t, "PUT", reps[1].base+"/services/shop/v1/features/reviews/override", `{"level":0.25,"ttl":"1h","reason":"war room"}`)
	require.Equal(t, 200, resp.StatusCode, body)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, r := range reps {
			assert.Equal(c, 0.25, feature(stateOf(c, r.base+"/services/shop"), "reviews").Level, "%s serves the shop's override", r.base)
		}
	}, 10*time.Second, 100*time.Millisecond)
	for _, r := range reps {
		for _, f := range stateOf(t, r.base+"/services/search").Features {
			assert.Nil(t, f.Override, "%s: the search has none", r.base)
		}
	}
}

// TestServeReplicaReadyServesTheStore: a replica that says it is ready
// serves the store's state, for every service — never its own fresh one
// (full brightness, generation 1), which a load balancer that
// health-checks /readyz would otherwise send OFREP clients to while the
// service's loop has not started yet (a later service's starts up to a
// tick after the first's).
func TestServeReplicaReadyServesTheStore(t *testing.T) {
	if testing.Short() {
		t.Skip("a real PostgreSQL")
	}
	dsn := pgtest.Start(t)
	cfg := writeFiles(t, t.TempDir(), map[string]string{"b.yaml": `tick: 1s
services:
  - {name: shop, features: [{name: recommendations}]}
  - {name: search, features: [{name: suggestions}, {name: spelling}]}
`})["b.yaml"]
	first := startDaemon(t, "--listen", testsrv.FreeAddr(t), "--config", cfg, "--store", dsn)
	for _, svc := range []string{"shop", "search"} {
		resp, body := do(t, "PUT", first.base+"/services/"+svc+"/v1/features/"+map[string]string{"shop": "recommendations", "search": "suggestions"}[svc]+"/override",
			`{"level":0.2,"ttl":"1h","reason":"war room"}`)
		require.Equal(t, 200, resp.StatusCode, "%s: %s", svc, body)
	}
	want := map[string]uint64{}
	for _, svc := range []string{"shop", "search"} {
		want[svc] = stateOf(t, first.base+"/services/"+svc).Generation
	}
	for range 3 { // each start a fresh chance for a service's loop to start late
		next := startDaemon(t, "--listen", testsrv.FreeAddr(t), "--config", cfg, "--store", dsn)
		for svc, f := range map[string]string{"shop": "recommendations", "search": "suggestions"} {
			st := stateOf(t, next.base+"/services/"+svc)
			assert.Equal(t, 0.2, feature(st, f).Level, "%s: ready, the replica serves the store's levels (%s)", svc, st.Reason)
			assert.GreaterOrEqual(t, st.Generation, want[svc], "%s: and its generation", svc)
		}
		next.stop(t)
	}
}

// TestServeServicesReplicasKeepTheirSecrets: with a store, the cluster's
// secret is one for every service, but what each service's API keys with
// it is its own: the shed seed its stream carries (which users its
// cascade sheds first, behind its evaluation tokens) and its stream
// tokens. Before, every service's seed was the same: a client of an open
// service read, in its stream, the seed of a service whose streams need
// a token. The seed is still the same at every replica of a service.
func TestServeServicesReplicasKeepTheirSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("a real PostgreSQL")
	}
	dsn := pgtest.Start(t)
	dir := t.TempDir()
	f := writeFiles(t, dir, map[string]string{"eval": "app bbbb-token-00000001\n"})
	cfg := writeFiles(t, dir, map[string]string{"b.yaml": `services:
  - {name: open, features: [{name: x}]}
  - {name: closed, features: [{name: y}], auth: {eval_tokens_file: ` + f["eval"] + `}}
`})["b.yaml"]
	var reps []*daemon
	for range 2 {
		reps = append(reps, startDaemon(t, "--listen", testsrv.FreeAddr(t), "--config", cfg, "--store", dsn))
	}
	seed := func(url string, headers ...string) string {
		ch := sseFollow(t, url, headers...)
		for ev := range ch {
			if ev[0] == "state" {
				var st struct {
					Seed string `json:"shed_seed"`
				}
				require.NoError(t, json.Unmarshal([]byte(ev[1]), &st))
				return st.Seed
			}
		}
		t.Fatalf("%s: no state", url)
		return ""
	}
	open := seed(reps[0].base + "/services/open/v1/stream")
	closed := seed(reps[0].base+"/services/closed/v1/stream", "Authorization", "Bearer bbbb-token-00000001")
	require.NotEmpty(t, open)
	assert.NotEqual(t, open, closed, "the open service's stream tells the closed one's seed")
	assert.Equal(t, closed, seed(reps[1].base+"/services/closed/v1/stream", "Authorization", "Bearer bbbb-token-00000001"), "one seed a service, at every replica")

	// A stream token of the open service does not open the closed one's.
	resp, body := do(t, "POST", reps[0].base+"/services/open/v1/stream/token", "")
	require.Equal(t, 200, resp.StatusCode, body)
	var tok struct{ Token string }
	require.NoError(t, json.Unmarshal([]byte(body), &tok))
	resp, _ = do(t, "GET", reps[1].base+"/services/closed/v1/stream?token="+tok.Token, "")
	assert.Equal(t, 401, resp.StatusCode)
}
