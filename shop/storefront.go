package shop

import (
	_ "embed"
	"html/template"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/brownout/brownout/internal/service"
)

//go:embed storefront.html
var storefrontHTML string

// storefrontTmpl renders a product page as HTML; html/template escapes
// everything that came from data.
var storefrontTmpl = template.Must(template.New("storefront").Funcs(template.FuncMap{
	"price": func(cents int64) string { return strconv.FormatInt(cents/100, 10) + "." + pad2(cents%100) },
}).Parse(storefrontHTML))

func pad2(n int64) string {
	if n < 10 {
		return "0" + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}

// live is what the page's script needs to evaluate the sections' flags
// in the browser (static/storefront.js): the OFREP base URL, "" for the
// shop's own origin, and the targeting key the server evaluated them for.
// In fleet mode the base URL is the daemon's — with several replicas the
// one the shop follows now (the first while it follows none): a page
// asks that replica for as long as it is open, and a page loaded after a
// failover asks the next.
type live struct {
	OFREP, TargetingKey string
}

// live returns the page's live view for user, nil when there is no
// controller to follow (unprotected). The targeting key is the user's
// (X-User-ID, or the session cookie's "s:…" for anonymous browsing), so
// that the browser's answers match the server's: the session only keys
// the flags (the cart and checkout take X-User-ID), so the page may
// know it.
func (s *Shop) live(user string) *live {
	switch {
	case len(s.cfg.Brownoutd) > 0:
		base := s.remote.Following()
		if base == "" {
			base = s.remote.URLs()[0]
		}
		if s.cfg.Service != "" {
			base += service.Base(s.cfg.Service)
		}
		return &live{OFREP: base, TargetingKey: user}
	case s.api != nil:
		return &live{TargetingKey: user}
	}
	return nil
}

// storefront renders product ?id= (default 1) with its sections, so that
// the dimming is visible in a browser; its script follows the levels
// live (live).
func (s *Shop) storefront(c echo.Context) error {
	id := int64(1)
	if v := c.QueryParam("id"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			problem(c.Response(), http.StatusBadRequest, "bad-product-id", "id: want a positive integer")
			return nil
		}
		id = n
	}
	user, _ := s.user(c)
	pg, status, err := s.page(c.Request().Context(), id, user)
	if err != nil {
		problem(c.Response(), status, "product", err.Error())
		return nil
	}
	w := c.Response()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set(GenerationHeader, strconv.FormatUint(pg.Generation, 10))
	w.WriteHeader(http.StatusOK)
	return storefrontTmpl.Execute(w, struct {
		Page
		Order []string
		Live  *live
	}{pg, Sections(), s.live(user)})
}
