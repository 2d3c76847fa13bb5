package shop

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/brownout/brownout/internal/local"
)

// The demo endpoints, under /api/demo/ beside the API and never shed: what
// a sale run needs from a shop it did not start — where its dependencies
// are (to set their fault knobs), a capacity dip, and the count of orders
// and their SMS. A real shop would keep them on an admin listener; the
// demo binds 127.0.0.1, and serves them to clients on this machine only
// (internal/local): a page in a browser there, of another site or of a
// name re-pointed at 127.0.0.1, gets 403 — it could slow the shop down.

// DepsInfo says where the shop's dependencies are (their /admin/fault
// knobs are on the same servers).
type DepsInfo struct {
	Payment string `json:"payment"`
	SMS     string `json:"sms"`
	Recs    string `json:"recommendations"`
	// Capacity is the shop's nominal capacity.
	Capacity Capacity `json:"capacity"`
	Protect  Protect  `json:"protect"`
}

// SaleReport counts the orders since a time and what became of their SMS.
// The SMS of the orders since that time (Delivered, Lost, Twice) are
// read from the database; the counts of what the shop served (Orders,
// Replays, Absorbed, Dead, Inline, InlineFailed, Sections, Voided,
// Unmatched, Cancelled, DealsRefused) are this process's since it
// started — Since gives them over a run; Queued, Pending and StockOK are
// the shop's state now.
type SaleReport struct {
	Orders int64 `json:"orders"`
	// Replays: checkouts answered with an order an Idempotency-Key had
	// already bought.
	Replays int64 `json:"replays"`
	// Known is false when the SMS provider is not the shop's own: the
	// delivery counts below are then unknown.
	Known bool `json:"known"`
	// Delivered: orders whose SMS reached the handset; Lost: orders whose
	// SMS did not; Twice: orders whose SMS reached the handset more than
	// once; Absorbed: duplicate sends the provider's idempotency key
	// absorbed.
	Delivered, Lost, Twice, Absorbed int64
	// Queued: messages still in the outbox; Dead: moved to its dead
	// letters by this process.
	Queued, Dead int64
	// Inline and InlineFailed: the baseline's sends in the request.
	Inline, InlineFailed int64
	// Sections served: by section, the share of product pages that got it
	// (present or stale), and the stale share.
	Sections map[string]SectionShare `json:"sections"`
	// Voided: charges given back — of checkouts charged whose order then
	// failed (sold out meanwhile), and of checkouts abandoned unfinished
	// (Cancelled of them, settled by store.Reconcile); Unmatched: voids
	// that failed, whose checkouts Reconcile cancels later.
	Voided    int64 `json:"voided"`
	Unmatched int64 `json:"unmatched"`
	Cancelled int64 `json:"cancelled"`
	// Pending: checkouts claimed and not yet settled (in flight, or
	// waiting for a retry with their key or for Reconcile).
	Pending int64 `json:"pending"`
	// DealsRefused by the flash deal's per-user and per-address limits.
	DealsRefused int64 `json:"deals_refused"`
	// StockOK: no product sold more than its stock (Stats.Check).
	StockOK  bool   `json:"stock_ok"`
	StockErr string `json:"stock_err,omitempty"`
}

// SectionShare is one optional section's service.
type SectionShare struct {
	Served, Stale, Dimmed, Unavailable float64
	// Pages counts the product pages the shares are of, by what they got
	// of the section: present, stale, dimmed, unavailable.
	Pages [4]int64 `json:"pages"`
}

func sectionShare(n [4]int64) SectionShare {
	all := float64(n[0] + n[1] + n[2] + n[3])
	return SectionShare{Served: float64(n[0]+n[1]) / all, Stale: float64(n[1]) / all,
		Dimmed: float64(n[2]) / all, Unavailable: float64(n[3]) / all, Pages: n}
}

// Since returns r over the time since base, an earlier report of the same
// shop process: its counts less base's (a shop that served before a sale
// run counted that too), its state and its SMS as they are. A shop that
// does not tell its sections' counts (SectionShare.Pages, an older one)
// keeps its shares since it started.
func (r SaleReport) Since(base SaleReport) SaleReport {
	r.Orders -= base.Orders
	r.Replays -= base.Replays
	r.Absorbed -= base.Absorbed
	r.Dead -= base.Dead
	r.Inline -= base.Inline
	r.InlineFailed -= base.InlineFailed
	r.Voided -= base.Voided
	r.Unmatched -= base.Unmatched
	r.Cancelled -= base.Cancelled
	r.DealsRefused -= base.DealsRefused
	sections := map[string]SectionShare{}
	for name, x := range r.Sections {
		n := x.Pages
		if n == ([4]int64{}) {
			sections[name] = x // a shop that does not tell its counts: its shares as they are
			continue
		}
		for i, b := range base.Sections[name].Pages {
			n[i] -= b
		}
		if n[0]+n[1]+n[2]+n[3] > 0 {
			sections[name] = sectionShare(n)
		}
	}
	r.Sections = sections
	return r
}

// Report counts the orders created since since and their SMS.
func (s *Shop) Report(ctx context.Context, since time.Time) (SaleReport, error) {
	r := SaleReport{Orders: s.counts.orders.Load(), Replays: s.counts.replays.Load(),
		Inline: s.counts.smsInline.Load(), InlineFailed: s.counts.smsInlineErr.Load(),
		DealsRefused: s.counts.dealsRefused.Load(), Unmatched: s.counts.unmatched.Load(), Voided: s.counts.voided.Load(),
		Cancelled: s.counts.cancelled.Load(), Sections: map[string]SectionShare{}}
	for i, name := range Sections() {
		n := [4]int64{s.counts.present[i].Load(), s.counts.stale[i].Load(), s.counts.dimmed[i].Load(), s.counts.unavailable[i].Load()}
		if n[0]+n[1]+n[2]+n[3] > 0 {
			r.Sections[name] = sectionShare(n)
		}
	}
	st, err := s.store.Stats(ctx)
	if err != nil {
		return r, err
	}
	if err := st.Check(); err != nil {
		r.StockErr = err.Error()
	} else {
		r.StockOK = true
	}
	if r.Pending, err = s.store.Pending(ctx); err != nil {
		return r, err
	}
	if s.box != nil {
		ob, err := s.box.Stats(ctx)
		if err != nil {
			return r, err
		}
		r.Queued, r.Dead = int64(ob.Depth), int64(ob.DeadLettered)
	}
	if s.SMS == nil {
		return r, nil
	}
	r.Known = true
	ids, err := s.store.OrderIDsSince(ctx, since)
	if err != nil {
		return r, err
	}
	for _, id := range ids {
		switch n := s.SMS.Delivered("sms-" + id); {
		case n == 0:
			r.Lost++
		case n > 1:
			r.Twice++
			r.Delivered++
		default:
			r.Delivered++
		}
	}
	r.Absorbed = s.SMS.Stats().DuplicatesAbsorbed
	return r, nil
}

// demo serves /api/demo/.
func (s *Shop) demo(parent *http.ServeMux) {
	mux := localMux{parent}
	mux.HandleFunc("GET /api/demo/deps", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, DepsInfo{Payment: s.cfg.Payment, SMS: s.cfg.SMS, Recs: s.cfg.Recs, Capacity: s.Capacity(), Protect: s.cfg.Protect})
	})
	mux.HandleFunc("PUT /api/demo/slowdown", func(w http.ResponseWriter, r *http.Request) {
		var v struct {
			Factor float64 `json:"factor"`
		}
		if status, err := decode(w, r, &v); err != nil {
			problem(w, status, "bad-body", err.Error())
			return
		}
		if !(v.Factor >= 1 && v.Factor <= 100) || math.IsInf(v.Factor, 0) {
			problem(w, http.StatusBadRequest, "bad-factor", fmt.Sprintf("factor %v: want 1 (normal) to 100", v.Factor))
			return
		}
		s.pool.SetSlowdown(v.Factor)
		writeJSON(w, http.StatusOK, v)
	})
	mux.HandleFunc("GET /api/demo/state", func(w http.ResponseWriter, r *http.Request) {
		if s.src == nil {
			writeJSON(w, http.StatusOK, map[string]any{"protect": s.cfg.Protect})
			return
		}
		st := s.src.State()
		if s.ctl != nil {
			st = s.ctl.Status()
		}
		levels := map[string]float64{}
		for i := range st.NumFeatures() {
			levels[st.FeatureName(i)] = st.LevelAt(i, -1)
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"protect": s.cfg.Protect, "generation": st.Seq(), "mode": st.StateMode().String(),
			"reason": st.Reason, "levels": levels, "shed": st.Shed, "gate": s.shedder.Stats(),
			"busy_workers": s.pool.Busy(), "worked_seconds": s.pool.Worked().Seconds(),
		})
	})
	mux.HandleFunc("GET /api/demo/report", func(w http.ResponseWriter, r *http.Request) {
		var since time.Time
		if v := r.URL.Query().Get("since"); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				problem(w, http.StatusBadRequest, "bad-since", "since: want an RFC 3339 time")
				return
			}
			since = t
		}
		rep, err := s.Report(r.Context(), since)
		if err != nil {
			problem(w, http.StatusInternalServerError, "report", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, rep)
	})
}

// localMux registers handlers served to local clients only.
type localMux struct{ *http.ServeMux }

func (m localMux) HandleFunc(pattern string, h http.HandlerFunc) {
	m.ServeMux.Handle(pattern, local.Only(h, problem))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
