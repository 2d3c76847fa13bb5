package api

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brownout/brownout/signals"
)

// metrics are the API's own: OFREP answers by endpoint and status, the
// control tick's lag.
type metrics struct {
	a      *API
	mu     sync.Mutex
	ofrepN map[[2]string]uint64
}

func newMetrics(a *API) *metrics { return &metrics{a: a, ofrepN: map[[2]string]uint64{}} }

func (m *metrics) ofrep(endpoint string, status int) {
	k := [2]string{endpoint, strconv.Itoa(status)}
	m.mu.Lock()
	m.ofrepN[k]++
	m.mu.Unlock()
}

var ofrepDesc = prometheus.NewDesc("brownout_ofrep_requests_total",
	"OFREP evaluation requests answered, by endpoint (single, bulk) and HTTP status.", []string{"endpoint", "status"}, nil)

var (
	levelDesc = prometheus.NewDesc("brownout_feature_level", "Each feature's published level: the share of users who get it.", []string{"feature"}, nil)
	fmodeDesc = prometheus.NewDesc("brownout_feature_mode", "1 for each feature's current mode (auto, override, shadow, stale, frozen, …).", []string{"feature", "mode"}, nil)
	pressDesc = prometheus.NewDesc("brownout_pressure", "The controller's pressure: the largest value/target over the present signals.", nil, nil)
	modeDesc  = prometheus.NewDesc("brownout_mode", "1 for the controller's current mode.", []string{"mode"}, nil)
	shedDesc  = prometheus.NewDesc("brownout_shed_level", "The cascade's shed level, 0 to 2.", nil, nil)
	genDesc   = prometheus.NewDesc("brownout_generation", "The published state's generation.", nil, nil)
	// The controller's readings of its target signals, one metric per
	// unit (absent while missing).
	readDescs = map[signals.Unit]*prometheus.Desc{
		signals.UnitSeconds:   prometheus.NewDesc("brownout_signal_seconds", "The controller's readings of its duration signals (latency, sojourn), in seconds.", []string{"signal"}, nil),
		signals.UnitRatio:     prometheus.NewDesc("brownout_signal_ratio", "The controller's readings of its ratio signals (reject, error, gate busy and utilization), 0 to 1.", []string{"signal"}, nil),
		signals.UnitPerSecond: prometheus.NewDesc("brownout_signal_per_second", "The controller's readings of its rate signals (arrivals, throughput, goodput, refusals), per second.", []string{"signal"}, nil),
		signals.UnitCount:     prometheus.NewDesc("brownout_signal_count", "The controller's readings of its count signals (in flight, queued at the gate, the gate's limit in cost units).", []string{"signal"}, nil),
	}
	costDesc = prometheus.NewDesc("brownout_feature_cost_ratio", "Each feature's cost as the controller learned it: its extra work as a share of the work of a request with every feature off (absent until contrasted).", []string{"feature"}, nil)
	costSE   = prometheus.NewDesc("brownout_feature_cost_stderr_ratio", "The standard error of brownout_feature_cost_ratio.", []string{"feature"}, nil)
	chargeD  = prometheus.NewDesc("brownout_request_cost_ratio", "What a request is expected to take at the published levels, as a share of one with every feature on: what the gates charge a request (1 at full brightness and before the law's first step).", nil, nil)
	costUse  = prometheus.NewDesc("brownout_feature_cost_in_use", "1 when the law sets the levels with the learned cost (brownout_feature_cost_ratio), 0 while it is not yet precise enough and the configured cost is used.", []string{"feature"}, nil)
	capDesc  = prometheus.NewDesc("brownout_capacity", "The capacity the law estimates (K): the work a second the service carries within target, in unit s/s (seconds of service a second, where requests are tallied) or all-off/s (requests with every feature off a second); 0 while unknown. mode: cold, feedback-only, no-gate or measured.", []string{"unit", "mode"}, nil)
	capSat   = prometheus.NewDesc("brownout_capacity_saturated", "What the service did while its gate was saturated (K's ceiling), in brownout_capacity's unit; absent while never measured.", []string{"unit"}, nil)
	capStep  = prometheus.NewDesc("brownout_capacity_step", "How far the law's next correction moves brownout_capacity at most, in its unit: the resolution the corrections know it to.", []string{"unit"}, nil)
	loadDesc = prometheus.NewDesc("brownout_load_estimate_per_second", "The offered load the law estimates, requests a second (absent when none is measured).", nil, nil)
	loadSE   = prometheus.NewDesc("brownout_load_estimate_stderr_per_second", "The standard error of brownout_load_estimate_per_second.", nil, nil)
	offDesc  = prometheus.NewDesc("brownout_all_off_work_seconds", "The service time of a request with every feature off, as the law estimates it from the requests' tallies (absent without tallies).", nil, nil)
	offSE    = prometheus.NewDesc("brownout_all_off_work_stderr_seconds", "The standard error of brownout_all_off_work_seconds.", nil, nil)
	srcDesc  = prometheus.NewDesc("brownout_source_up", "1 when the signal source's last read succeeded.", []string{"source"}, nil)
	saveDesc = prometheus.NewDesc("brownout_state_save_errors_total", "Failed writes of the operators' state file (the change was in force, not on disk).", nil, nil)
	lagDesc  = prometheus.NewDesc("brownout_tick_lag_p99_seconds", "p99 of how late the last 1000 control ticks ran.", nil, nil)
)

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{saveDesc, ofrepDesc, levelDesc, fmodeDesc, pressDesc, modeDesc, shedDesc, genDesc, srcDesc, lagDesc, costDesc, costSE, costUse, chargeD, capDesc, capSat, capStep, loadDesc, loadSE, offDesc, offSE} {
		ch <- d
	}
	for _, d := range readDescs {
		ch <- d
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	for k, n := range m.ofrepN {
		ch <- prometheus.MustNewConstMetric(ofrepDesc, prometheus.CounterValue, float64(n), k[0], k[1])
	}
	m.mu.Unlock()
	st := m.a.ctl.Status()
	for _, f := range st.Features {
		ch <- prometheus.MustNewConstMetric(levelDesc, prometheus.GaugeValue, f.Level, f.Name)
		ch <- prometheus.MustNewConstMetric(fmodeDesc, prometheus.GaugeValue, 1, f.Name, f.Mode.String())
	}
	if st.PressureOK {
		ch <- prometheus.MustNewConstMetric(pressDesc, prometheus.GaugeValue, st.Pressure)
	}
	for i, e := range m.a.ctl.Costs() {
		if e.Known() {
			name := m.a.ctl.Config().Features[i].Name
			ch <- prometheus.MustNewConstMetric(costDesc, prometheus.GaugeValue, e.Value, name)
			ch <- prometheus.MustNewConstMetric(costSE, prometheus.GaugeValue, e.SE, name)
			ch <- prometheus.MustNewConstMetric(costUse, prometheus.GaugeValue, b2f(e.InUse), name)
		}
	}
	me := m.a.ctl.Model()
	unit := modelJSON(me).Capacity.Unit
	ch <- prometheus.MustNewConstMetric(capDesc, prometheus.GaugeValue, me.Capacity, unit, me.Mode)
	if me.Saturated > 0 {
		ch <- prometheus.MustNewConstMetric(capSat, prometheus.GaugeValue, me.Saturated, unit)
	}
	if me.Step > 0 {
		ch <- prometheus.MustNewConstMetric(capStep, prometheus.GaugeValue, me.Step, unit)
	}
	if me.Load > 0 {
		ch <- prometheus.MustNewConstMetric(loadDesc, prometheus.GaugeValue, me.Load)
		ch <- prometheus.MustNewConstMetric(loadSE, prometheus.GaugeValue, me.LoadSE)
	}
	if me.AllOff > 0 {
		ch <- prometheus.MustNewConstMetric(offDesc, prometheus.GaugeValue, me.AllOff)
		ch <- prometheus.MustNewConstMetric(offSE, prometheus.GaugeValue, me.AllOffSE)
	}
	ch <- prometheus.MustNewConstMetric(modeDesc, prometheus.GaugeValue, 1, st.Mode.String())
	ch <- prometheus.MustNewConstMetric(shedDesc, prometheus.GaugeValue, st.Shed)
	ch <- prometheus.MustNewConstMetric(chargeD, prometheus.GaugeValue, m.a.ctl.RequestCost())
	ch <- prometheus.MustNewConstMetric(genDesc, prometheus.GaugeValue, float64(st.Generation))
	for _, r := range st.Signals {
		if !r.Missing {
			ch <- prometheus.MustNewConstMetric(readDescs[r.Signal.Unit()], prometheus.GaugeValue, r.Value, r.Signal.String())
		}
	}
	if m.a.cfg.Sources != nil {
		for _, s := range m.a.cfg.Sources() {
			up := 0.0
			if s.OK {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(srcDesc, prometheus.GaugeValue, up, s.Name)
		}
	}
	ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, m.a.hist.lagP99())
	ch <- prometheus.MustNewConstMetric(saveDesc, prometheus.CounterValue, float64(m.a.saveErrors.Load()))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
