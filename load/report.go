package load

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/brownout/brownout/signals"
)

// Report is what a run measured: per phase, and per second.
type Report struct {
	Phases  []PhaseReport `json:"phases"`
	Seconds []Second      `json:"seconds"`
	// Events as they happened (Config.Events).
	Events []EventMark `json:"events,omitempty"`
}

// PhaseReport is one phase, measured without its first Skip.
type PhaseReport struct {
	Name string `json:"name"`
	// Offered is the requested rate over the part measured (a shaped
	// phase's mean over it); Sent what the generator achieved
	// (requests per second, retries included). Valid: the new requests
	// sent (Sent − Retries) ≥ 98 % of Offered — a run counts only then.
	Offered float64 `json:"offered"`
	Sent    float64 `json:"sent"`
	Valid   bool    `json:"valid"`
	// Retries per second (Kind.Retry), part of Sent.
	Retries float64 `json:"retries,omitempty"`
	// Goodput: 2xx answers within the timeout, per second.
	Goodput float64 `json:"goodput"`
	// CriticalOK: the share of critical requests answered 2xx in time.
	CriticalOK float64 `json:"critical_ok"`
	// P50 and P99 of the 2xx answers; RefusedP99 of the refusals.
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
	RefusedP99 time.Duration `json:"refused_p99_ns"`
	// Refused per second, by reason (the problem+json "reason"; "other"
	// for 503/429 without one).
	Refused map[string]float64 `json:"refused"`
	// Timeouts and Errors (connection errors, other statuses) per second.
	Timeouts float64 `json:"timeouts"`
	Errors   float64 `json:"errors"`
	// Optional: the share of optional parts served in 2xx answers (needs
	// Config.Optional); -1 when unknown.
	Optional float64 `json:"optional"`
	// Samples summarises Config.Sample's values over the phase.
	Samples map[string]Summary `json:"samples,omitempty"`
	From    time.Duration      `json:"from_ns"` // measured from…
	To      time.Duration      `json:"to_ns"`   // …to, since the start
	// Kinds reports each kind of the mix, by Kind.Name.
	Kinds map[string]KindReport `json:"kinds,omitempty"`
}

// KindReport is one kind over a phase (measured without its first Skip).
// Attempts count in the phase they were sent in; logical requests (a first
// attempt and its retries) in the phase of their first attempt.
type KindReport struct {
	// Sent: attempts, retries included. Requests: logical requests.
	Sent     int `json:"sent"`
	Requests int `json:"requests"`
	// OK: logical requests answered 2xx within the timeout on any
	// attempt; Success is OK / Requests (0 without requests).
	OK      int     `json:"ok"`
	Success float64 `json:"success"`
	// Retries: attempts after the first.
	Retries int `json:"retries"`
	// P50 and P99 of the attempts answered 2xx within the timeout.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// Refused attempts per second, by reason (as PhaseReport.Refused).
	Refused map[string]float64 `json:"refused"`
	// Timeouts and Errors (connection errors, other non-2xx statuses):
	// attempts.
	Timeouts int `json:"timeouts"`
	Errors   int `json:"errors"`
}

// Summary of a sampled value over a phase.
type Summary struct {
	Min, Median, Max float64
}

// Second is one second of the run, by the time requests were sent.
type Second struct {
	T        int           `json:"t"`
	Sent     int           `json:"sent"`
	OK       int           `json:"ok"`
	Refused  int           `json:"refused"`
	Timeouts int           `json:"timeouts"`
	Retries  int           `json:"retries,omitempty"` // part of Sent
	P99      time.Duration `json:"p99_ns"`
	Critical float64       `json:"critical_ok"` // -1: no critical request
	// Served and Refusals count the requests of each class sent this
	// second that were answered in time, or refused (503/429): a second
	// with a lower class served while critical was refused is a priority
	// inversion as a client sees it.
	Served   [signals.NumClasses]int `json:"served"`
	Refusals [signals.NumClasses]int `json:"refusals"`
	Sample   map[string]float64      `json:"sample,omitempty"`
}

func report(cfg Config, rs []result, samples []map[string]float64) *Report {
	rep := &Report{}
	// The logical requests answered in time, on any attempt.
	var last uint64
	for _, r := range rs {
		last = max(last, r.seq)
	}
	okSeq := make([]bool, last+1)
	for _, r := range rs {
		if r.ok() {
			okSeq[r.seq] = true
		}
	}
	var at time.Duration
	for _, p := range cfg.Phases {
		skip := min(max(cfg.Skip, 0), p.Duration/2)
		from, to := at+skip, at+p.Duration
		at += p.Duration
		pr := phaseReport(cfg, p, rs, from, to, samples)
		pr.Kinds = kindReports(cfg, rs, from, to, okSeq)
		rep.Phases = append(rep.Phases, pr)
	}
	secs := 0
	for _, p := range cfg.Phases {
		secs += int(p.Duration / time.Second)
	}
	for s := range secs {
		sec := Second{T: s, Critical: -1}
		var lat []time.Duration
		var crit, critOK int
		for _, r := range rs {
			if int(r.sent/time.Second) != s {
				continue
			}
			sec.Sent++
			if r.attempt > 0 {
				sec.Retries++
			}
			class := cfg.Mix[r.kind].Class % signals.NumClasses
			switch {
			case r.ok():
				sec.OK++
				sec.Served[class]++
				lat = append(lat, r.latency)
			case r.reason > 0:
				sec.Refused++
				sec.Refusals[class]++
			case r.timeout:
				sec.Timeouts++
			}
			if cfg.Mix[r.kind].Class == signals.Critical {
				crit++
				if r.ok() {
					critOK++
				}
			}
		}
		sec.P99 = quantile(lat, 0.99)
		if crit > 0 {
			sec.Critical = float64(critOK) / float64(crit)
		}
		if s < len(samples) {
			sec.Sample = samples[s]
		}
		rep.Seconds = append(rep.Seconds, sec)
	}
	return rep
}

func phaseReport(cfg Config, p Phase, rs []result, from, to time.Duration, samples []map[string]float64) PhaseReport {
	el := (to - from).Seconds()
	// What the phase offered over the part measured (a shaped phase's
	// mean over it is not its mean over the whole).
	start := to - p.Duration
	offered := (p.sent(to-start) - p.sent(from-start)) / el
	pr := PhaseReport{Name: p.Name, Offered: offered, Refused: map[string]float64{}, Optional: -1, From: from, To: to}
	var ok, crit, critOK, sent, retries, timeouts, errs, optOn, optAll int
	var lat, refLat []time.Duration
	for _, r := range rs {
		if r.sent < from || r.sent >= to {
			continue
		}
		sent++
		if r.attempt > 0 {
			retries++
		}
		c := cfg.Mix[r.kind].Class
		if c == signals.Critical {
			crit++
		}
		switch {
		case r.ok():
			ok++
			lat = append(lat, r.latency)
			if c == signals.Critical {
				critOK++
			}
			optOn += int(r.optOn)
			optAll += int(r.optAll)
		case r.reason > 0:
			pr.Refused[refusedName(int(r.reason)-1)]++
			refLat = append(refLat, r.latency)
		case r.timeout:
			timeouts++
		default:
			errs++
		}
	}
	pr.Sent, pr.Retries = float64(sent)/el, float64(retries)/el
	pr.Valid = offered == 0 || float64(sent-retries)/el >= 0.98*offered
	pr.Goodput = float64(ok) / el
	if crit > 0 {
		pr.CriticalOK = float64(critOK) / float64(crit)
	}
	pr.P50, pr.P99, pr.RefusedP99 = quantile(lat, 0.5), quantile(lat, 0.99), quantile(refLat, 0.99)
	for k, v := range pr.Refused {
		pr.Refused[k] = v / el
	}
	pr.Timeouts, pr.Errors = float64(timeouts)/el, float64(errs)/el
	if optAll > 0 {
		pr.Optional = float64(optOn) / float64(optAll)
	}
	vals := map[string][]float64{}
	for s := int(from / time.Second); s < int(to/time.Second) && s < len(samples); s++ {
		for k, v := range samples[s] {
			vals[k] = append(vals[k], v)
		}
	}
	if len(vals) > 0 {
		pr.Samples = map[string]Summary{}
		for k, v := range vals {
			slices.Sort(v)
			pr.Samples[k] = Summary{Min: v[0], Median: v[len(v)/2], Max: v[len(v)-1]}
		}
	}
	return pr
}

func kindReports(cfg Config, rs []result, from, to time.Duration, okSeq []bool) map[string]KindReport {
	el := (to - from).Seconds()
	type acc struct {
		KindReport
		lat []time.Duration
	}
	accs := map[string]*acc{}
	for _, k := range cfg.Mix {
		if accs[k.Name] == nil {
			accs[k.Name] = &acc{KindReport: KindReport{Refused: map[string]float64{}}}
		}
	}
	for _, r := range rs {
		if r.sent < from || r.sent >= to {
			continue
		}
		a := accs[cfg.Mix[r.kind].Name]
		a.Sent++
		if r.attempt == 0 {
			a.Requests++
			if okSeq[r.seq] {
				a.OK++
			}
		} else {
			a.Retries++
		}
		switch {
		case r.ok():
			a.lat = append(a.lat, r.latency)
		case r.reason > 0:
			a.Refused[refusedName(int(r.reason)-1)]++
		case r.timeout:
			a.Timeouts++
		default:
			a.Errors++
		}
	}
	out := make(map[string]KindReport, len(accs))
	for name, a := range accs {
		k := a.KindReport
		if k.Requests > 0 {
			k.Success = float64(k.OK) / float64(k.Requests)
		}
		k.P50, k.P99 = quantile(a.lat, 0.5), quantile(a.lat, 0.99)
		for r, v := range k.Refused {
			k.Refused[r] = v / el
		}
		out[name] = k
	}
	return out
}

// WriteTable writes the phases as a table a person reads.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s %8s %8s %8s %9s %7s %7s %8s %8s  %s\n", "phase", "offered", "sent", "goodput", "critical", "p50", "p99", "ref p99", "optional", "refused/s by reason, timeouts/s")
	for _, p := range r.Phases {
		valid := ""
		if !p.Valid {
			valid = " (generator short: run does not count)"
		}
		opt := "-"
		if p.Optional >= 0 {
			opt = fmt.Sprintf("%.0f%%", 100*p.Optional)
		}
		var reasons []string
		for k, v := range p.Refused {
			reasons = append(reasons, fmt.Sprintf("%s %.0f", k, v))
		}
		slices.Sort(reasons)
		if p.Timeouts > 0 {
			reasons = append(reasons, fmt.Sprintf("timeouts %.0f", p.Timeouts))
		}
		if p.Errors > 0 {
			reasons = append(reasons, fmt.Sprintf("errors %.0f", p.Errors))
		}
		fmt.Fprintf(&b, "%-6s %8.0f %8.0f %8.0f %8.1f%% %6dms %6dms %7dms %8s  %s%s\n", p.Name, p.Offered, p.Sent, p.Goodput,
			100*p.CriticalOK, p.P50.Milliseconds(), p.P99.Milliseconds(), p.RefusedP99.Milliseconds(), opt, strings.Join(reasons, ", "), valid)
		keys := make([]string, 0, len(p.Samples))
		for k := range p.Samples {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			s := p.Samples[k]
			fmt.Fprintf(&b, "       %s: min %.4g, median %.4g, max %.4g\n", k, s.Min, s.Median, s.Max)
		}
		writeKinds(&b, p.Kinds)
	}
	for _, e := range r.Events {
		fmt.Fprintf(&b, "event at %5.1fs: %s\n", e.At.Seconds(), e.Name)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as JSON, for machines.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeKinds writes a phase's kinds, a line each.
func writeKinds(b *strings.Builder, kinds map[string]KindReport) {
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		k := kinds[name]
		ok := "-"
		if k.Requests > 0 {
			ok = fmt.Sprintf("%.1f%%", 100*k.Success)
		}
		var more []string
		for r, v := range k.Refused {
			more = append(more, fmt.Sprintf("%s %.0f/s", r, v))
		}
		slices.Sort(more)
		if k.Timeouts > 0 {
			more = append(more, fmt.Sprintf("timeouts %d", k.Timeouts))
		}
		if k.Errors > 0 {
			more = append(more, fmt.Sprintf("errors %d", k.Errors))
		}
		fmt.Fprintf(b, "       %-12s %6d req %7s ok %6d sent %5d retries  p50 %dms p99 %dms  %s\n", name, k.Requests, ok, k.Sent, k.Retries,
			k.P50.Milliseconds(), k.P99.Milliseconds(), strings.Join(more, ", "))
	}
}
