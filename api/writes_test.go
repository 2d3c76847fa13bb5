package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

// TestStateFileFollowsConcurrentWrites: operators writing at once —
// freezes, unfreezes, overrides, releases — leave a state file equal to
// the final state (no older snapshot lands last), and the API's freeze
// flag equal to the controller's.
func TestStateFileFollowsConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, Config{Loopback: true, StateDir: dir, Now: time.Now})
	const writers, rounds = 8, 40
	h := f.api.Handler()
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range rounds {
				var method, path, body string
				switch (g + i) % 4 {
				case 0:
					method, path, body = "POST", "/v1/freeze", fmt.Sprintf(`{"reason":"w%d-%d"}`, g, i)
				case 1:
					method, path, body = "POST", "/v1/unfreeze", `{}`
				case 2:
					method, path, body = "PUT", "/v1/features/reviews/override", fmt.Sprintf(`{"level":0.%d,"reason":"w%d-%d"}`, i%10, g, i)
				case 3:
					method, path, body = "DELETE", "/v1/features/reviews/override", `{}`
				}
				req := httptest.NewRequest(method, path, strings.NewReader(body))
				req.Host = "127.0.0.1"
				req.Header.Set("Content-Type", "application/json")
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(filepath.Join(dir, "operator.json"))
	require.NoError(t, err)
	want, err := json.MarshalIndent(f.api.snapshot(), "", "  ")
	require.NoError(t, err)
	assert.Equal(t, string(want)+"\n", string(b), "the file is the final state")
	assert.Equal(t, f.ctl.State().Mode == dimmer.Frozen, f.api.Frozen(), "the API's freeze is the controller's")
}

// TestPinErrorsHaveTheirOwnStatus: a bad reason is the client's mistake
// (400), not an unknown feature (404).
func TestPinErrorsHaveTheirOwnStatus(t *testing.T) {
	f := newFixture(t, Config{Loopback: true})
	gen := f.ctl.State().Generation
	for _, tc := range []struct {
		method, path, body string
		status             int
		typ                string
	}{
		{"PUT", "/v1/features/reviews/override", `{"level":0.5,"reason":"   "}`, 400, "bad-override"},
		{"PUT", "/v1/features/nope/override", `{"level":0.5}`, 404, "unknown-feature"},
		{"DELETE", "/v1/features/nope/override", `{}`, 404, "unknown-feature"},
		{"DELETE", "/v1/features/reviews/override", `{}`, 404, "no-override"},
	} {
		resp, m := f.do(t, tc.method, tc.path, tc.body)
		assert.Equal(t, tc.status, resp.StatusCode, "%s %s %s: %v", tc.method, tc.path, tc.body, m)
		assert.Equal(t, "urn:brownout:api:"+tc.typ, m["type"], "%s %s", tc.method, tc.body)
	}
	assert.Equal(t, gen, f.ctl.State().Generation)
}

// TestBodyVersionIsChecked: "v" may be left out or be 1; any other
// version is refused with a detail that says so, and changes nothing.
func TestBodyVersionIsChecked(t *testing.T) {
	f := newFixture(t, Config{Loopback: true})
	gen := f.ctl.State().Generation
	for _, w := range []struct{ method, path, body string }{
		{"POST", "/v1/freeze", `{"v":2}`},
		{"POST", "/v1/unfreeze", `{"v":0}`},
		{"PUT", "/v1/features/reviews/override", `{"v":2,"level":0.5}`},
		{"DELETE", "/v1/features/reviews/override", `{"v":-1}`},
		{"PUT", "/v1/shadow", `{"v":7,"on":true}`},
	} {
		resp, m := f.do(t, w.method, w.path, w.body)
		assert.Equal(t, 400, resp.StatusCode, "%s %s", w.path, w.body)
		assert.Contains(t, m["detail"], `"v"`, w.body)
	}
	assert.Equal(t, gen, f.ctl.State().Generation)
	for _, body := range []string{`{"v":1}`, `{}`} {
		resp, m := f.do(t, "POST", "/v1/freeze", body)
		assert.Equal(t, 200, resp.StatusCode, "%s: %v", body, m)
	}
}

// holdRecord is a slog.Handler that holds the goroutine logging a record
// whose reason contains match, until release is closed.
type holdRecord struct {
	match   string
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *holdRecord) Enabled(context.Context, slog.Level) bool { return true }
func (h *holdRecord) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *holdRecord) WithGroup(string) slog.Handler            { return h }
func (h *holdRecord) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "reason" && strings.Contains(a.Value.String(), h.match) {
			h.once.Do(func() { close(h.held); <-h.release })
			return false
		}
		return true
	})
	return nil
}

// TestOperatorChangesAreAtomic: a freeze held half-way (the controller
// frozen, the API's flag and the file not yet written) holds back an
// unfreeze sent meanwhile, so that the last change wins everywhere: the
// controller, the API's flag and the state file agree.
func TestOperatorChangesAreAtomic(t *testing.T) {
	hold := &holdRecord{match: "frozen by operator: A", held: make(chan struct{}), release: make(chan struct{})}
	ctl, err := dimmer.New(dimmer.Config{
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
		Logger:   slog.New(hold),
	})
	require.NoError(t, err)
	dir := t.TempDir()
	f := newFixture(t, Config{Controller: ctl, Loopback: true, StateDir: dir, Now: time.Now})
	h := f.api.Handler()
	write := func(path, body string) chan int {
		done := make(chan int, 1)
		go func() {
			req := httptest.NewRequest("POST", path, strings.NewReader(body))
			req.Host = "127.0.0.1"
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			done <- rec.Code
		}()
		return done
	}
	a := write("/v1/freeze", `{"reason":"A"}`)
	select {
	case <-hold.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the freeze never reached the controller")
	}
	b := write("/v1/unfreeze", `{}`)
	// Without one lock over the whole change, the unfreeze completes
	// here, inside the freeze; with it, it waits.
	select {
	case <-b:
		b <- http.StatusOK
	case <-time.After(300 * time.Millisecond):
	}
	close(hold.release)
	for _, done := range []chan int{a, b} {
		select {
		case code := <-done:
			assert.Equal(t, http.StatusOK, code)
		case <-time.After(10 * time.Second):
			t.Fatal("a write never ended")
		}
	}
	frozen := ctl.State().Mode == dimmer.Frozen
	assert.Equal(t, frozen, f.api.Frozen(), "the API's freeze is the controller's")
	b2, err := os.ReadFile(filepath.Join(dir, "operator.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b2), fmt.Sprintf(`"frozen": %v`, frozen), "the file is the controller's state")
}

// TestStateDirMustBePrivate: a state dir other users can write into, or
// a lock file that is a symbolic link, is refused at start with what to
// do; a missing dir is created private.
func TestStateDirMustBePrivate(t *testing.T) {
	shared := t.TempDir()
	require.NoError(t, os.Chmod(shared, 0o777))
	_, err := New(Config{Controller: newController(t), StateDir: shared})
	assert.ErrorContains(t, err, "writable by every user")
	assert.ErrorContains(t, err, "chmod o-w")

	planted := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(t.TempDir(), "elsewhere"), filepath.Join(planted, ".lock")))
	_, err = New(Config{Controller: newController(t), StateDir: planted})
	assert.ErrorContains(t, err, "symbolic link")

	fresh := filepath.Join(t.TempDir(), "a", "b")
	a, err := New(Config{Controller: newController(t), StateDir: fresh})
	require.NoError(t, err)
	a.Close()
	fi, err := os.Stat(fresh)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

// TestStateSaysWhoPinned: /v1/state's override says who set it (their
// token's name), beside why and until when; the state file keeps it
// across a restart, and a file of an earlier release, without it, still
// loads (the pin then names no one).
func TestStateSaysWhoPinned(t *testing.T) {
	dir := t.TempDir()
	tok := "operator-token-0123456789"
	f := newFixture(t, Config{OperatorTokens: map[string]string{"alice": tok}, StateDir: dir})
	resp, m := f.do(t, "PUT", "/v1/features/reviews/override", `{"level":0.3,"reason":"db failover"}`, "Authorization", "Bearer "+tok)
	require.Equal(t, 200, resp.StatusCode, m)
	override := func(a *API) *OverrideJSON {
		for _, ft := range a.State().Features {
			if ft.Name == "reviews" {
				return ft.Override
			}
		}
		return nil
	}
	o := override(f.api)
	require.NotNil(t, o)
	assert.Equal(t, "alice", o.Who)
	assert.Equal(t, "db failover", o.Reason)
	_, m = f.do(t, "GET", "/v1/state", "")
	assert.Contains(t, fmt.Sprint(m["features"]), "who:alice", "on the wire")

	b, err := os.ReadFile(filepath.Join(dir, "operator.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"who": "alice"`)
	f.api.Close()
	g := newFixture(t, Config{Controller: newController(t), StateDir: dir})
	require.NotNil(t, override(g.api))
	assert.Equal(t, "alice", override(g.api).Who, "restored")
	g.api.Close()

	old := strings.Replace(string(b), `"who": "alice"`, `"x": 0`, 1) // an earlier release's file: no who
	old = strings.Replace(old, `,
      "x": 0`, "", 1)
	require.NotContains(t, old, "who")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "operator.json"), []byte(old), 0o600))
	h := newFixture(t, Config{Controller: newController(t), StateDir: dir})
	require.NotNil(t, override(h.api), "an earlier release's file loads")
	assert.Empty(t, override(h.api).Who)
}

// TestOverrideValuesAreClean: an override's TTL under MinTTL is refused
// and leaves the standing pin in place (a "1ns" replaced an hour's pin,
// which then ended at once); a level of −0 is 0 in the audit and the
// reason; a level of 0.57 reads 0.57 in the answer, the state and the
// state file, not 0.5700000000000001.
func TestOverrideValuesAreClean(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, Config{Loopback: true, StateDir: dir})
	put := func(body string) (*http.Response, map[string]any) {
		return f.do(t, "PUT", "/v1/features/reviews/override", body, "Host", "127.0.0.1")
	}
	pinned := func() *OverrideJSON {
		for _, ft := range f.api.State().Features {
			if ft.Name == "reviews" {
				return ft.Override
			}
		}
		return nil
	}
	resp, m := put(`{"level":0.4,"ttl":"1h","reason":"standing"}`)
	require.Equal(t, 200, resp.StatusCode, m)
	for _, ttl := range []string{"1ns", "1s", "59s"} {
		resp, m = put(`{"level":0.5,"ttl":"` + ttl + `"}`)
		assert.Equal(t, 400, resp.StatusCode, "%s: %v", ttl, m)
		assert.Contains(t, fmt.Sprint(m["detail"]), "want from 1m0s to 168h0m0s", ttl)
		require.NotNil(t, pinned(), ttl)
		assert.Equal(t, "standing", pinned().Reason, "%s: the standing pin stays", ttl)
	}
	resp, m = put(`{"level":0.5,"ttl":"1m"}`)
	assert.Equal(t, 200, resp.StatusCode, "MinTTL itself: %v", m)

	resp, m = put(`{"level":-0}`)
	require.Equal(t, 200, resp.StatusCode, m)
	assert.False(t, math.Signbit(m["level"].(float64)), "the answer's level")
	assert.NotContains(t, f.ctl.State().Reason, "-0", "the reason")
	evs := f.api.events.since(0)
	assert.Contains(t, evs[len(evs)-1].What, "level 0.00", "the audit")
	assert.False(t, math.Signbit(pinned().Level), "the state's")

	resp, m = put(`{"level":0.57,"reason":"x"}`)
	require.Equal(t, 200, resp.StatusCode, m)
	assert.Equal(t, 0.57, m["level"], "the answer's")
	assert.Equal(t, 0.57, pinned().Level, "the state's")
	b, err := os.ReadFile(filepath.Join(dir, "operator.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"level": 0.57,`, "the state file's")
}

// TestNoOpAndAuditWrites: freezing while the signals are stale is a mode
// change, not "fresh" signals; an unfreeze when not frozen changes
// nothing — no event, no new generation (every OFREP ETag would change),
// no write of the state file — and says so; a body of null is refused
// where a JSON object is asked for; a corrupt state file moved aside is
// reported in /v1/events.
func TestNoOpAndAuditWrites(t *testing.T) {
	ctl := newController(t)
	now := t0
	var st *dimmer.State
	for range 5 {
		now = now.Add(time.Second)
		st = ctl.Step(now, signals.Snapshot{Time: now}) // nothing measured
	}
	require.Equal(t, dimmer.Stale, st.Mode)
	frozen := ctl.FreezeAt(now, "hold")
	evs := Changes(st, frozen)
	require.Len(t, evs, 1)
	assert.NotEqual(t, "fresh", evs[0].Kind, "stale → frozen: the signals are as stale as they were")
	assert.Equal(t, "mode", evs[0].Kind)
	var s signals.Snapshot
	s.Time = now.Add(time.Second)
	s.Set(signals.LatencyP99, 0.1)
	ctl.UnfreezeAt(s.Time)
	fresh := ctl.Step(s.Time, s)
	require.Equal(t, dimmer.Auto, fresh.Mode)
	assert.Equal(t, "fresh", Changes(st, fresh)[0].Kind, "stale → auto: fresh signals")

	dir := t.TempDir()
	f := newFixture(t, Config{Loopback: true, StateDir: dir})
	gen := f.ctl.State().Generation
	seq := len(f.api.events.since(0))
	info, err := os.Stat(filepath.Join(dir, "operator.json"))
	missing := err != nil
	resp, m := f.do(t, "POST", "/v1/unfreeze", `{}`, "Host", "127.0.0.1")
	require.Equal(t, 200, resp.StatusCode, m)
	assert.Equal(t, "not frozen: nothing changed", m["detail"])
	assert.Equal(t, gen, f.ctl.State().Generation, "no new generation")
	assert.Len(t, f.api.events.since(0), seq, "no event")
	if after, err := os.Stat(filepath.Join(dir, "operator.json")); missing {
		assert.Error(t, err, "no state file written")
	} else {
		assert.Equal(t, info.ModTime(), after.ModTime(), "the state file untouched")
	}
	for _, path := range []string{"/v1/freeze", "/v1/unfreeze"} {
		for _, b := range []string{`null`, ` null `, `[]`, `"x"`, `1`} {
			resp, m = f.do(t, "POST", path, b, "Host", "127.0.0.1")
			assert.Equal(t, 400, resp.StatusCode, "%s %s: %v", path, b, m)
		}
	}
	assert.False(t, f.api.Frozen())
	resp, m = f.do(t, "POST", "/v1/freeze", ` {"reason":"x"}`, "Host", "127.0.0.1")
	assert.Equal(t, 200, resp.StatusCode, m)
	resp, m = f.do(t, "POST", "/v1/unfreeze", `{}`, "Host", "127.0.0.1")
	assert.Equal(t, 200, resp.StatusCode, m)
	assert.Nil(t, m["detail"], "it was frozen")
	f.api.Close()

	require.NoError(t, os.WriteFile(filepath.Join(dir, "operator.json"), []byte("{not json"), 0o600))
	g := newFixture(t, Config{Controller: newController(t), StateDir: dir})
	var found bool
	for _, e := range g.api.events.since(0) {
		if e.Kind == "state-file" {
			found = true
			assert.Contains(t, e.What, "moved aside")
		}
	}
	assert.True(t, found, "the corrupt file is reported in the events")
}
