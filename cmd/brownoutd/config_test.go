package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/server"
	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/signals"
)

// TestExampleConfig keeps the commented example valid.
func TestExampleConfig(t *testing.T) {
	b, err := os.ReadFile("brownoutd.example.yaml")
	require.NoError(t, err)
	c, err := parseConfig("brownoutd.example.yaml", b)
	require.NoError(t, err)
	_, err = dimmer.New(c.Dimmer)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8080", c.Listen)
	assert.Len(t, c.Dimmer.Features, 3)
	assert.Equal(t, 0.3, c.Dimmer.Targets[0].Target)
	require.Len(t, c.Dimmer.Schedule, 1)
	dhaka, _ := time.LoadLocation("Asia/Dhaka")
	assert.True(t, c.Dimmer.Schedule[0].From.Equal(time.Date(2026, 11, 11, 23, 59, 30, 0, dhaka)))
	assert.NotNil(t, c.Push)
}

func TestDefaultsWithoutConfig(t *testing.T) {
	c, err := parseConfig("(defaults)", nil)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8080", c.Listen)
	assert.Equal(t, []string{"recommendations", "reviews", "gallery"}, strings.Split(featureNames(c.Dimmer), ", "))
	assert.NotNil(t, c.Push, "the push source by default")
	_, err = dimmer.New(c.Dimmer)
	require.NoError(t, err)
}

// TestConfigErrors: every error, with its line and field path.
func TestConfigErrors(t *testing.T) {
	src := `listen: 127.0.0.1:8080
tick: 1s
targets:
  - signal: latency.p98
    target: 300ms
  - signal: latency.p99
    target: fast
features:
  - name: recommendations
    floor: 1.5
  - name: recommendations
    colour: blue
law:
  high: 0.5
  low: 0.7
schedule:
  - feature: nope
    from: "tomorrow"
    for: 10m
    max: 0.5
sources:
  scrape:
    targets: [ftp://x]
`
	_, err := parseConfig("bad.yaml", []byte(src))
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		"line 4: targets[0].signal",
		"line 7: targets[1].target",
		"line 10: features[0].floor",
		"line 11: features[1].name",
		"line 12: features[1].colour: unknown field",
		"line 15: law.low",
		"line 17: schedule[0].feature",
		"line 18: schedule[0].from",
		"sources.scrape.targets[0]",
	} {
		assert.Contains(t, msg, want)
	}
	_, err = parseConfig("bad.yaml", []byte("tick: [1"))
	assert.ErrorContains(t, err, "line 1")
	_, err = parseConfig("bad.yaml", []byte("tick: soon"))
	assert.ErrorContains(t, err, "want a duration")
}

// TestLawKind: the model law is the only law — law.kind may name it or
// be left out — and check-config refuses an unknown kind, the removed
// search law, and each of the search law's settings whenever set (to 0,
// to something not a number), naming it and saying what the model law
// does instead.
func TestLawKind(t *testing.T) {
	for _, tc := range []struct {
		src  string
		errs []string // each a substring of the error; none: valid
	}{
		{src: ""},
		{src: "law: ~\n"},
		{src: "law: {high: 0.9}\n"},
		{src: "law: {kind: model}\n"},
		{src: "law: {kind: model, high: 0.9, low: 0.6, hold: 10s, quantum: 0.02, stale_after: 5, max_shed: 1}\n"},
		{src: "law: {probe: 0.05}\n"},
		{src: "law: {kind: model, probe: 0.1}\n"},
		{src: "law: {kind: model, probe: -1}\n"},
		{src: "law: {evidence: ~}\n"}, // null: as if left out
		{src: "law: {kind: model, probe: 0.5}\n", errs: []string{"line 1: law.probe: 0.5: at most 0.2 (a share of the users), or negative for no probe"}},
		{src: "law:\n  kind: search\n", errs: []string{
			`line 2: law.kind: "search": the search law was removed: the model law is the only law; remove it`}},
		{src: "law: {kind: Model}\n", errs: []string{`line 1: law.kind: "Model": want model, the only law (the default)`}},
		{src: "law: {kind: pid}\n", errs: []string{`line 1: law.kind: "pid": want model, the only law (the default)`}},
		{src: "law:\n  evidence: 3\n", errs: []string{
			"line 2: law.evidence: no longer exists: the law gathers no evidence: it measures the load and sets the levels from it; remove it"}},
		{src: "law:\n  down_gain: 2\n", errs: []string{
			"line 2: law.down_gain: no longer exists: the law has no gains: it measures the load and sets the levels the load allows; remove it"}},
		{src: "law:\n  up_gain: 2\n", errs: []string{
			"line 2: law.up_gain: no longer exists: the law has no gains: it measures the load and sets the levels the load allows; remove it"}},
		{src: "law:\n  proportional: 1\n", errs: []string{
			"line 2: law.proportional: no longer exists: the law has no gains: it measures the load and sets the levels the load allows; remove it"}},
		{src: "law:\n  max_rise: 0.5\n", errs: []string{
			"line 2: law.max_rise: no longer exists: the law brightens at once as far as the measured load allows; remove it"}},
		{src: "law:\n  max_step: 0.2\n", errs: []string{
			"line 2: law.max_step: no longer exists: the law takes no trial steps: it measures the load and sets the levels from it; remove it"}},
		{src: "law:\n  probe_after: 30s\n  probe_rise: 0.1\n", errs: []string{
			"line 2: law.probe_after: no longer exists: the law does not probe upwards",
			"line 3: law.probe_rise: no longer exists: the law does not probe upwards"}},
		{src: "features:\n  - {name: recommendations, cost: .nan}\n", errs: []string{
			"features[0].cost: NaN: want a finite number, not negative"}},
		{src: "law:\n  evidence: 0\n", errs: []string{"line 2: law.evidence: no longer exists"}},
		{src: "law:\n  max_rise: fast\n", errs: []string{"line 2: law.max_rise: no longer exists"}},
		{src: "law:\n  kind: search\n  down_gain: 2\n  up_gain: 2\n  proportional: 1\n  max_rise: 0.5\n  evidence: 3\n  max_step: 0.2\n", errs: []string{
			`line 2: law.kind: "search": the search law was removed`,
			"line 3: law.down_gain: no longer exists", "line 4: law.up_gain: no longer exists",
			"line 5: law.proportional: no longer exists", "line 6: law.max_rise: no longer exists",
			"line 7: law.evidence: no longer exists", "line 8: law.max_step: no longer exists"}},
		{src: "services:\n  - name: a\n    features: [{name: x}]\n    law: {evidence: 3}\n", errs: []string{
			"line 4: services[0].law.evidence: no longer exists: the law gathers no evidence"}},
	} {
		c, err := parseConfig("law.yaml", []byte(tc.src))
		if len(tc.errs) > 0 {
			require.Error(t, err, "%q", tc.src)
			for _, want := range tc.errs {
				assert.ErrorContains(t, err, want, "%q", tc.src)
			}
			assert.NotContains(t, err.Error(), "unknown field", "%q: the error says what replaced it", tc.src)
			continue
		}
		require.NoError(t, err, "%q", tc.src)
		_, err = dimmer.New(c.Dimmer)
		assert.NoError(t, err, "%q", tc.src)
	}
}

// TestPrecedence: flags over environment over file over defaults.
func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(file, []byte("listen: 127.0.0.1:7001\ntick: 2s\nstate_dir: "+dir+"\n"), 0o644))
	env := map[string]string{"BROWNOUTD_CONFIG": file, "BROWNOUTD_LISTEN": "127.0.0.1:7002"}
	getenv := func(k string) string { return env[k] }

	f := serveFlags{}
	c, _, err := f.settings(getenv, map[string]bool{})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7002", c.Listen, "environment over file")
	assert.Equal(t, 2*time.Second, c.Dimmer.Tick, "file over defaults")

	f = serveFlags{listen: "127.0.0.1:7003", tick: "500ms"}
	c, _, err = f.settings(getenv, map[string]bool{"listen": true, "tick": true})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7003", c.Listen, "flags over environment")
	assert.Equal(t, 500*time.Millisecond, c.Dimmer.Tick)

	f = serveFlags{tick: "5ms"}
	_, _, err = f.settings(getenv, map[string]bool{"tick": true})
	assert.ErrorContains(t, err, "want a duration from 100ms")
}

// TestStateDirDefault: systemd's StateDirectory, else the XDG state
// home, else ~/.local/state; never a shared temporary directory — with
// none of them, serve refuses to start and says what to set.
func TestStateDirDefault(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"STATE_DIRECTORY": "/var/lib/brownoutd:/var/lib/other", "XDG_STATE_HOME": "/x", "HOME": "/home/op"}, "/var/lib/brownoutd"},
		{map[string]string{"XDG_STATE_HOME": "/x", "HOME": "/home/op"}, "/x/brownoutd"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/home/op"}, "/home/op/.local/state/brownoutd"},
		{map[string]string{"HOME": "/home/op"}, "/home/op/.local/state/brownoutd"},
		{map[string]string{"BROWNOUTD_STATE_DIR": "/srv/b", "HOME": "/home/op"}, "/srv/b"},
		{map[string]string{}, ""},
	} {
		f := serveFlags{}
		c, _, err := f.settings(func(k string) string { return tc.env[k] }, map[string]bool{})
		if tc.want == "" {
			require.Error(t, err, "%v", tc.env)
			assert.ErrorContains(t, err, "--state-dir")
			continue
		}
		require.NoError(t, err, "%v", tc.env)
		assert.Equal(t, tc.want, c.StateDir, "%v", tc.env)
	}
}

// TestPushTokensOffLoopback: the push source off loopback needs push
// tokens; on loopback it may go without (the API then checks each push as
// it checks the operators' tokenless writes).
func TestPushTokensOffLoopback(t *testing.T) {
	dir := t.TempDir()
	toks := filepath.Join(dir, "push")
	require.NoError(t, os.WriteFile(toks, []byte("shop push-token-0123456789\n"), 0o600))
	for _, tc := range []struct {
		listen, tokens string
		ok             bool
	}{
		{"127.0.0.1:8080", "", true},
		{"localhost:8080", "", true},
		{"[::1]:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"10.0.0.5:8080", "", false},
		{"0.0.0.0:8080", toks, true},
	} {
		f := serveFlags{listen: tc.listen, pushToks: tc.tokens, stateDir: dir}
		_, _, err := f.settings(func(string) string { return "" }, map[string]bool{"listen": true, "push-tokens": true, "state-dir": true})
		if tc.ok {
			assert.NoError(t, err, tc.listen)
		} else {
			assert.ErrorContains(t, err, "needs push tokens", tc.listen)
		}
	}
}

func TestTokensFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(p, []byte("# operators\nalice: 0123456789abcdef0123\nbob 0123456789abcdef9999\n"), 0o600))
	toks, err := readTokens(p)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"alice": "0123456789abcdef0123", "bob": "0123456789abcdef9999"}, toks)
	require.NoError(t, os.WriteFile(p, []byte("alice short\n"), 0o600))
	_, err = readTokens(p)
	assert.ErrorContains(t, err, "at least 16")
	require.NoError(t, os.WriteFile(p, []byte("alice 0123456789abcdef0123\nbob 0123456789abcdef0123\n"), 0o600))
	_, err = readTokens(p)
	assert.ErrorContains(t, err, "its own", "one token, two names: the audit could not tell who")
	require.NoError(t, os.WriteFile(p, []byte("# nobody\n"), 0o600))
	_, err = readTokens(p)
	assert.ErrorContains(t, err, "no tokens")
}

// FuzzConfig: whatever the file says, parsing never panics, and a config
// it accepts makes a controller.
func FuzzConfig(f *testing.F) {
	b, _ := os.ReadFile("brownoutd.example.yaml")
	f.Add(b)
	f.Add([]byte("features: [{name: a, floor: 0.5}]\ntargets: [{signal: error.ratio, target: '0.1'}]"))
	f.Add([]byte("tick: 100ms\nlaw: {high: 2, low: 1}"))
	f.Add([]byte("law: {kind: model, high: 0.9, evidence: 3}"))
	f.Add([]byte("law: {kind: search, max_rise: fast}"))
	b, _ = os.ReadFile("brownoutd.services.example.yaml")
	f.Add(b)
	f.Add([]byte("tick: 200ms\nservices: [{name: a, features: [{name: x}]}, {name: b, tick: 1s, sources: {push: {max_instances: 3}}}]"))
	f.Add([]byte("tick: 5x\nmax_conns: 10\nfeatures: [{name: a, floor: 2, rank: 1.5}]\nlaw: {hold: 5, high: 50, stale_after: -3, max_shed: .nan}"))
	f.Add([]byte("max_conns: \"lots\"\nlaw: [1]\nlisten: [a]\nfeatures: {a: 1}\nsegments: [{name: a}, {name: a}]"))
	f.Add([]byte("law: {high: 0.5}\nschedule: [{feature: x, from: '2026-11-11 00:00', for: 1m, max: 0.5}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseConfig("fuzz.yaml", data)
		if err != nil {
			// The parser's own checks say everything the controller
			// refuses, in the file's terms.
			if strings.Contains(err.Error(), "the controller refuses it") {
				t.Fatalf("only the controller refused: %v", err)
			}
			return
		}
		c.inherit()
		for _, s := range c.units() {
			if err := service.Check(s.Name); s.Name != "" && err != nil {
				t.Fatalf("accepted service name %q: %v", s.Name, err)
			}
			if _, err := dimmer.New(s.Dimmer); err != nil && !strings.Contains(err.Error(), "dimmer") {
				t.Fatalf("accepted config, controller refused oddly: %v", err)
			}
		}
	})
}

// TestFilesAreBounded: a token or configuration file that is not a
// regular file (a device that never ends, a FIFO that would block the
// reload) or is over its bound is refused at once, saying why.
func TestFilesAreBounded(t *testing.T) {
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero")
	require.NoError(t, os.Symlink("/dev/zero", zero))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	big := filepath.Join(dir, "big")
	line := "alice 0123456789abcdef0123\n"
	bigText := strings.Repeat("# "+strings.Repeat("x", 60)+"\n", maxTokensFile/60) + line
	require.NoError(t, os.WriteFile(big, []byte(bigText), 0o600))
	for path, want := range map[string]string{
		zero: "not a regular file but a device",
		fifo: "not a regular file but a FIFO",
		dir:  "not a regular file but a directory",
		big:  fmt.Sprintf("%d bytes: at most 1048576", len(bigText)),
	} {
		_, err := readTokens(path)
		assert.ErrorContains(t, err, path+": "+want)
		f := serveFlags{config: path}
		_, _, err = f.settings(func(string) string { return "" }, map[string]bool{"config": true})
		assert.ErrorContains(t, err, path+": "+want)
	}
	// A symbolic link to a regular file is fine.
	ok := filepath.Join(dir, "ok")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokens"), []byte(line), 0o600))
	require.NoError(t, os.Symlink(filepath.Join(dir, "tokens"), ok))
	toks, err := readTokens(ok)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"alice": "0123456789abcdef0123"}, toks)
}

// TestConfigBounds: the controller's bounds are reported with the line of
// what exceeds them.
func TestConfigBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString("features:\n")
	for i := range dimmer.MaxFeatures + 1 {
		fmt.Fprintf(&b, "  - name: f%d\n", i)
	}
	b.WriteString("segments:\n  - name: " + strings.Repeat("s", dimmer.MaxName+1) + "\n")
	_, err := parseConfig("many.yaml", []byte(b.String()))
	assert.ErrorContains(t, err, "line 2: features: 1001 features: at most 1000")
	assert.ErrorContains(t, err, "segments[0].name: 65 bytes long: at most 64")
}

// TestConnsPerClient: the cap of connections per client, from the file,
// the environment or a flag; 0 turns it off; anything else is refused.
func TestConnsPerClient(t *testing.T) {
	c, err := parseConfig("c.yaml", []byte("max_conns_per_client: 64\n"))
	require.NoError(t, err)
	assert.Equal(t, server.Limits{PerClient: 64}, c.Conns)
	c, err = parseConfig("c.yaml", []byte("max_conns_per_client: 0\n"))
	require.NoError(t, err)
	assert.Equal(t, server.Limits{PerClient: -1}, c.Conns, "0: no cap")
	_, err = parseConfig("c.yaml", []byte("max_conns_per_client: -3\n"))
	assert.ErrorContains(t, err, "line 1: max_conns_per_client: -3: want a number of connections, or 0 for no cap")
	c, err = parseConfig("(defaults)", nil)
	require.NoError(t, err)
	assert.Equal(t, server.Limits{}, c.Conns, "the default cap")

	var f serveFlags
	c, _, err = f.settings(func(k string) string {
		return map[string]string{"BROWNOUTD_MAX_CONNS_PER_CLIENT": "9", "HOME": t.TempDir()}[k]
	}, map[string]bool{})
	require.NoError(t, err)
	assert.Equal(t, server.Limits{PerClient: 9}, c.Conns)
	f.perClient = "many"
	_, _, err = f.settings(func(k string) string { return map[string]string{"HOME": t.TempDir()}[k] }, map[string]bool{"max-conns-per-client": true})
	assert.ErrorContains(t, err, `max conns per client "many"`)
	assert.Equal(t, []string{"max_conns_per_client"}, restartOnly(&config{}, &config{Conns: server.Limits{PerClient: 9}}))
}

// TestConnsAndStreams: max_conns and max_streams, from the file, the
// environment or a flag: the listener's cap and the daemon's stream cap
// (half of the connections unless set); a cap out of range, or streams
// that would leave less than an eighth of the connections, refused with
// the line and a reason; both take effect at a restart only.
func TestConnsAndStreams(t *testing.T) {
	c, err := parseConfig("(defaults)", nil)
	require.NoError(t, err)
	assert.Equal(t, server.MaxConns, c.maxConns())
	assert.Equal(t, api.DefaultMaxStreams, c.maxStreams(), "the default: half of the default connections")

	c, err = parseConfig("c.yaml", []byte("max_conns: 12000\nmax_streams: 10000\nmax_conns_per_client: 0\n"))
	require.NoError(t, err)
	assert.Equal(t, server.Limits{PerClient: -1, MaxConns: 12000}, c.Conns)
	assert.Equal(t, 10000, c.maxStreams())
	c, err = parseConfig("c.yaml", []byte("max_conns: 20000\n"))
	require.NoError(t, err)
	assert.Equal(t, 10000, c.maxStreams(), "half of max_conns")

	for src, want := range map[string]string{
		"max_conns: -1\n":                       "line 1: max_conns: -1: want a number of connections from 64 to 1048576",
		"max_conns: 0\n":                        "line 1: max_conns: 0: want a number of connections from 64 to 1048576",
		"max_conns: 10\n":                       "line 1: max_conns: 10: want a number of connections from 64 to 1048576",
		"max_conns: 2000000\n":                  "line 1: max_conns: 2000000: want a number of connections from 64 to 1048576",
		"max_conns: many\n":                     `line 1: max_conns: "many": want a whole number`,
		"max_streams: 0\n":                      "line 1: max_streams: 0: want a number of streams, at least 1",
		"max_streams: -5\n":                     "line 1: max_streams: -5: want a number of streams, at least 1",
		"max_streams: 5000\n":                   "line 1: max_streams: 5000 streams: at most 3584 with max_conns 4096 — every stream holds a connection",
		"max_conns: 1000\nmax_streams: 1000\n":  "line 2: max_streams: 1000 streams: at most 875 with max_conns 1000",
		"max_streams: 20000\nmax_conns: 8000\n": "line 1: max_streams: 20000 streams: at most 7000 with max_conns 8000",
	} {
		_, err := parseConfig("c.yaml", []byte(src))
		assert.ErrorContains(t, err, want, "%q", src)
	}

	home := t.TempDir()
	var f serveFlags
	c, _, err = f.settings(func(k string) string {
		return map[string]string{"BROWNOUTD_MAX_CONNS": "12000", "BROWNOUTD_MAX_STREAMS": "10000", "HOME": home}[k]
	}, map[string]bool{})
	require.NoError(t, err)
	assert.Equal(t, 12000, c.Conns.MaxConns)
	assert.Equal(t, 10000, c.maxStreams())
	f.maxStreams = "9000"
	_, _, err = f.settings(func(k string) string {
		return map[string]string{"BROWNOUTD_MAX_CONNS": "8000", "HOME": home}[k]
	}, map[string]bool{"max-streams": true})
	assert.ErrorContains(t, err, "max streams: 9000 streams: at most 7000 with max_conns 8000", "a flag checked against the environment's max_conns")
	f.maxConns = "lots"
	_, _, err = f.settings(func(k string) string { return map[string]string{"HOME": home}[k] }, map[string]bool{"max-conns": true})
	assert.ErrorContains(t, err, `max conns "lots": want a number of connections from 64 to 1048576`)
	f = serveFlags{maxStreams: "0"}
	_, _, err = f.settings(func(k string) string { return map[string]string{"HOME": home}[k] }, map[string]bool{"max-streams": true})
	assert.ErrorContains(t, err, `max streams "0": want a number of streams, at least 1`)

	files := writeFiles(t, t.TempDir(), map[string]string{"one.yaml": "max_conns: 12000\nmax_streams: 10000\n",
		"services.yaml": "max_conns: 12000\nservices:\n  - {name: a, features: [{name: f}]}\n  - {name: b, features: [{name: g}]}\n"})
	out, _, err := runArgs("check-config", files["one.yaml"])
	require.NoError(t, err)
	assert.Contains(t, out, "; at most 12000 connections, 10000 streams (each connection a file descriptor: ulimit -n above 12000))")
	out, _, err = runArgs("check-config", files["services.yaml"])
	require.NoError(t, err)
	assert.Contains(t, out, "; at most 12000 connections, 6000 streams of every service together")

	assert.Equal(t, []string{"max_conns", "max_streams"}, restartOnly(&config{}, &config{Conns: server.Limits{MaxConns: 12000}}),
		"max_conns, and the stream cap that follows it")
	assert.Equal(t, []string{"max_streams"}, restartOnly(&config{}, &config{MaxStreams: 100}))
	assert.Empty(t, restartOnly(&config{}, &config{MaxStreams: api.DefaultMaxStreams}), "the default, said")
}

// TestDeployConfigs: the ready-made daemon configurations under deploy/
// pass check-config.
func TestDeployConfigs(t *testing.T) {
	files, err := filepath.Glob("../../deploy/brownoutd/*.yaml")
	require.NoError(t, err)
	require.Len(t, files, 3, "push, scrape and promql")
	for _, f := range files {
		out, errOut, err := runArgs("check-config", f)
		assert.NoError(t, err, "%s: %s", f, errOut)
		assert.Contains(t, out, "ok")
	}
}

// TestCORSOrigins: no origin by default; cors_origins in the file, each
// checked with its line (a path, another scheme, a wildcard are errors),
// written as browsers send them; BROWNOUTD_CORS_ORIGINS over the file and
// --cors-origin (repeatable, commas too) over both; check-config says
// which pages may evaluate.
func TestCORSOrigins(t *testing.T) {
	c, err := parseConfig("(defaults)", nil)
	require.NoError(t, err)
	assert.Empty(t, c.CORSOrigins, "none by default")

	c, err = parseConfig("ok.yaml", []byte("cors_origins:\n  - http://127.0.0.1:8081\n  - HTTPS://Shop.Example:443\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"http://127.0.0.1:8081", "https://shop.example"}, c.CORSOrigins)

	_, err = parseConfig("bad.yaml", []byte("tick: 1s\ncors_origins:\n  - https://shop.example/\n  - ftp://x\n  - \"*\"\n"))
	require.Error(t, err)
	for _, want := range []string{
		`line 3: cors_origins[0]: "https://shop.example/": a path`,
		`line 4: cors_origins[1]: "ftp://x": want an http:// or https:// origin`,
		`line 5: cors_origins[2]: "*": a wildcard`,
	} {
		assert.Contains(t, err.Error(), want)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(file, []byte("state_dir: "+dir+"\ncors_origins: [https://file.example]\n"), 0o644))
	env := map[string]string{"BROWNOUTD_CONFIG": file}
	getenv := func(k string) string { return env[k] }
	c, _, err = (&serveFlags{}).settings(getenv, map[string]bool{})
	require.NoError(t, err)
	assert.Equal(t, []string{"https://file.example"}, c.CORSOrigins, "the file's")
	env["BROWNOUTD_CORS_ORIGINS"] = "https://env.example, http://127.0.0.1:9000"
	c, _, err = (&serveFlags{}).settings(getenv, map[string]bool{})
	require.NoError(t, err)
	assert.Equal(t, []string{"https://env.example", "http://127.0.0.1:9000"}, c.CORSOrigins, "environment over file")

	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f.register(fs)
	require.NoError(t, fs.Parse([]string{"--cors-origin", "https://a.example", "--cors-origin", "https://b.example,https://c.example:443"}))
	c, _, err = f.settings(getenv, map[string]bool{"cors-origin": true})
	require.NoError(t, err)
	assert.Equal(t, []string{"https://a.example", "https://b.example", "https://c.example"}, c.CORSOrigins, "flags over environment")

	f = serveFlags{corsOrigins: originList{"https://shop.example/checkout"}}
	_, _, err = f.settings(getenv, map[string]bool{"cors-origin": true})
	assert.ErrorContains(t, err, `cors origin "https://shop.example/checkout": a path`)
	env["BROWNOUTD_CORS_ORIGINS"] = "null"
	_, _, err = (&serveFlags{}).settings(getenv, map[string]bool{})
	assert.ErrorContains(t, err, `cors origin "null"`)

	out, _, err := runArgs("check-config", file)
	require.NoError(t, err)
	assert.Contains(t, out, "pages of https://file.example may evaluate")
	require.NoError(t, os.WriteFile(file, []byte("cors_origins: [https://file.example/]\n"), 0o644))
	_, _, err = runArgs("check-config", file)
	assert.ErrorContains(t, err, "cors_origins[0]")
}

// TestPromQLSourcePeriod: sources.promql's period and selector reach the
// source's query of a period's counts (half the range by default).
func TestPromQLSourcePeriod(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		mu.Lock()
		queries = append(queries, r.Form.Get("query"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
	}))
	t.Cleanup(prom.Close)
	for _, tc := range []struct{ yaml, want string }{
		{"range: 10s, selector: 'service=\"shop\"', period: 7s", `increase(brownout_work_requests_total{service="shop"}[7s])`},
		{"range: 10s", `increase(brownout_work_requests_total[5s])`},
		{"selector: 'service=\"shop\"'", `increase(brownout_work_requests_total{service="shop"}[30s])`},
	} {
		c, err := parseConfig("p.yaml", []byte(fmt.Sprintf("features: [{name: a}]\nsources: {promql: {url: %s, %s}}\n", prom.URL, tc.yaml)))
		require.NoError(t, err, tc.yaml)
		c.inherit()
		src, _, err := buildSource(c.units()[0])
		require.NoError(t, err)
		mu.Lock()
		queries = nil
		mu.Unlock()
		src.Snapshot(context.Background(), time.Now())
		mu.Lock()
		assert.True(t, slices.ContainsFunc(queries, func(q string) bool { return strings.Contains(q, tc.want) }), "%s: %s in %q", tc.yaml, tc.want, queries)
		if strings.Contains(tc.yaml, "selector") {
			for _, q := range queries {
				assert.Contains(t, q, `service="shop"`, "every query selects")
			}
		}
		mu.Unlock()
	}
	_, err := parseConfig("p.yaml", []byte("features: [{name: a}]\nsources: {promql: {url: http://x, range: 10s, period: 20s}}\n"))
	assert.ErrorContains(t, err, "line 2: sources.promql.period: 20s: want at most the range, 10s")
}

// TestConfigErrorsAll: check-config names every error's field path and
// line, all of them in one run — a value that cannot be read (a bad
// duration, a string for a number) does not stop the rest of the file
// being checked — and says what the controller refuses in the file's
// keys, not dimmer's.
func TestConfigErrorsAll(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"tick: 5x\nmax_conns: 10\nfeatures: [{name: a, floor: 2}]\n", []string{
			`line 1: tick: "5x": want a duration`,
			"line 2: max_conns: 10: want a number of connections",
			"line 3: features[0].floor: 2: want 0 ≤ floor < 1"}},
		{"max_conns: 10\nfeatures:\n  - name: a\n    colour: red\nlaw: {hold: 5}\n", []string{
			"line 1: max_conns: 10",
			"line 4: features[0].colour: unknown field",
			`line 5: law.hold: "5": want a duration`}},
		{"max_conns: \"lots\"\n", []string{`line 1: max_conns: "lots": want a whole number`}},
		{"tick: 1s\nlaw: {high: lots}\n", []string{`line 2: law.high: "lots": want a number`}},
		{"law: [1]\nlisten: [a]\n", []string{"line 1: law: a list: want a mapping", "line 2: listen: a list: want a string"}},
		{"law: {high: 50, stale_after: -3}\n", []string{
			"line 1: law.high: 50: at most 1.5",
			"line 1: law.stale_after: -3: want a number of periods"}},
		{"law: {high: 0.5}\n", []string{"line 1: law.high: 0.5: must be above law.low (0.7, the default)"}},
		{"law: {max_shed: .nan}\n", []string{"line 1: law.max_shed: NaN: want at most 2"}},
		{"law: {max_shed: 7}\n", []string{"line 1: law.max_shed: 7: want at most 2"}},
		{"segments: [{name: vip, offset: 0.2}, {name: vip}]\n", []string{`line 1: segments[1].name: "vip": declared twice`}},
		{"schedule:\n  - {feature: nope, from: \"2026-11-11 00:00\", for: 1m, max: 0.5}\n", []string{`line 2: schedule[0].feature: "nope": not a feature`}},
		{"services:\n  - name: a\n    law: {high: 2}\n", []string{"line 3: services[0].law.high: 2: at most 1.5"}},
	} {
		_, err := parseConfig("bad.yaml", []byte(tc.src))
		require.Error(t, err, tc.src)
		var ce *configError
		require.ErrorAs(t, err, &ce, tc.src)
		require.Len(t, ce.errs, len(tc.want), "%s: %v", tc.src, err)
		for i, w := range tc.want {
			assert.Contains(t, ce.errs[i], w, tc.src)
		}
		assert.NotContains(t, err.Error(), "dimmer", tc.src)
		assert.NotContains(t, err.Error(), "cascade at", tc.src)
	}
}

// TestLawBoundsAreTheDimmers: the bounds the parser checks law: against
// are dimmer's own.
func TestLawBoundsAreTheDimmers(t *testing.T) {
	base := dimmer.Config{Targets: []dimmer.Target{{Signal: signals.LatencyP99, Target: 0.3}}, Features: []dimmer.Feature{{Name: "a"}}}
	ok := func(f func(*dimmer.Config)) error {
		c := base
		f(&c)
		_, err := dimmer.New(c)
		return err
	}
	assert.NoError(t, ok(func(c *dimmer.Config) { c.High, c.Low = cascadeAt, defaultLow }))
	assert.Error(t, ok(func(c *dimmer.Config) { c.High, c.Low = math.Nextafter(cascadeAt, 2), defaultLow }))
	assert.NoError(t, ok(func(c *dimmer.Config) { c.High = math.Nextafter(defaultLow, 1) }), "the default low")
	assert.Error(t, ok(func(c *dimmer.Config) { c.High = defaultLow }), "the default low")
	assert.NoError(t, ok(func(c *dimmer.Config) { c.Low = math.Nextafter(defaultHigh, 0) }), "the default high")
	assert.Error(t, ok(func(c *dimmer.Config) { c.Low = defaultHigh }), "the default high")
}

// TestCheckConfigRunsServesChecks: check-config refuses what serve
// refuses (a non-loopback push source without push tokens), and what
// cannot work though it would start: a port out of range, an empty
// PromQL query or a range PromQL cannot read, a scrape target without a
// host, push windows that hold nothing, a tick of hours, more instances
// than the memory bound means, a ratio target over 1.
func TestCheckConfigRunsServesChecks(t *testing.T) {
	dir := t.TempDir()
	for src, want := range map[string]string{
		"listen: \":8080\"\n":                               "line 1: listen: the push source on :8080, not a loopback address, needs push tokens",
		"listen: \"127.0.0.1:99999\"\n":                     "line 1: listen: \"127.0.0.1:99999\": want host:port with a port from 0 to 65535",
		"tick: 1000h\n":                                     "line 1: tick: 1000h0m0s: want from 100ms to 1m0s",
		"targets:\n  - {signal: reject.ratio, target: 5}\n": "line 2: targets[0].target: \"5\": want a share from 0 to 1",
		"sources:\n  scrape: {targets: [\"http://\"]}\n":    "line 2: sources.scrape.targets[0]: \"http://\": want an http(s) URL with a host",
		"sources:\n  promql:\n    url: http://p:9090\n    queries: {latency.p99: \"\"}\n": "line 4: sources.promql.queries.latency.p99: an empty query",
		"sources:\n  promql: {url: http://p:9090, range: banana}\n":                       "line 2: sources.promql.range: \"banana\": want a range",
		"sources:\n  push:\n    window: 1ns\n":                                            "line 3: sources.push.window: 1ns: want from 2s to 10m0s",
		"sources:\n  push:\n    expire: 1ns\n":                                            "line 3: sources.push.expire: 1ns: want from 3s to 10m0s",
		"sources:\n  push:\n    max_instances: 99999999\n":                                "line 3: sources.push.max_instances: 99999999: want a number of instances up to 10000",
	} {
		p := filepath.Join(dir, "c.yaml")
		require.NoError(t, os.WriteFile(p, []byte(src), 0o600))
		var out, errOut strings.Builder
		err := runCheckConfig([]string{p}, &out, &errOut)
		require.Error(t, err, "%q: %s", src, out.String())
		assert.Contains(t, err.Error(), want, src)
	}
	// serve says so too, without a line.
	p := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(p, []byte("listen: \"127.0.0.1:99999\"\n"), 0o600))
	f := serveFlags{config: p, stateDir: dir}
	_, _, err := f.settings(func(string) string { return "" }, map[string]bool{"config": true, "state-dir": true})
	assert.ErrorContains(t, err, "want host:port with a port from 0 to 65535")
	f = serveFlags{listen: "127.0.0.1:99999", stateDir: dir}
	_, _, err = f.settings(func(string) string { return "" }, map[string]bool{"listen": true, "state-dir": true})
	assert.ErrorContains(t, err, "want host:port with a port from 0 to 65535", "--listen")
	f = serveFlags{tick: "1000h", stateDir: dir}
	_, _, err = f.settings(func(string) string { return "" }, map[string]bool{"tick": true, "state-dir": true})
	assert.ErrorContains(t, err, "want a duration from 100ms to 1m0s", "--tick")
	// In bounds: ok.
	require.NoError(t, os.WriteFile(p, []byte("tick: 1m\ntargets:\n  - {signal: reject.ratio, target: 1}\nsources:\n  push: {window: 2s, expire: 3s, max_instances: 10000}\n"), 0o600))
	var out strings.Builder
	require.NoError(t, runCheckConfig([]string{p}, &out, &out))
	assert.Contains(t, out.String(), "ok")
}
