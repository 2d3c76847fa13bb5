package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

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

// TestNeverOlderThanTheStateFile: the last-known state read at start is
// held like one that arrived: a state of its epoch with a lower
// generation (a replica behind) is not taken, a newer one or another
// epoch's is.
func TestNeverOlderThanTheStateFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state.json")
	state := func(boot int64, gen uint64, level float64) string {
		return fmt.Sprintf(`{"v":1,"boot":%d,"generation":%d,"mode":"auto","features":[{"name":"x","level":%v}]}`, boot, gen, level)
	}
	var w wireState
	require.NoError(t, json.Unmarshal([]byte(state(7, 10, 0.3)), &w))
	w.SavedAt = time.Now()
	require.NoError(t, writeStateFile(file, &w))
	r, err := NewRemote(RemoteOptions{URLs: []string{"http://a", "http://b"}, StateFile: file})
	require.NoError(t, err)
	level := func() float64 { return r.State().LevelAt(0, -1) }
	require.Equal(t, 0.3, level())
	for _, tc := range []struct {
		boot  int64
		gen   uint64
		level float64
		taken bool
	}{
		{7, 9, 0.9, false},  // behind the file
		{7, 10, 0.3, true},  // the same
		{7, 12, 0.5, true},  // newer
		{7, 11, 0.9, false}, // behind what was taken since
		{8, 1, 0.7, true},   // another epoch: a restart
	} {
		adopted, err := r.apply(0, "", state(tc.boot, tc.gen, tc.level))
		require.NoError(t, err)
		assert.Equal(t, tc.taken, adopted, "%d-%d", tc.boot, tc.gen)
		if tc.taken {
			assert.Equal(t, tc.level, level(), "%d-%d", tc.boot, tc.gen)
		}
	}
}
