package fallback

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports guards and outboxes under brownout_dependency_ and
// brownout_outbox_ names. Register it on a registry you own. It is safe for
// concurrent use.
type Collector struct {
	guards   []*Guard
	outboxes map[string]*Outbox
}

// NewCollector returns a collector for the guards and the named outboxes.
func NewCollector(guards []*Guard, outboxes map[string]*Outbox) *Collector {
	return &Collector{guards: guards, outboxes: outboxes}
}

var (
	depCalls = prometheus.NewDesc("brownout_dependency_calls_total",
		"Calls through a dependency's guard, by outcome (ok, failed).", []string{"dependency", "outcome"}, nil)
	depRejected = prometheus.NewDesc("brownout_dependency_rejections_total",
		"Calls the guard refused without calling, by reason (breaker, bulkhead, budget).", []string{"dependency", "reason"}, nil)
	depTimeouts = prometheus.NewDesc("brownout_dependency_timeouts_total",
		"Attempts that took longer than the guard's timeout.", []string{"dependency"}, nil)
	depRetries = prometheus.NewDesc("brownout_dependency_retries_total",
		"Retries made by the guard.", []string{"dependency"}, nil)
	depState = prometheus.NewDesc("brownout_dependency_breaker_state",
		"Circuit breaker state: 0 closed, 1 half-open, 2 open.", []string{"dependency"}, nil)
	depTransitions = prometheus.NewDesc("brownout_dependency_breaker_transitions_total",
		"Circuit breaker transitions, by target state.", []string{"dependency", "to"}, nil)
	depTimeout = prometheus.NewDesc("brownout_dependency_timeout_seconds",
		"The guard's current per-attempt timeout.", []string{"dependency"}, nil)
	depTimeoutRatio = prometheus.NewDesc("brownout_dependency_timeout_ratio",
		"Share of the last 30 s's attempts that timed out (of those that succeeded or timed out).", []string{"dependency"}, nil)
	boxDepth = prometheus.NewDesc("brownout_outbox_depth",
		"Messages waiting in the outbox.", []string{"outbox"}, nil)
	boxOldest = prometheus.NewDesc("brownout_outbox_oldest_age_seconds",
		"Age of the oldest waiting message.", []string{"outbox"}, nil)
	boxSent = prometheus.NewDesc("brownout_outbox_sent_total",
		"Messages sent by this process.", []string{"outbox"}, nil)
	boxDead = prometheus.NewDesc("brownout_outbox_dead_lettered_total",
		"Messages moved to the dead-letter table by this process.", []string{"outbox"}, nil)
	boxFailed = prometheus.NewDesc("brownout_outbox_send_failures_total",
		"Failed sends by this process.", []string{"outbox"}, nil)
	boxFenced = prometheus.NewDesc("brownout_outbox_fenced_total",
		"Deletes, retries, dead letters and releases by this process that found the message no longer under its claim (lease run out, or removed by Done).", []string{"outbox"}, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{depCalls, depRejected, depTimeouts, depRetries, depState, depTransitions,
		depTimeout, depTimeoutRatio, boxDepth, boxOldest, boxSent, boxDead, boxFailed, boxFenced} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	for _, g := range c.guards {
		st := g.Status()
		n := st.Dependency
		counter(depCalls, st.OK, n, "ok")
		counter(depCalls, st.Failed, n, "failed")
		for _, why := range []string{"breaker", "bulkhead", "budget"} {
			counter(depRejected, st.Rejected[why], n, why)
		}
		counter(depTimeouts, st.Timeouts, n)
		counter(depRetries, st.Retries, n)
		state := map[string]float64{"closed": 0, "half-open": 1, "open": 2}[st.State]
		ch <- prometheus.MustNewConstMetric(depState, prometheus.GaugeValue, state, n)
		to := map[string]uint64{closedState: 0, halfOpenState: 0, openState: 0}
		for k, v := range st.TransitionTotals {
			to[k[1]] += v
		}
		for s, v := range to {
			counter(depTransitions, v, n, s)
		}
		ch <- prometheus.MustNewConstMetric(depTimeout, prometheus.GaugeValue, st.Timeout.Seconds(), n)
		ch <- prometheus.MustNewConstMetric(depTimeoutRatio, prometheus.GaugeValue, st.TimeoutRate, n)
	}
	for name, o := range c.outboxes {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := o.Stats(ctx)
		cancel()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(boxDepth, err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(boxDepth, prometheus.GaugeValue, float64(st.Depth), name)
		ch <- prometheus.MustNewConstMetric(boxOldest, prometheus.GaugeValue, st.OldestAge.Seconds(), name)
		counter(boxSent, st.Sent, name)
		counter(boxDead, st.DeadLettered, name)
		counter(boxFailed, st.Failed, name)
		counter(boxFenced, st.Fenced, name)
	}
}
