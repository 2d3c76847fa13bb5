package main

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/sim"
)

// TestExploreTracesTheController: the trace view prints a line per change
// of level with the signals and the controller's status, the same for the
// same seed, and nothing on stderr with --quiet.
func TestExploreTracesTheController(t *testing.T) {
	out, errOut, err := runArgs("explore", "trace", "--load", "150", "--seed", "3", "--duration", "20s", "--quiet")
	require.NoError(t, err)
	assert.Empty(t, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.GreaterOrEqual(t, len(lines), 13, "the first 13 seconds, then the changes")
	assert.Regexp(t, `^t=0 level=1\.00 p99=0 `, lines[0])
	assert.Regexp(t, `^t=\d+ level=0\.\d\d p99=\d+ rr=\S+ arr=\d+ tp=\d+ lim=\S+ busy=\S+ util=\S+ b=\S+ p=\S+ dim: .*dimming`, strings.Join(lines[1:4], "\n"), "150 req/s dims within the first seconds")
	again, _, err := runArgs("explore", "trace", "--load", "150", "--seed", "3", "--duration", "20s", "--quiet")
	require.NoError(t, err)
	assert.Equal(t, out, again, "deterministic")

	all, _, err := runArgs("explore", "trace", "--load", "150", "--seed", "3", "--duration", "20s", "--quiet", "--all")
	require.NoError(t, err)
	assert.Len(t, strings.Split(strings.TrimSpace(all), "\n"), 20, "--all: every second")
}

// TestExploreUntallied: --untallied feeds the controller no tallies and
// no work, as brownoutd's scrape and PromQL sources do: the law, behind
// the lab's gate, then counts work in all-off requests, where with the
// lab's tallies it counts seconds of service.
func TestExploreUntallied(t *testing.T) {
	args := []string{"explore", "trace", "--load", "150", "--seed", "3", "--duration", "20s", "--quiet"}
	tallied, _, err := runArgs(args...)
	require.NoError(t, err)
	assert.Contains(t, tallied, "s of service a second")
	untallied, _, err := runArgs(append(args, "--untallied")...)
	require.NoError(t, err)
	assert.Contains(t, untallied, "all-off requests a second")
	assert.NotContains(t, untallied, "s of service a second")
}

// TestExploreStepHolds: the step's trace holds its overload --hold, as the
// turns view counts it: the load is back at 80 req/s 20 s after the step.
func TestExploreStepHolds(t *testing.T) {
	out, _, err := runArgs("explore", "step", "--hold", "20s", "--duration", "60s", "--all", "--quiet")
	require.NoError(t, err)
	load := func(sec string) string {
		for l := range strings.Lines(out) {
			if strings.HasPrefix(l, "t="+sec+" ") {
				return l
			}
		}
		return ""
	}
	assert.Regexp(t, `arr=1[2-9]\d `, load("45"), "overloaded")
	assert.Regexp(t, `arr=[6-9]\d `, load("58"), "back")
}

// TestExploreTurns: the turns view counts the step's changes of
// direction over seeds, for the overload and the run asked for; the same
// for the same seeds.
func TestExploreTurns(t *testing.T) {
	out, errOut, err := runArgs("explore", "turns", "--seeds", "4", "--hold", "20s", "--duration", "80s", "--quiet")
	require.NoError(t, err)
	assert.Empty(t, errOut)
	assert.Regexp(t, `^step 80 → 150 → 80 req/s, overload 20s, 30s after the return, 4 seeds from 1: more than two turns from the step on \d; twice or more during the overload \d; more than once after the return \d; dimmed from full brightness after the return \d, seconds after it \[[\d ]*\]\n$`, out)
	again, _, err := runArgs("explore", "turns", "--seeds", "4", "--hold", "20s", "--duration", "80s", "--quiet")
	require.NoError(t, err)
	assert.Equal(t, out, again, "deterministic")
}

// TestExploreTurnsVerbose: with --verbose the turns view lists each seed
// that turns as one of its counts counts it, before the counts: as many
// lines as the seeds in their union.
func TestExploreTurnsVerbose(t *testing.T) {
	if race.Enabled {
		t.Skip("12 lab runs of 150 s: slow under -race, where TestExploreTurns runs the view's parallel seeds")
	}
	out, _, err := runArgs("explore", "turns", "--seed0", "1", "--seeds", "12", "--hold", "90s", "--duration", "150s", "--quiet", "--verbose")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	m := regexp.MustCompile(`more than two turns from the step on (\d+); twice or more during the overload (\d+); more than once after the return (\d+);`).FindStringSubmatch(lines[len(lines)-1])
	require.NotNil(t, m, out)
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	listed := lines[:len(lines)-1]
	for _, l := range listed {
		assert.Regexp(t, `^seed \d+: \d+ turns from the step on, \d+ during the overload, \d+ after the return$`, l)
	}
	assert.GreaterOrEqual(t, len(listed), max(n(m[1]), n(m[2]), n(m[3])), out)
	assert.LessOrEqual(t, len(listed), n(m[1])+n(m[2])+n(m[3]), out)
	// An overload longer than a minute is judged as a constant load too,
	// past its first minute (see TestCalm).
	assert.Regexp(t, `; past the overload's first 1m0s, more than two turns or a swing over 0\.2 \d+$`, lines[len(lines)-1])
}

// TestCalm: a level is calm past its landing when it turns at most twice
// (by two quanta) and swings by at most 0.2.
func TestCalm(t *testing.T) {
	secs := func(levels ...float64) []sim.Second {
		s := make([]sim.Second, len(levels))
		for i, l := range levels {
			s[i] = sim.Second{T: i, Level: l}
		}
		return s
	}
	assert.True(t, calm(secs(0, 0.05, 0, 0.05)), "two turns")
	assert.True(t, calm(secs(0, 0.2, 0.2)), "a swing of 0.2")
	assert.True(t, calm(secs(0, 0.01, 0, 0.01, 0)), "moves under two quanta are no turns")
	assert.False(t, calm(secs(0, 0.05, 0, 0.05, 0)), "three turns")
	assert.False(t, calm(secs(0.1, 0.35)), "a swing over 0.2")
}

// TestExploreSwings: the swings view prints a line for each of the 24
// moving loads — sine and square, every 10, 30 and 60 s, ±40 and ±60 %,
// one worker and four — with the controller's users in time and optional
// share beside the reference's, told the load a tick ahead and a tick
// late. (The shortest run the view takes, one
// seed: the lab is sim's, tested there.)
func TestExploreSwings(t *testing.T) {
	if race.Enabled {
		t.Skip("24 lab runs with their oracles: too slow under -race")
	}
	out, errOut, err := runArgs("explore", "swings", "--seeds", "1", "--duration", "91s", "--quiet")
	require.NoError(t, err)
	assert.Empty(t, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 24)
	assert.Regexp(t, `^1 worker\(s\), sine   every 10s ±40%: controller +\d+\.\d\d% in time at \d\.\d\d of the oracle's share; reference \(set point 0\.\d\d\) +\d+\.\d\d% at \d\.\d\d, [+-]\d+\.\d\d points; told the load a tick late \(0\.\d\d\) +\d+\.\d\d% at \d\.\d\d, [+-]\d+\.\d\d points; told the last interval's count \(0\.\d\d\) +\d+\.\d\d% at \d\.\d\d, [+-]\d+\.\d\d points$`, lines[0])
	assert.Contains(t, lines[23], "4 worker(s), square every 60s ±60%")
}

// TestSwingPhases: --by-phase sums a run's seconds by the part of the
// period they fall in — a second's middle, modulo the period — and prints
// each part's users late per thousand and optional share beside the
// reference's; a 10-s period has ten parts of a second, a 60-s one
// twelve of five.
func TestSwingPhases(t *testing.T) {
	run := func(period int, late func(t int) int) sim.Result {
		var r sim.Result
		for s := range 3 * period {
			r.Seconds = append(r.Seconds, sim.Second{T: s, Users: 100, UsersInTime: 100 - late(s), OptionalShare: float64(s%period) / float64(period)})
		}
		return r
	}
	var law, ref swingPhases
	law.add(run(10, func(s int) int { return 10 * b2i(s%10 == 9) }), 10*time.Second, 5, 30)
	ref.add(run(10, func(int) int { return 0 }), 10*time.Second, 5, 30)
	assert.Equal(t, 10, law.bins)
	assert.Equal(t, [phaseBins]float64{200, 200, 200, 200, 200, 300, 300, 300, 300, 300}, law.users, "seconds 5–29: parts 5–9 three times, 0–4 twice")
	out := law.String(ref, sim.Square{Mean: 100, Amplitude: 0.5, Period: 10 * time.Second}, 10*time.Second)
	lines := strings.Split(out, "\n")
	require.Len(t, lines, 4)
	assert.Equal(t, "  in 10 parts of the period from its start, controller/reference:", lines[0])
	assert.Regexp(t, `^  load, req/s   (\s+150){5}(\s+50){5}$`, lines[1])
	assert.Regexp(t, `^  users late ‰  (\s+0/0\s+){9}\s+100/0\s+$`, lines[2])
	assert.Regexp(t, `^  optional share 0\.00/0\.00 0\.10/0\.10 .* 0\.90/0\.90$`, lines[3])

	var slow swingPhases
	slow.add(run(60, func(int) int { return 0 }), 60*time.Second, 0, 180)
	assert.Equal(t, 12, slow.bins)
	assert.Equal(t, 15.0, slow.n[0], "five seconds a part, three periods")
}

// TestExploreDipTo: --dip-to sets how deep the dip view's capacity falls;
// a run through a dip to half the capacity is not the one through 70 %.
func TestExploreDipTo(t *testing.T) {
	if race.Enabled {
		t.Skip("600 s lab runs: too slow under -race")
	}
	half, errOut, err := runArgs("explore", "dip", "--seeds", "1", "--dip-to", "0.5", "--quiet")
	require.NoError(t, err)
	assert.Empty(t, errOut)
	deflt, _, err := runArgs("explore", "dip", "--seeds", "1", "--quiet")
	require.NoError(t, err)
	seventy, _, err := runArgs("explore", "dip", "--seeds", "1", "--dip-to", "0.7", "--quiet")
	require.NoError(t, err)
	assert.Equal(t, deflt, seventy, "70 % is the default")
	assert.NotEqual(t, deflt, half)
	assert.Regexp(t, `^1000: (\s*\d+){50}\n$`, half)
}

func TestExploreBadUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"explore"}, "want a view first"},
		{[]string{"explore", "--load", "100"}, "want a view first"},
		{[]string{"explore", "nope"}, `unknown view "nope"`},
		{[]string{"explore", "trace", "extra"}, "unexpected arguments"},
		{[]string{"explore", "controller", "--loads", "100,x"}, `--loads "100,x"`},
		{[]string{"explore", "trace", "--load", "-5"}, "--load -5"},
		{[]string{"explore", "traj", "--duration", "30s"}, "want 1m31s to 24h for traj"},
		{[]string{"explore", "traj", "--swing-from", "400"}, "--swing-from 400"},
		{[]string{"explore", "trace", "--gate", "x"}, `--gate "x"`},
		{[]string{"explore", "trace", "--seeds", "0"}, "--seeds 0"},
		{[]string{"explore", "trace", "--low", "2"}, "the controller's configuration"},
		{[]string{"explore", "trace", "--seed", "-1"}, "invalid value"},
		{[]string{"explore", "turns", "--hold", "60s"}, "--hold 1m0s"},
		{[]string{"explore", "turns", "--hold", "0s"}, "--hold 0s"},
		{[]string{"explore", "step", "--hold", "60s"}, "--hold 1m0s"},
		{[]string{"explore", "trace", "--tick", "50ms"}, "--tick 50ms"},
		{[]string{"explore", "trace", "--tick", "1m"}, "--tick 1m0s"},
		{[]string{"explore", "dip", "--dip-to", "0"}, "--dip-to 0"},
		{[]string{"explore", "dip", "--dip-to", "1.5"}, "--dip-to 1.5"},
		{[]string{"explore", "dip", "--dip-to", "NaN"}, "--dip-to NaN"},
		// The model law is the only law: its switch and the search law's
		// knobs are gone.
		{[]string{"explore", "trace", "--model"}, "flag provided but not defined: -model"},
		{[]string{"explore", "trace", "--evidence", "5"}, "flag provided but not defined: -evidence"},
		{[]string{"explore", "trace", "--max-step", "0.1"}, "flag provided but not defined: -max-step"},
	} {
		_, _, err := runArgs(c.args...)
		require.Error(t, err, "%q", c.args)
		assert.True(t, errors.As(err, new(usageError)), "%q: a usage error (exit 2): %v", c.args, err)
		assert.Contains(t, err.Error(), c.want, "%q", c.args)
	}
	_, _, err := runArgs("explore", "controller", "--loads", "100", "--oracle", "/nonexistent/oracle.csv")
	require.Error(t, err)
	assert.False(t, errors.As(err, new(usageError)), "a missing table is no usage error")
	assert.Contains(t, err.Error(), "--oracle ''")
}

func TestExploreHelpListsTheViews(t *testing.T) {
	out, _, _ := runArgs("explore", "--help")
	for _, v := range exploreViews {
		assert.Contains(t, out, "\n  "+v+" ", "the usage describes %s", v)
	}
	for _, f := range []string{"-loads", "-seed0", "-oracle", "-dip-trace", "-setpoint", "-untallied"} {
		assert.Contains(t, out, f)
	}
}
