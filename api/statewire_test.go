package api

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestStateGolden pins /v1/state's wire format (version 1): a change to
// it shows in the diff of testdata/state.golden.json, and the golden file
// must still decode (with fields a client does not know ignored).
func TestStateGolden(t *testing.T) {
	f := newFixture(t, Config{Loopback: true, Defaults: map[string]bool{"reviews": false}})
	dim(t, f.ctl)
	f.do(t, "PUT", "/v1/features/reviews/override", `{"level":0.5,"ttl":"1h","reason":"war room"}`)
	st := f.api.State()
	st.Boot = 1 // the boot epoch is the only field that differs run to run
	got, err := json.MarshalIndent(st, "", "  ")
	require.NoError(t, err)
	path := filepath.Join("testdata", "state.golden.json")
	if *update {
		require.NoError(t, os.WriteFile(path, append(got, '\n'), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))

	// A newer writer's extra fields are ignored by this decoder.
	var m map[string]any
	require.NoError(t, json.Unmarshal(want, &m))
	m["added_in_v2"] = map[string]any{"x": 1}
	b, _ := json.Marshal(m)
	var back StateJSON
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, 1, back.V)
	assert.Equal(t, "reviews", back.Features[1].Name)
	assert.Equal(t, time.Date(2026, 11, 11, 1, 0, 0, 0, time.UTC), back.Features[1].Override.Until.UTC())
}
