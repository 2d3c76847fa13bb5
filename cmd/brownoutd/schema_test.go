package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// schema compiles brownoutd.schema.json.
func schema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("brownoutd.schema.json")
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("brownoutd.schema.json", doc))
	s, err := c.Compile("brownoutd.schema.json")
	require.NoError(t, err)
	return s
}

// validate checks a YAML document against the schema, as an editor with a
// YAML language server would.
func validate(s *jsonschema.Schema, src []byte) error {
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil {
		return err
	}
	if v == nil {
		v = map[string]any{}
	}
	return s.Validate(v)
}

// TestSchemaAgreesWithTheParser: the JSON Schema of the configuration
// accepts every configuration shipped (the example, deploy/brownoutd) and
// the empty one, and rejects what the parser rejects for its shape —
// unknown fields, wrong types, missing required fields — so that an editor
// that validates against it says what check-config says.
func TestSchemaAgreesWithTheParser(t *testing.T) {
	s := schema(t)
	files, err := filepath.Glob("../../deploy/brownoutd/*.yaml")
	require.NoError(t, err)
	for _, f := range append(files, "brownoutd.example.yaml") {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		_, perr := parseConfig(f, b)
		require.NoError(t, perr, f)
		assert.NoError(t, validate(s, b), f)
	}
	assert.NoError(t, validate(s, []byte("")), "the empty configuration")
	for _, src := range []string{"tick: .5s\n", "tick: +1s\n", "tick: 0\n", "state_dir: ~\n", "features: ~\nlaw: ~\n",
		"features:\n  - {name: a, default: yes}\n", "cors_origins: [http://127.0.0.1:8081, HTTPS://Shop.Example:443]\n", "cors_origins: ~\n",
		"max_conns: 12000\nmax_streams: 10000\n", "max_conns: ~\nmax_streams: ~\n",
		"law: {kind: model}\n", "law: {probe: 0.02}\n", "law: {kind: model, probe: 0.02}\n", "law: {kind: model, probe: -1}\n",
		"features:\n  - {name: a, rank: 2}\n", "law: {high: 1.5, low: 1}\n", "law: {max_shed: -1, quantum: 0.5, stale_after: 0}\n",
		"sources:\n  push: {max_instances: 10000}\n"} {
		if _, perr := parseConfig("ok.yaml", []byte(src)); perr == nil {
			assert.NoError(t, validate(s, []byte(src)), "the parser takes %q", src)
		}
	}
	for name, src := range map[string]string{
		"unknown top-level field":  "colour: blue\n",
		"unknown feature field":    "features:\n  - name: a\n    colour: blue\n",
		"feature without a name":   "features:\n  - rank: 1\n",
		"tick not a duration":      "tick: fast\n",
		"rank not an integer":      "features:\n  - name: a\n    rank: first\n",
		"floor of 1":               "features:\n  - name: a\n    floor: 1\n",
		"target without a signal":  "targets:\n  - target: 300ms\n",
		"two sources":              "sources:\n  push: {}\n  promql: {url: http://x}\n",
		"scrape without targets":   "sources:\n  scrape: {window: 10s}\n",
		"law field unknown":        "law:\n  gain: 2\n",
		"law kind unknown":         "law:\n  kind: pid\n",
		"law kind search":          "law:\n  kind: search\n",
		"law down_gain removed":    "law:\n  down_gain: 1\n",
		"law up_gain removed":      "law:\n  up_gain: 1\n",
		"law proportional removed": "law:\n  proportional: 0.5\n",
		"law max_rise removed":     "law:\n  max_rise: 0.25\n",
		"law evidence removed":     "law:\n  evidence: 5\n",
		"law max_step removed":     "law:\n  max_step: 0.12\n",
		"tls without a key":        "tls:\n  cert: c.pem\n",
		"schedule without max":     "schedule:\n  - {feature: a, from: \"2026-11-11 00:00\", for: 1m}\n",
		"cors origin with a path":  "cors_origins: [https://shop.example/]\n",
		"cors origin not http(s)":  "cors_origins: [ftp://shop.example]\n",
		"cors origin a wildcard":   "cors_origins: [\"*\"]\n",
		"cors origin without one":  "cors_origins: [shop.example]\n",
		"cors origins not a list":  "cors_origins: https://shop.example\n",
		"max_conns below 64":       "max_conns: 10\n",
		"max_conns not a number":   "max_conns: many\n",
		"max_streams of 0":         "max_streams: 0\n",
		"rank not whole":           "features:\n  - {name: a, rank: 1.5}\n",
		"law high over 1.5":        "law: {high: 50}\n",
		"law low negative":         "law: {low: -0.5}\n",
		"law max_shed over 2":      "law: {max_shed: 7}\n",
		"law quantum over 0.5":     "law: {quantum: 0.6}\n",
		"law stale_after negative": "law: {stale_after: -3}\n",
		"max_instances too many":   "sources:\n  push: {max_instances: 99999999}\n",
		"max_instances negative":   "sources:\n  push: {max_instances: -1}\n",
	} {
		_, perr := parseConfig("bad.yaml", []byte(src))
		assert.Error(t, perr, "%s: the parser", name)
		err := validate(s, []byte(src))
		assert.Error(t, err, "%s: the schema", name)
		if err != nil {
			assert.False(t, strings.Contains(err.Error(), "compil"), name)
		}
	}
}
