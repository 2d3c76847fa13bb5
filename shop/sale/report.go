package sale

import (
	"fmt"
	"github.com/brownout/brownout/shop"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/brownout/brownout/load"
)

// checkoutKinds are the mix's checkout kinds.
var checkoutKinds = []string{"checkout", "checkout (naive retry)"}

// Checkout returns a phase's checkout figures over both checkout kinds:
// the share of logical checkouts that succeeded (on any attempt), and the
// p99 of the successful attempts.
func Checkout(p load.PhaseReport) (success float64, p99 time.Duration, requests int) {
	ok := 0
	for _, name := range checkoutKinds {
		k, found := p.Kinds[name]
		if !found {
			continue
		}
		requests += k.Requests
		ok += k.OK
		p99 = max(p99, k.P99)
	}
	if requests == 0 {
		return 0, p99, 0
	}
	return float64(ok) / float64(requests), p99, requests
}

// Write writes one sale's report: the load's table per phase, the
// checkouts, and the shop's orders and SMS.
func Write(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "protection %s — %s\n", r.Protect, r.Capacity)
	if err := r.Load.WriteTable(w); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tcheckouts\tcheckout ok\tcheckout p99\tgoodput\t")
	for _, p := range r.Load.Phases {
		s, p99, n := Checkout(p)
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t%dms\t%.0f/s\t\n", p.Name, n, 100*s, p99.Milliseconds(), p.Goodput)
	}
	tw.Flush()
	writeShop(w, r.Shop)
	return nil
}

func writeShop(w io.Writer, s shop.SaleReport) {
	fmt.Fprintf(w, "orders %d (and %d retries answered with their order)", s.Orders, s.Replays)
	if !s.StockOK {
		fmt.Fprintf(w, "; STOCK: %s", s.StockErr)
	}
	fmt.Fprintln(w)
	switch {
	case s.Known:
		fmt.Fprintf(w, "SMS: %d delivered, %d lost, %d delivered twice, %d duplicate sends absorbed by the key; %d still queued",
			s.Delivered, s.Lost, s.Twice, s.Absorbed, s.Queued)
		if s.Inline > 0 {
			fmt.Fprintf(w, "; sent inline %d, %d of them failed", s.Inline, s.InlineFailed)
		}
		fmt.Fprintln(w)
	default:
		fmt.Fprintf(w, "SMS: %d queued (the provider is not the shop's own: deliveries unknown)\n", s.Queued)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range s.Sections {
			if !yield(k) {
				return
			}
		}
	})
	var parts []string
	for _, n := range names {
		x := s.Sections[n]
		parts = append(parts, fmt.Sprintf("%s %.0f%% (%.0f%% stale)", n, 100*x.Served, 100*x.Stale))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "sections served over the run: %s\n", strings.Join(parts, ", "))
	}
	if s.Voided > 0 || s.Pending > 0 {
		fmt.Fprintf(w, "payments: %d charges voided (%d of checkouts abandoned unfinished), %d voids failed; %d checkouts unsettled\n",
			s.Voided, s.Cancelled, s.Unmatched, s.Pending)
	}
	fmt.Fprintf(w, "flash-deal lookups refused by the per-user and per-address limits: %d\n", s.DealsRefused)
}

// WriteComparison writes several sales side by side, one column per
// protection, one block per phase, like the sources' tables.
func WriteComparison(w io.Writer, rs []*Result) error {
	if len(rs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "nominal capacity: %s\n\n", rs[0].Capacity)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "phase\tmeasure"
	for _, r := range rs {
		head += "\t" + string(r.Protect)
	}
	fmt.Fprintln(tw, head+"\t")
	row := func(label, phase, name string, f func(p load.PhaseReport) string) {
		line := label + "\t" + name
		for _, r := range rs {
			cell := "-"
			for _, p := range r.Load.Phases {
				if p.Name == phase {
					cell = f(p)
				}
			}
			line += "\t" + cell
		}
		fmt.Fprintln(tw, line+"\t")
	}
	for _, p := range rs[0].Load.Phases {
		n := p.Name
		row(n, n, "offered req/s", func(p load.PhaseReport) string { return fmt.Sprintf("%.0f", p.Offered) })
		row("", n, "goodput req/s", func(p load.PhaseReport) string { return fmt.Sprintf("%.0f", p.Goodput) })
		row("", n, "checkout ok", func(p load.PhaseReport) string { s, _, _ := Checkout(p); return fmt.Sprintf("%.1f%%", 100*s) })
		row("", n, "checkout p99", func(p load.PhaseReport) string { _, d, _ := Checkout(p); return fmt.Sprintf("%dms", d.Milliseconds()) })
		row("", n, "p99 (all good answers)", func(p load.PhaseReport) string { return fmt.Sprintf("%dms", p.P99.Milliseconds()) })
		row("", n, "sections served", func(p load.PhaseReport) string {
			if p.Optional < 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f%%", 100*p.Optional)
		})
		row("", n, "refused + timeouts /s", func(p load.PhaseReport) string {
			var r float64
			for _, v := range p.Refused {
				r += v
			}
			return fmt.Sprintf("%.0f + %.0f", r, p.Timeouts)
		})
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, r := range rs {
		fmt.Fprintf(w, "— %s: ", r.Protect)
		writeShop(w, r.Shop)
	}
	return nil
}
