package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/load"
	"github.com/brownout/brownout/testapp"
)

func TestRealBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"real", "--parts", "recommendations=3ms@far"}, "want name=duration or name=duration@remote"},
		{[]string{"real", "--priors", "reviews=0"}, `prior "reviews=0": want name=share > 0`},
		{[]string{"real", "--law", "model"}, "flag provided but not defined: -law"}, // one law: no choice
	} {
		_, _, err := runArgs(c.args...)
		assert.True(t, errors.As(err, new(usageError)), "%q: a usage error (exit 2): %v", c.args, err)
		assert.ErrorContains(t, err, c.want, "%q", c.args)
	}
}

// TestWriteCostsJudgesAgainstThePool: the learned costs are judged against
// what each part takes from the pool — a remote part's wall time is no
// cost — within 20 % or 0.05 of the all-off page, as a share and in
// seconds.
func TestWriteCostsJudgesAgainstThePool(t *testing.T) {
	cfg := testapp.Config{Page: 6 * time.Millisecond, Parts: []testapp.Part{
		{Name: "recommendations", Cost: 3 * time.Millisecond, Remote: true}, {Name: "reviews", Cost: 1500 * time.Microsecond}}}
	res := &testapp.HarnessResult{
		Report: &load.Report{Seconds: []load.Second{
			{Sample: map[string]float64{"recommendations": 0.5, "reviews": 1}},
			{Sample: map[string]float64{"recommendations": 0, "reviews": 0.3}},
			{Sample: map[string]float64{"recommendations": 0.2, "reviews": 0.3}}}},
		Costs: []testapp.LearnedCost{
			{Feature: "recommendations", Prior: 1, Known: true, Value: 0.5, SE: 0.02, Seconds: 0.003, Base: 0.006, Contrasted: 12},
			{Feature: "reviews", Prior: 0.25, Known: true, Value: 0.18, SE: 0.02, Seconds: 0.0015, Base: 0.0083, Contrasted: 30}},
	}
	var b bytes.Buffer
	writeCosts(&b, cfg, res)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	assert.Len(t, lines, 4, b.String())
	assert.Regexp(t, `^recommendations\s+0\.000\s+0\.500\s+1\s+0\.500 ± 0\.020\s+3\.00ms\s+6\.00ms\s+12\s+2s\s+no, no$`, lines[2])
	assert.Regexp(t, `^reviews\s+0\.250\s+0\.250\s+0\.25\s+0\.180 ± 0\.020\s+1\.50ms\s+8\.30ms\s+30\s+2s\s+no, yes$`, lines[3])
}
