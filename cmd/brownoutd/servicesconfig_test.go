package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
)

// TestServicesExampleConfig keeps the services example valid: three
// services, each with its own features, targets, tick and source, and
// each a controller.
func TestServicesExampleConfig(t *testing.T) {
	b, err := os.ReadFile("brownoutd.services.example.yaml")
	require.NoError(t, err)
	c, err := parseConfig("brownoutd.services.example.yaml", b)
	require.NoError(t, err)
	require.Len(t, c.Services, 3)
	c.inherit()
	for _, s := range c.Services {
		_, err := dimmer.New(s.Dimmer)
		require.NoError(t, err, s.Name)
	}
	shop, search, checkout := c.Services[0], c.Services[1], c.Services[2]
	assert.Equal(t, "shop", shop.Name)
	assert.Equal(t, "recommendations, reviews, gallery", featureNames(shop.Dimmer))
	assert.Equal(t, whole(200), shop.Push.MaxInstances)
	assert.Len(t, shop.Dimmer.Schedule, 1)
	assert.Equal(t, time.Second, shop.Dimmer.Tick, "the top level's tick")
	assert.Equal(t, 500*time.Millisecond, search.Dimmer.Tick, "its own")
	assert.Equal(t, 0.15, search.Dimmer.Targets[0].Target)
	assert.Equal(t, map[string]bool{"suggestions": true, "spelling": false}, search.Defaults)
	assert.Nil(t, search.Push, "scraped, no push source")
	require.NotNil(t, search.Scrape)
	assert.Equal(t, `service="checkout"`, checkout.PromQL.Selector)
	assert.Nil(t, c.Push, "the top level has no source of its own")

	out, errOut, err := runArgs("check-config", "brownoutd.services.example.yaml")
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "ok (3 services: shop: features recommendations, reviews, gallery; search: features suggestions, spelling; checkout: features upsell)")
}

// TestServicesConfigErrors: every error of a file with services, with
// its line and its path under services[i].
func TestServicesConfigErrors(t *testing.T) {
	src := `features: [{name: a}]
law: {high: 0.9}
services:
  - name: Shop
    features: [{name: x, floor: 2}]
    sources: {promql: {url: http://x, selector: "job=shop", period: 500ms}}
  - name: b
    colour: red
  - name: b
    sources: {push: {max_instances: -1}}
  - features: [{name: y}]
  - name: c
    tick: 10ms
    sources: {push: {}, scrape: {targets: [http://x/metrics]}}
`
	_, err := parseConfig("bad.yaml", []byte(src))
	require.Error(t, err)
	for _, want := range []string{
		"line 1: features: with services:, each service has its own (services[].features)",
		"line 2: law: with services:",
		`line 4: services[0].name: service "Shop": want lower-case letters`,
		"line 5: services[0].features[0].floor",
		`line 6: services[0].sources.promql.selector: "job=shop": want label matchers`,
		"line 6: services[0].sources.promql.period: 500ms: want a second or more",
		"line 8: services[1].colour: unknown field",
		`line 9: services[2].name: "b": declared twice`,
		"line 10: services[2].sources.push.max_instances: -1",
		"line 11: services[3].name: a service's name is empty",
		"line 13: services[4].tick: 10ms: want from 100ms to 1m0s",
		"line 14: services[4].sources: choose one of push, scrape and promql",
	} {
		assert.Contains(t, err.Error(), want)
	}
	var many []byte
	many = append(many, "services:\n"...)
	for i := range maxServices + 1 {
		many = append(many, []byte("  - name: s"+string(rune('a'+i%26))+string(rune('a'+i/26))+"\n")...)
	}
	_, err = parseConfig("many.yaml", many)
	assert.ErrorContains(t, err, "services: 101 services: at most 100")
}

// TestServicesLawKind: each service runs the model law with its own
// settings, and the removed search law and its settings are errors at the
// service's path.
func TestServicesLawKind(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`services:
  - name: a
    law: {kind: model, high: 0.9}
  - name: b
    law: {low: 0.6}
`), 0o600))
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	c, err := parseConfig(file, b)
	require.NoError(t, err)
	assert.Equal(t, 0.9, c.Services[0].Dimmer.High)
	assert.Zero(t, c.Services[0].Dimmer.Low, "a: the default low")
	assert.Equal(t, 0.6, c.Services[1].Dimmer.Low)
	assert.Zero(t, c.Services[1].Dimmer.High, "b: the default high")
	out, errOut, err := runArgs("check-config", file)
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "ok (2 services: a: features recommendations, reviews, gallery; b: features recommendations, reviews, gallery)")

	_, err = parseConfig("bad.yaml", []byte(`services:
  - name: a
    law: {kind: search}
  - name: b
    law:
      kind: model
      max_step: 0.2
  - name: c
    law: {kind: feedforward}
`))
	require.Error(t, err)
	assert.ErrorContains(t, err, `line 3: services[0].law.kind: "search": the search law was removed: the model law is the only law; remove it`)
	assert.ErrorContains(t, err, "line 7: services[1].law.max_step: no longer exists: the law takes no trial steps: it measures the load and sets the levels from it; remove it")
	assert.ErrorContains(t, err, `line 9: services[2].law.kind: "feedforward": want model, the only law (the default)`)
}

// TestServicesInherit: a service without its own tick or token files
// takes the top level's (the file's, or the flags' over it), each kind of
// token on its own; its state lives in its own directory under the
// daemon's; the push source off loopback needs push tokens service by
// service.
func TestServicesInherit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o600))
		return p
	}
	ops := write("ops", "alice operator-token-0123456789\n")
	pushA := write("push-a", "a push-token-a-0123456789\n")
	pushAll := write("push-all", "fleet push-token-all-0123456789\n")
	file := write("b.yaml", `tick: 2s
auth:
  operator_tokens_file: `+ops+`
services:
  - name: a
    auth: {push_tokens_file: `+pushA+`}
  - name: b
    tick: 500ms
`)
	env := map[string]string{"BROWNOUTD_CONFIG": file, "BROWNOUTD_STATE_DIR": dir}
	c, _, err := (&serveFlags{}).settings(func(k string) string { return env[k] }, map[string]bool{})
	require.NoError(t, err)
	a, b := c.Services[0], c.Services[1]
	assert.Equal(t, 2*time.Second, a.Dimmer.Tick)
	assert.Equal(t, 500*time.Millisecond, b.Dimmer.Tick)
	assert.Equal(t, map[string]string{"alice": "operator-token-0123456789"}, a.OperatorTokens)
	assert.Equal(t, a.OperatorTokens, b.OperatorTokens)
	assert.Equal(t, map[string]string{"a": "push-token-a-0123456789"}, a.PushTokens)
	assert.Empty(t, b.PushTokens)
	assert.Equal(t, filepath.Join(dir, "services", "a"), c.stateDir(a))
	assert.Equal(t, dir, c.stateDir(&c.serviceConfig))

	f := serveFlags{tick: "300ms"}
	c, _, err = f.settings(func(k string) string { return env[k] }, map[string]bool{"tick": true})
	require.NoError(t, err)
	assert.Equal(t, 300*time.Millisecond, c.Services[0].Dimmer.Tick, "the flag is the top level's")
	assert.Equal(t, 500*time.Millisecond, c.Services[1].Dimmer.Tick, "a service's own stays")

	f = serveFlags{listen: "0.0.0.0:8080"}
	_, _, err = f.settings(func(k string) string { return env[k] }, map[string]bool{"listen": true})
	assert.ErrorContains(t, err, "the push source of service b on 0.0.0.0:8080, not a loopback address, needs push tokens")
	f = serveFlags{listen: "0.0.0.0:8080", pushToks: pushAll}
	c, _, err = f.settings(func(k string) string { return env[k] }, map[string]bool{"listen": true, "push-tokens": true})
	require.NoError(t, err, "--push-tokens is every service's that has none of its own")
	assert.Equal(t, map[string]string{"a": "push-token-a-0123456789"}, c.Services[0].PushTokens)
	assert.Equal(t, map[string]string{"fleet": "push-token-all-0123456789"}, c.Services[1].PushTokens)

	write("b.yaml", "services:\n  - name: a\n    auth: {eval_tokens_file: /nonexistent}\n")
	_, _, err = (&serveFlags{}).settings(func(k string) string { return env[k] }, map[string]bool{})
	assert.ErrorContains(t, err, "services[0].auth.eval_tokens_file: open /nonexistent")
}

// TestSchemaTakesServices: the schema accepts the services example and
// refuses what the parser refuses for a file with services.
func TestSchemaTakesServices(t *testing.T) {
	s := schema(t)
	b, err := os.ReadFile("brownoutd.services.example.yaml")
	require.NoError(t, err)
	assert.NoError(t, validate(s, b))
	for _, src := range []string{
		"services:\n  - name: a\n    sources: {push: {max_instances: 5}}\n",
		"tick: 1s\nauth: {eval_tokens_file: x}\nservices:\n  - {name: a, features: [{name: f}]}\n",
		"services: ~\nfeatures: [{name: a}]\n",
		"services:\n  - name: a\n    sources: {promql: {url: http://x, selector: 'job=\"a\"'}}\n",
	} {
		_, perr := parseConfig("ok.yaml", []byte(src))
		require.NoError(t, perr, src)
		assert.NoError(t, validate(s, []byte(src)), "the parser takes %q", src)
	}
	for name, src := range map[string]string{
		"top-level features":       "features: [{name: a}]\nservices: [{name: b}]\n",
		"top-level sources":        "sources: {push: {}}\nservices: [{name: b}]\n",
		"service without a name":   "services: [{features: [{name: a}]}]\n",
		"service name upper-case":  "services: [{name: Shop}]\n",
		"service field unknown":    "services: [{name: a, colour: red}]\n",
		"service feature floor 1":  "services: [{name: a, features: [{name: f, floor: 1}]}]\n",
		"max_instances negative":   "services: [{name: a, sources: {push: {max_instances: -1}}}]\n",
		"service law kind unknown": "services: [{name: a, law: {kind: pid}}]\n",
	} {
		_, perr := parseConfig("bad.yaml", []byte(src))
		assert.Error(t, perr, "%s: the parser refuses it", name)
		assert.Error(t, validate(s, []byte(src)), "%s: the schema refuses it too", name)
	}
}
