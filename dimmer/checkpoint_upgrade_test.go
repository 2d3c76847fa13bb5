package dimmer

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// oldReleaseCheckpoint was written by the release before the model law
// was the only law (the search law; testConfig; 9 s at p99 1.3 s, 10 s at
// 0.78 s, 100 req/s), with its dimmer.Controller.Checkpoint: a load mark
// and a "dimmed" flag this release ignores, and no capacity.
const oldReleaseCheckpoint = `{
 "v": 1,
 "generation": 8,
 "time": "2026-11-11T00:00:19Z",
 "published": {
  "mode": "auto",
  "shed": 0,
  "reason": "latency.p99 780ms \u003c 1s target: landing, holding",
  "action": "hold",
  "cause": "latency.p99",
  "pressure": 0.78,
  "features": [
   {
    "name": "recommendations",
    "level": 0.12,
    "computed": 0.12,
    "mode": "auto",
    "segments": [
     0.72
    ]
   },
   {
    "name": "reviews",
    "level": 1,
    "computed": 1,
    "mode": "auto",
    "segments": [
     1
    ]
   }
  ],
  "readings": [
   {
    "signal": "latency.p99",
    "value": 0.78,
    "target": 1
   },
   {
    "signal": "sojourn.min",
    "target": 0.05
   }
  ],
  "segments": [
   "vip"
  ],
  "brightness": 0.56
 },
 "status": {
  "mode": "auto",
  "shed": 0,
  "reason": "latency.p99 780ms \u003c 1s target: landing, holding",
  "action": "hold",
  "cause": "latency.p99",
  "pressure": 0.78,
  "features": [
   {
    "name": "recommendations",
    "level": 0.12,
    "computed": 0.12,
    "mode": "auto",
    "segments": [
     0.72
    ]
   },
   {
    "name": "reviews",
    "level": 1,
    "computed": 1,
    "mode": "auto",
    "segments": [
     1
    ]
   }
  ],
  "readings": [
   {
    "signal": "latency.p99",
    "value": 0.78,
    "target": 1
   },
   {
    "signal": "sojourn.min",
    "target": 0.05
   }
  ],
  "segments": [
   "vip"
  ],
  "brightness": 0.56
 },
 "brightness": 0.56,
 "load_mark": 100,
 "dimmed": true,
 "pins": [],
 "frozen": false,
 "shadow": false,
 "costs": {
  "base": [
   0,
   0,
   0
  ],
  "last": "0001-01-01T00:00:00Z"
 },
 "capacity": 0,
 "saturated": 0,
 "scale": 0,
 "seconds": false
}`

// TestAdoptEarlierReleaseCheckpoint: a replica of this release takes over
// from one of the release before in a rolling upgrade. It holds the
// adopted levels, K unknown, until an overload measures K (at a p99 over
// target: the cold rule, the second period) or the targets are well met;
// taken to the ceiling at once, the adopted dim was undone in the first
// period.
func TestAdoptEarlierReleaseCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		p99  float64
	}{{"in band", 0.78}, {"still over", 1.3}} {
		t.Run(tc.name, func(t *testing.T) {
			var cp Checkpoint
			require.NoError(t, json.Unmarshal([]byte(oldReleaseCheckpoint), &cp), "decodes (unknown load_mark/dimmed ignored)")
			r := newRig(t, testConfig())
			r.now = cp.Time
			st, err := r.c.AdoptAt(r.now, cp)
			require.NoError(t, err)
			t.Logf("adopted: brightness %.2f recommendations %.2f reviews %.2f", st.Brightness, level(t, st, "recommendations"), level(t, st, "reviews"))
			bad := false
			for i := range 6 {
				st = r.step(tc.p99, -1)
				t.Logf("step %d p99 %.2f: brightness %.2f recommendations %.2f K %.3g reason %q", i+1, tc.p99, st.Brightness, level(t, st, "recommendations"), r.c.mu.mdl.capacity.k, st.Reason)
				if i == 0 && st.Brightness > 0.56+0.2 {
					bad = true
				}
			}
			if bad {
				t.Errorf("the first step after adopting a dimmed (0.56) old-release checkpoint jumped to full brightness")
			}
		})
	}
}
