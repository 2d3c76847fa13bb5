package dimmer_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/sim"
)

func TestProbeDefaultGate(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	g := labGates[1]
	for _, th := range []float64{0, 0.1, 0.2} {
		var it float64
		for seed := uint32(1); seed <= 30; seed++ {
			it += labRun(sim.Constant(150), sim.Static(th), seed, g, 0).Summary.InTime / 30
		}
		fmt.Printf("default gate, 150, Static(%.1f): in time %.4f\n", th, it)
	}
	var it float64
	for seed := uint32(1); seed <= 30; seed++ {
		it += labRun(sim.Constant(150), brownout(), seed, g, 0).Summary.InTime / 30
	}
	fmt.Printf("default gate, 150, controller: in time %.4f\n", it)
}

func TestProbeDefaultTrace(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	g := labGates[1]
	c := sim.NewController(sim.BrownoutConfig(sim.BrownoutTarget)).(sim.Controller)
	rd := &recDimmer{c: c.C}
	sd := &snapDimmer{d: rd}
	res := labRun(sim.Constant(150), sd, uint32(atof(os.Getenv("SEED"))), g, 0)
	for i, s := range res.Seconds[:90] {
		p99, _ := sd.snap[i].Get(signals.LatencyP99)
		rr, _ := sd.snap[i].Get(signals.RejectRatio)
		fmt.Printf("t=%d level=%.2f refused=%v timeouts=%d p99=%.0f rr=%.3f %s\n", s.T, s.Level, s.Refused, s.Timeouts, p99*1000, rr, rd.dbg[i][:60])
	}
	off := labRun(sim.Constant(150), sim.Static(0), uint32(atof(os.Getenv("SEED"))), g, 0)
	fmt.Println(res.Summary.InTime, off.Summary.InTime)
	for _, s := range off.Seconds[:15] {
		fmt.Printf("off t=%d refused=%v timeouts=%d\n", s.T, s.Refused, s.Timeouts)
	}
}

func TestProbeStepTrace(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	g := labGates[0]
	if os.Getenv("GATE") == "default" {
		g = labGates[1]
	}
	hold := time.Duration(atof(os.Getenv("HOLD"))) * time.Second
	load, up, _, dur := labStep(hold)
	c := sim.NewController(sim.BrownoutConfig(sim.BrownoutTarget)).(sim.Controller)
	rd := &recDimmer{c: c.C}
	sd := &snapDimmer{d: rd}
	res := labRun(load, sd, uint32(atof(os.Getenv("SEED"))), g, dur)
	prev := -1.0
	for i, s := range res.Seconds {
		if i < up-2 || (s.Level == prev && os.Getenv("ALL") == "") {
			continue
		}
		prev = s.Level
		p99, _ := sd.snap[i].Get(signals.LatencyP99)
		rr, _ := sd.snap[i].Get(signals.RejectRatio)
		r := rd.dbg[i]
		fmt.Printf("t=%d level=%.2f p99=%.0f rr=%.3f %s\n", s.T, s.Level, p99*1000, rr, r[min(len(r), 140):min(len(r), 260)])
	}
}

func TestProbeLoss(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	g := labGates[1]
	seed := uint32(atof(os.Getenv("SEED")))
	res := labRun(sim.Constant(150), brownout(), seed, g, 0)
	off := labRun(sim.Constant(150), sim.Static(0), seed, g, 0)
	for _, r := range []sim.Result{res, off} {
		var lost [9]int
		for _, s := range r.Seconds {
			if s.T < 90 {
				lost[s.T/10] += s.Users - s.UsersInTime
			}
		}
		fmt.Println("lost per 10 s:", lost, "dropped/timeouts", r.Summary)
	}
}

func TestProbeGap(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	for _, g := range labGates {
		var gaps []float64
		for seed := uint32(1); seed <= 100; seed++ {
			c := labRun(sim.Constant(150), brownout(), seed, g, 0).Summary.InTime
			off := labRun(sim.Constant(150), sim.Static(0), seed, g, 0).Summary.InTime
			gaps = append(gaps, off-c)
		}
		slices.Sort(gaps)
		fmt.Printf("%s: gap median %.4f p90 %.4f p97 %.4f max %.4f\n", g.name, gaps[50], gaps[90], gaps[97], gaps[99])
	}
}

func TestProbeSale(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	c := sim.NewController(sim.BrownoutConfig(sim.BrownoutTarget)).(sim.Controller)
	rd := &recDimmer{c: c.C}
	sd := &snapDimmer{d: rd}
	lab := sim.BrownoutLab(sim.SaleLoad(), sd)
	lab.Duration, lab.Seed = 120*time.Second, uint32(atof(os.Getenv("SEED")))
	res := sim.Run(lab)
	for i := 57; i < 70; i++ {
		p99, _ := sd.snap[i].Get(signals.LatencyP99)
		rr, _ := sd.snap[i].Get(signals.RejectRatio)
		s := res.Seconds[i]
		fmt.Printf("t=%d level=%.2f arr=%d good=%d p99=%.0f rr=%.3f %s\n", s.T, s.Level, s.Arrivals, s.GoodByArrival, p99*1000, rr, rd.dbg[i][:30])
	}
}
