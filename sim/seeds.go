package sim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// The three simulators quoted by the sources (seeds/sim/*.js), ported so
// that they print byte for byte what the JavaScript prints. They are the
// reference the lab's own models are checked against, and they keep their
// original shape — one function per simulator, the same event order, the
// same draws from the generator — rather than running on the lab's engine,
// because any reordering of draws changes every number.

// SeedSimulator is one ported simulator.
type SeedSimulator struct {
	About string
	Run   func(io.Writer) error
}

// Seeds returns the ported simulators by the name `brownout-lab seed`
// takes. Each call returns a new map.
func Seeds() map[string]SeedSimulator {
	return map[string]SeedSimulator{
		"overload": {"overload-policies.js: unbounded queue vs fail fast vs priority shedding, load 50–200 on capacity 100", SeedOverload},
		"codel":    {"codel-vs-taildrop.js: a 3 s burst at 200 req/s into a 100 req/s server, tail drop vs CoDel", SeedCoDel},
		"retry":    {"retry-storm.js: a capacity dip under four client retry policies", SeedRetry},
	}
}

// SeedOverload ports overload-policies.js.
func SeedOverload(w io.Writer) error {
	const T, timeout, S = 30.0, 1.0, 0.010
	policies := []struct {
		name  string
		limit [2]float64 // most requests inside the server: critical, other
	}{
		{"unbounded queue", [2]float64{math.Inf(1), math.Inf(1)}},
		{"bounded queue, fail fast", [2]float64{50, 50}},
		{"priority shedding", [2]float64{50, 20}},
	}
	run := func(limit [2]float64, load float64) []string {
		rnd := NewMulberry32(42)
		var fin, lat []float64
		head, t, free := 0, 0.0, 0.0
		rej, crit, critOK := 0, 0, 0
		for {
			t += rnd.Exp(1 / load)
			if !(t < T) {
				break
			}
			isCrit := rnd.Float64() < 0.3
			if isCrit {
				crit++
			}
			for head < len(fin) && fin[head] <= t {
				head++
			}
			l := limit[1]
			if isCrit {
				l = limit[0]
			}
			if float64(len(fin)-head) >= l {
				rej++
				continue
			}
			free = math.Max(free, t) + rnd.Exp(S)
			fin = append(fin, free)
			if free-t <= timeout && free <= T {
				lat = append(lat, free-t)
				if isCrit {
					critOK++
				}
			}
		}
		slices.Sort(lat)
		p99 := 0.0
		if len(lat) > 0 {
			p99 = lat[int(math.Ceil(0.99*float64(len(lat))))-1] * 1000
		}
		return []string{
			fmt.Sprint(load), toFixed(float64(len(lat))/T, 1), toFixed(p99, 0), fmt.Sprint(rej),
			toFixed(100*float64(critOK)/float64(crit), 0) + "%", fmt.Sprint(len(fin) - head),
		}
	}
	var b strings.Builder
	widths := []int{4, 8, 8, 10, 13, 15}
	for k, p := range policies {
		if k > 0 {
			b.WriteString("\n")
		}
		b.WriteString(p.name + "\nload  good/s  p99 ms  rejected  critical ok  queue at 30 s\n")
		for _, load := range []float64{50, 80, 100, 120, 150, 200} {
			for i, v := range run(p.limit, load) {
				b.WriteString(padStart(v, widths[i]))
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// SeedCoDel ports codel-vs-taildrop.js.
func SeedCoDel(w io.Writer) error {
	const S, limit, target, interval, end = 0.010, 300, 0.050, 0.100, 12
	type result struct {
		cell func(s int) string
		sum  string
	}
	run := func(codel bool) result {
		rnd := NewMulberry32(5)
		var arr []float64
		for t := 0.0; t < end; {
			rate := 80.0
			if t >= 2 && t < 5 {
				rate = 200
			}
			t += -jsLog(1-rnd.Float64()) / rate
			arr = append(arr, t)
		}
		var wait, q []float64
		var drops, delay, served [end]float64
		i, now := 0, 0.0
		aboveSince, above := 0.0, false
		for now < end {
			for i < len(arr) && arr[i] <= now {
				if len(q) >= limit {
					drops[int(math.Floor(arr[i]))]++
				} else {
					q = append(q, arr[i])
				}
				i++
			}
			if len(q) == 0 {
				if i >= len(arr) {
					break // JavaScript: now = undefined ends the loop
				}
				now, above = arr[i], false
				continue
			}
			t := q[0]
			q = q[1:]
			sojourn := now - t
			if codel && sojourn > target {
				if !above {
					aboveSince, above = now, true
				} else if now-aboveSince >= interval {
					drops[int(math.Floor(now))]++
					continue
				}
			} else {
				above = false
			}
			wait = append(wait, sojourn)
			delay[int(math.Floor(now))] += sojourn
			served[int(math.Floor(now))]++
			now += S
		}
		slices.Sort(wait)
		p99 := 1000 * wait[int(math.Ceil(0.99*float64(len(wait))))-1]
		dropped, over := 0.0, 0
		for _, d := range drops {
			dropped += d
		}
		for _, x := range wait {
			if x > 1 {
				over++
			}
		}
		return result{
			cell: func(s int) string {
				return toFixed(1000*delay[s]/served[s], 0) + " ms / " + fmt.Sprint(drops[s])
			},
			sum: fmt.Sprintf("served %d, dropped %v, p99 %s ms, waited > 1 s: %d", len(wait), dropped, toFixed(p99, 0), over),
		}
	}
	td, cd := run(false), run(true)
	var b strings.Builder
	b.WriteString("second   tail-drop: delay / drops   CoDel-like: delay / drops\n")
	for s := range end {
		b.WriteString(padStart(fmt.Sprint(s), 4) + padStart(td.cell(s), 22) + padStart(cd.cell(s), 26) + "\n")
	}
	b.WriteString("tail-drop : " + td.sum + "\nCoDel-like: " + cd.sum + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// SeedRetry ports retry-storm.js.
func SeedRetry(w io.Writer) error {
	const end, timeout, newRate = 240, 1.0, 70.0
	capAt := func(t float64) float64 {
		if t >= 30 && t < 60 {
			return 50
		}
		return 100
	}
	type attempt struct {
		t float64
		n int
	}
	sim := func(backoff, budget, dropExpired bool) [3]string {
		rnd := NewMulberry32(9)
		due := make([][]attempt, end*1000)
		var att, ok [end]int
		add := func(t float64, n int) {
			if t < end {
				ms := int(math.Floor(t * 1000))
				due[ms] = append(due[ms], attempt{t, n})
			}
		}
		for t := rnd.Exp(1 / newRate); t < end; t += rnd.Exp(1 / newRate) {
			add(t, 1)
		}
		free, tokens := 0.0, 10.0
		for ms := range end * 1000 {
			// Retries land at least a second later, so due[ms] does not
			// grow while it is walked.
			for _, a := range due[ms] {
				t, n := a.t, a.n
				if n == 1 {
					tokens = math.Min(10, tokens+0.1) // budget: retries <= 10 % of new
				}
				att[int(math.Floor(t))]++
				start := math.Max(free, t)
				expired := dropExpired && start-t > timeout
				if !expired {
					free = start + rnd.Exp(1/capAt(start))
				}
				if !expired && free-t <= timeout {
					ok[int(math.Floor(t))]++
					continue
				}
				if n > 3 || (budget && tokens < 1) {
					continue
				}
				if budget {
					tokens--
				}
				jitter := 0.0
				if backoff {
					jitter = rnd.Float64() * 0.5 * math.Pow(2, float64(n))
				}
				add(t+timeout+jitter, n+1)
			}
		}
		sum := func(a []int, i, j int) int {
			s := 0
			for _, v := range a[i:j] {
				s += v
			}
			return s
		}
		rec := 60
		for rec < end-5 && float64(sum(ok[:], rec, rec+5)) < 0.95*float64(sum(att[:], rec, rec+5)) {
			rec++
		}
		amp := func(i, j int) string {
			r := float64(sum(att[:], i, j)) / float64(j-i)
			return toFixed(r, 0) + " (" + toFixed(r/newRate, 2) + "x)"
		}
		recovery := "never (by 240 s)"
		if rec < end-5 {
			recovery = fmt.Sprint(rec-60) + " s"
		}
		return [3]string{amp(30, 60), amp(120, 180), recovery}
	}
	var b strings.Builder
	b.WriteString("client policy              load/s in dip  load/s 120-180 s  recovery after 60 s\n")
	for _, p := range []struct {
		name         string
		b, g, expire bool
	}{
		{"immediate retry", false, false, false}, {"backoff + jitter", true, false, false},
		{"backoff + jitter + budget", true, true, false}, {"  + server drops expired", true, true, true},
	} {
		r := sim(p.b, p.g, p.expire)
		b.WriteString(padEnd(p.name, 26) + padStart(r[0], 14) + padStart(r[1], 18) + "  " + r[2] + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
