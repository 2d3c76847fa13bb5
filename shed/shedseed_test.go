package shed

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

// fnv1a is the unkeyed hash the cascade used to pick its clients, as an
// outsider can compute it offline.
func fnv1a(key string) float64 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return float64(h) / (1 << 32)
}

// cascade is a Shedder whose cascade refuses half the sheddable clients,
// every request sheddable; served says whether it serves user.
type cascade struct{ h http.Handler }

func newCascade(t *testing.T, seed func() (dimmer.ShedSeed, bool)) cascade {
	t.Helper()
	s, err := New(Config{ShedLevel: func() float64 { return 0.5 }, ShedSeed: seed,
		Classify: func(*http.Request) signals.Class { return signals.Sheddable }})
	require.NoError(t, err)
	return cascade{s.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))}
}

func (c cascade) served(user string) bool {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("X-User-ID", user)
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, req)
	return w.Code == http.StatusOK
}

// TestKeyChosenOfflineIsNotShedLast: a user id chosen offline so that the
// unkeyed hash puts it last in line (shed only above 99.9 %) is shed like
// anyone's once the hash is keyed with a seed the client cannot know:
// about half the time at a level of a half, over instances (or fleets)
// each with its own seed.
func TestKeyChosenOfflineIsNotShedLast(t *testing.T) {
	chosen := ""
	for i := 0; chosen == ""; i++ {
		if k := "mallory-" + strconv.Itoa(i); fnv1a("u:"+k) >= 0.999 {
			chosen = k
		}
	}
	const instances = 200
	shed := 0
	for range instances {
		if !newCascade(t, nil).served(chosen) {
			shed++
		}
	}
	t.Logf("%q (unkeyed fraction %.4f) shed by %d of %d instances at level 0.5", chosen, fnv1a("u:"+chosen), shed, instances)
	assert.InDelta(t, instances/2, shed, 40, "shed like anyone (binomial: 100 ± 7)")
}

// TestSharedSeedShedsTheSameClients: instances given the same seed shed
// the same users; instances with seeds of their own do not agree.
func TestSharedSeedShedsTheSameClients(t *testing.T) {
	seed := dimmer.ShedSeed{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	fleet := func() (dimmer.ShedSeed, bool) { return seed, true }
	a, b := newCascade(t, fleet), newCascade(t, fleet)
	own1, own2 := newCascade(t, nil), newCascade(t, nil)
	disagree, shed := 0, 0
	for i := range 1000 {
		user := "user-" + strconv.Itoa(i)
		sa := a.served(user)
		require.Equal(t, sa, b.served(user), "%s: the same decision under one seed", user)
		if !sa {
			shed++
		}
		if own1.served(user) != own2.served(user) {
			disagree++
		}
	}
	assert.InDelta(t, 500, shed, 80, "half the users shed")
	assert.Greater(t, disagree, 300, "seeds of their own: about half the decisions differ")

	// A seed source that has none yet: the Shedder's own seed, sticky.
	none := newCascade(t, func() (dimmer.ShedSeed, bool) { return dimmer.ShedSeed{}, false })
	for i := range 100 {
		user := "user-" + strconv.Itoa(i)
		assert.Equal(t, none.served(user), none.served(user), "%s: sticky", user)
	}
}
