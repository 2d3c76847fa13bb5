package provider

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNextPrefersReplicasNotFailing: after replica i, Run tries the next
// in the order given whose last connection did not fail; when every
// other one failed, simply the next.
func TestNextPrefersReplicasNotFailing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failing []bool
		from    int
		want    int
	}{
		{"one URL", []bool{true}, 0, 0},
		{"the next", []bool{false, false, false}, 0, 1},
		{"wrapping", []bool{false, false, false}, 2, 0},
		{"skips a failing one", []bool{false, false, true}, 1, 0},
		{"every other one failing: the next", []bool{true, false, true, true}, 1, 2},
		{"all failing: the next", []bool{true, true, true}, 1, 2},
		{"the one left is not failing", []bool{true, true, false}, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			urls := []string{"http://a", "http://b", "http://c", "http://d"}[:len(tc.failing)]
			r, err := NewRemote(RemoteOptions{URLs: urls})
			require.NoError(t, err)
			for i, f := range tc.failing {
				r.mu.peers[i].failing = f
			}
			assert.Equal(t, tc.want, r.next(tc.from))
		})
	}
}

// TestALaggingReplicaIsTriedLast: a replica whose stream failed, or that
// was left for lagging even after it followed, is failing — tried after
// the others; one whose stream ended after it followed is not.
func TestALaggingReplicaIsTriedLast(t *testing.T) {
	r, err := NewRemote(RemoteOptions{URLs: []string{"http://a", "http://b", "http://c"}})
	require.NoError(t, err)
	r.disconnected(0, true, r.lagError("http://a", true))
	r.disconnected(1, true, errHeard)
	r.disconnected(2, false, errors.New("connection refused"))
	var got []bool
	for _, p := range r.mu.peers {
		got = append(got, p.failing)
	}
	assert.Equal(t, []bool{true, false, true}, got)
}
