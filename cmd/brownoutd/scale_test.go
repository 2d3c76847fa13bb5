package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The services' benchmarks run a real daemon in this process and its
// fleets' pushers in a child process (servicesload_test.go), for a
// duration, once: run them with -benchtime 1x. Their figures are the
// daemon's: each service's tick lag p99 (api's, over its ticks), the
// daemon's CPU, and per push; and the control's: how late an idle
// process's 100 ms ticks ran meanwhile (TestLagProbeProcess), this
// machine's floor under any tick lag.

var (
	isolationFor = flag.Duration("isolation-for", 10*time.Second, "how long BenchmarkServiceIsolation measures each case (after a 2 s warm-up)")
	scaleFor     = flag.Duration("scale-for", 30*time.Second, "how long BenchmarkServicesScale measures each case (after a 5 s warm-up)")
)

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }

// BenchmarkServiceIsolation: service b's tick lag p99 while service a is
// healthy, while its source hangs on every tick, and while its pushers
// push ten times as often (isolationLoad); a's beside it.
func BenchmarkServiceIsolation(b *testing.B) {
	for _, fault := range []string{"none", "failing", "flooding"} {
		b.Run("a="+fault, func(b *testing.B) {
			src, l := isolationLoad(b, fault)
			var run loadRun
			for b.Loop() {
				run = runLoad(b, src, l, 2*time.Second, *isolationFor, "a", "b")
			}
			b.ReportMetric(ms(run.lagP99["b"]), "b-lag-p99-ms")
			b.ReportMetric(ms(run.lagP99["a"]), "a-lag-p99-ms")
			b.ReportMetric(float64(run.ticks["b"]), "b-ticks")
			b.ReportMetric(100*run.cpu.Seconds()/run.elapsed.Seconds(), "daemon-cpu-%")
			b.ReportMetric(ms(run.control.P99), "control-p99-ms")
			b.ReportMetric(ms(run.control.Max), "control-max-ms")
			levels := run.states["b"].Features
			for _, f := range levels {
				if f.Level != 1 || f.Mode != "auto" {
					b.Errorf("a %s: b's %s at %v (%s): b's levels moved", fault, f.Name, f.Level, f.Mode)
				}
			}
			b.Logf("a %s: pushes %v, p99 round trip %v, %d bytes each; over %v the daemon's CPU %v, the pushers' %v; load average %s",
				fault, run.pushes.Status, run.pushes.P99, run.pushes.BodyBytes, run.elapsed.Round(time.Millisecond), run.cpu.Round(time.Millisecond), run.pushCPU.Round(time.Millisecond), run.loadAvg)
		})
	}
}

// scaleConfig is n services of three features each, ticking every
// second, each its own push source.
func scaleConfig(n int, failing string) string {
	var b strings.Builder
	b.WriteString("tick: 1s\nservices:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: s%02d\n    targets: [{signal: latency.p99, target: 300ms}]\n    features: [{name: recommendations}, {name: reviews}, {name: gallery}]\n", i)
		if i == 0 && failing != "" {
			fmt.Fprintf(&b, "    sources: {scrape: {targets: [%s]}}\n", failing)
		}
	}
	return b.String()
}

// BenchmarkServicesScale: one daemon of 20 services, each of 50
// instances pushing every second (1 000 pushes a second, each about
// 4 KB: a latency histogram of 400 native buckets), every service
// ticking every second: each service's tick lag p99 (the worst service's
// and the median's; issue 32 asks 10 ms at most), the daemon's CPU, and
// what a push costs it. "faulty": the same with service s00's source
// hanging on every tick and s01's instances pushing ten times as often;
// the lags are then the 18 others'.
func BenchmarkServicesScale(b *testing.B) {
	if testing.Short() {
		b.Skip("a real-time load")
	}
	const services, instances = 20, 50
	for _, faulty := range []bool{false, true} {
		name := "healthy"
		if faulty {
			name = "faulty"
		}
		b.Run(name, func(b *testing.B) {
			failing := ""
			if faulty {
				failing = hangingTarget(b)
			}
			var l fleetLoad
			var names, measured []string
			for i := range services {
				s := fmt.Sprintf("s%02d", i)
				names = append(names, s)
				g := pushGroup{Service: s, Instances: instances, Interval: time.Second, Latency: 50 * time.Millisecond, Width: 400}
				switch {
				case faulty && i == 0:
					continue // scraped, hanging
				case faulty && i == 1:
					g.Interval, g.Latency = 100*time.Millisecond, 2*time.Second
				default:
					measured = append(measured, s)
				}
				l.Groups = append(l.Groups, g)
			}
			var run loadRun
			for b.Loop() {
				run = runLoad(b, scaleConfig(services, failing), l, 5*time.Second, *scaleFor, names...)
			}
			var lags []time.Duration
			for _, s := range measured {
				lags = append(lags, run.lagP99[s])
				st := run.states[s]
				live := 0
				for _, in := range st.Sources[0].Instances {
					if in.OK {
						live++
					}
				}
				if live != instances {
					b.Errorf("%s: %d instances live, want %d", s, live, instances)
				}
				for _, f := range st.Features {
					if f.Level != 1 || f.Mode != "auto" {
						b.Errorf("%s: %s at %v (%s): its levels moved", s, f.Name, f.Level, f.Mode)
					}
				}
			}
			slices.Sort(lags)
			accepted := run.pushes.Status[204]
			b.ReportMetric(ms(lags[len(lags)-1]), "worst-lag-p99-ms")
			b.ReportMetric(ms(lags[len(lags)/2]), "median-lag-p99-ms")
			b.ReportMetric(100*run.cpu.Seconds()/run.elapsed.Seconds(), "daemon-cpu-%")
			if accepted > 0 {
				b.ReportMetric(float64(run.cpu.Microseconds())/float64(accepted), "daemon-cpu-µs/push")
			}
			b.ReportMetric(ms(run.pushes.P99), "push-p99-ms")
			b.ReportMetric(ms(run.control.P99), "control-p99-ms")
			b.ReportMetric(ms(run.control.Max), "control-max-ms")
			b.Logf("%s: services' lag p99 %v; pushes %v (%d bytes each); over %v the daemon's CPU %v, the pushers' %v; load average %s",
				name, lags, run.pushes.Status, run.pushes.BodyBytes, run.elapsed.Round(time.Millisecond), run.cpu.Round(time.Millisecond), run.pushCPU.Round(time.Millisecond), run.loadAvg)
		})
	}
}
