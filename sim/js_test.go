package sim

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLogMatchesV8 checks jsLog bit for bit against Math.log as V8 computed
// it (testdata/v8-log-vectors.txt, made by node from
// testdata/v8-log-vectors.js), and reports how often
// Go's math.Log differs: on amd64 it is an assembly routine that is not
// fdlibm's, so a port that used it could differ in the last digit.
func TestLogMatchesV8(t *testing.T) {
	f, err := os.Open("testdata/v8-log-vectors.txt")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, ours, gos := 0, 0, 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		xs, ys, _ := strings.Cut(line, " ")
		xb, err1 := strconv.ParseUint(xs, 16, 64)
		yb, err2 := strconv.ParseUint(ys, 16, 64)
		require.NoError(t, err1)
		require.NoError(t, err2)
		x, want := math.Float64frombits(xb), math.Float64frombits(yb)
		n++
		if got := jsLog(x); math.Float64bits(got) != yb {
			ours++
			if ours < 5 {
				t.Errorf("jsLog(%v) = %v, V8 says %v", x, got, want)
			}
		}
		if math.Float64bits(math.Log(x)) != yb {
			gos++
		}
	}
	require.NoError(t, sc.Err())
	require.Greater(t, n, 30000)
	assert.Zero(t, ours, "jsLog mismatches out of %d", n)
	t.Logf("math.Log differs from V8 on %d of %d inputs; jsLog on %d", gos, n, ours)
}

func TestToFixedLikeJavaScript(t *testing.T) {
	for _, c := range []struct {
		x    float64
		d    int
		want string
	}{
		{5.25, 1, "5.3"},   // a tie: JavaScript rounds up, strconv to even
		{0.125, 2, "0.13"}, // a tie
		{2.5, 0, "3"},
		{1.005, 2, "1.00"}, // 1.005 is 1.00499999… in binary
		{99.95, 1, "100.0"},
		{0, 1, "0.0"},
		{-0.4, 0, "-0"},
		{math.NaN(), 0, "NaN"},
		{1161.0 / 30, 1, "38.7"},
	} {
		assert.Equal(t, c.want, toFixed(c.x, c.d), "toFixed(%v, %d)", c.x, c.d)
	}
}

func TestMulberry32(t *testing.T) {
	// First outputs for seed 42, computed with the JavaScript rng.
	m := NewMulberry32(42)
	got := []float64{m.Float64(), m.Float64(), m.Float64()}
	assert.Equal(t, []float64{0.6011037519201636, 0.44829055899754167, 0.8524657934904099}, got)
}
