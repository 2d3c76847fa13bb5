package dimmer_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
)

func TestShedSeedWire(t *testing.T) {
	seed := dimmer.ShedSeed{0xc0, 0xff, 0xee, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff}
	b, err := json.Marshal(struct {
		S dimmer.ShedSeed `json:"shed_seed"`
	}{seed})
	require.NoError(t, err)
	assert.JSONEq(t, `{"shed_seed":"c0ffee030405060708090a0b0c0d0eff"}`, string(b))
	var back struct {
		S dimmer.ShedSeed `json:"shed_seed"`
	}
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, seed, back.S)
	assert.Equal(t, "ShedSeed(…)", fmt.Sprint(seed), "printing it does not give it away")
	assert.NotContains(t, fmt.Sprintf("%x %v %+v %s", seed, seed, seed, seed), "c0ffee")

	for _, tc := range []struct{ in, err string }{
		{`"c0ffee"`, "6 characters, want 32 hexadecimal digits"},
		{`"zz0102030405060708090a0b0c0d0eff"`, "not hexadecimal"},
		{`7`, "cannot unmarshal number"},
	} {
		var s dimmer.ShedSeed
		assert.ErrorContains(t, json.Unmarshal([]byte(tc.in), &s), tc.err, tc.in)
	}
}

// FuzzShedSeed: any text either reads as a seed that writes back the same
// (case aside) or is refused; nothing panics.
func FuzzShedSeed(f *testing.F) {
	f.Add("c0ffee030405060708090a0b0c0d0eff")
	f.Add("C0FFEE030405060708090A0B0C0D0EFF")
	f.Add("")
	f.Add("c0ffee")
	f.Fuzz(func(t *testing.T, in string) {
		var s dimmer.ShedSeed
		if s.UnmarshalText([]byte(in)) != nil {
			return
		}
		out, _ := s.MarshalText()
		var again dimmer.ShedSeed
		if err := again.UnmarshalText(out); err != nil || again != s {
			t.Fatalf("%q → %q → %v %v", in, out, again, err)
		}
	})
}
