package redisstore

import "github.com/prometheus/client_golang/prometheus"

var (
	decisionsDesc = prometheus.NewDesc("brownout_ratelimit_store_decisions_total",
		"Rate limit decisions by who made them: redis, or local (this process's memory, when Redis failed, was too slow or was skipped after a failure).",
		[]string{"prefix", "by"}, nil)
	errorsDesc = prometheus.NewDesc("brownout_ratelimit_store_errors_total",
		"Failed calls to Redis, by kind: timeout (longer than the store's timeout) or error.",
		[]string{"prefix", "kind"}, nil)
	healthyDesc = prometheus.NewDesc("brownout_ratelimit_store_healthy",
		"1 while Redis decides, 0 while decisions are local after a failure.",
		[]string{"prefix"}, nil)
)

// Describe implements prometheus.Collector.
func (s *Store) Describe(ch chan<- *prometheus.Desc) {
	ch <- decisionsDesc
	ch <- errorsDesc
	ch <- healthyDesc
}

// Collect implements prometheus.Collector: the Stats as
// brownout_ratelimit_store_decisions_total{by="redis"|"local"},
// brownout_ratelimit_store_errors_total{kind="timeout"|"error"} and
// brownout_ratelimit_store_healthy, labelled with the key prefix.
func (s *Store) Collect(ch chan<- prometheus.Metric) {
	st, p := s.Stats(), s.cfg.Prefix
	healthy := 0.0
	if s.Healthy() {
		healthy = 1
	}
	ch <- prometheus.MustNewConstMetric(decisionsDesc, prometheus.CounterValue, float64(st.Redis), p, "redis")
	ch <- prometheus.MustNewConstMetric(decisionsDesc, prometheus.CounterValue, float64(st.Fallbacks), p, "local")
	ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, float64(st.Timeouts), p, "timeout")
	ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, float64(st.Errors-st.Timeouts), p, "error")
	ch <- prometheus.MustNewConstMetric(healthyDesc, prometheus.GaugeValue, healthy, p)
}
