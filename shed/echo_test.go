package shed

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/signals"
)

// The commands mount the middleware on echo with echo.WrapMiddleware: the
// refusal, the class in the context and the outcome recording all survive.
func TestUnderEcho(t *testing.T) {
	s, _ := New(Config{ShedLevel: func() float64 { return 1 }, TrustPriority: true})
	e := echo.New()
	e.Use(echo.WrapMiddleware(s.Middleware))
	e.GET("/feed", func(c echo.Context) error {
		cl, ok := ClassFrom(c.Request().Context())
		assert.True(t, ok)
		return c.String(http.StatusOK, cl.String())
	})
	do := func(prio string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/feed", nil)
		req.Header.Set(signals.PriorityHeader, prio)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	rec := do("sheddable")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	rec = do("critical")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "critical", rec.Body.String())
	c := s.Recorder().Counters().Load()
	assert.Equal(t, uint64(1), c[signals.Critical].Completed)
	assert.Equal(t, uint64(1), c[signals.Sheddable].Rejected[signals.ReasonShedLevel])
}
