package dimmer

import "testing"

// TestKDoesNotWindDownAtTheFloors: a load the floors carry within target
// (p99 0.82 of target, between the set point and High; the gate has
// room, nothing refused) for four minutes, then a quarter of it, where
// full brightness fits (4 workers / 30 ms = 133/s). K does not fall below
// what the floors take at the load, and the levels come back in seconds,
// as after a shorter stay at the floors. (Found by a review: the
// corrections took K from 3.2 to 0.002 s a second, and the features
// 127 s to come back.)
func TestKDoesNotWindDownAtTheFloors(t *testing.T) {
	for _, over := range []int{30, 240} {
		r := newModelRig(t)
		st := r.periods(over, 390)
		carried := 390 * r.c.mu.mdl.w0
		t.Logf("%ds at 390/s: brightness %.2f, K %.4g s/s; the floors carried ≈ %.2f s/s within target", over, st.Brightness, r.c.mu.mdl.capacity.k, carried)
		full := -1
		for i := range 300 {
			if st = r.period(100); st.Brightness >= 0.99 {
				full = i + 1
				break
			}
		}
		t.Logf("  full brightness %d s after the load fell to 100/s", full)
		if full < 0 || full > 30 {
			t.Errorf("after %ds at the floors: %d s to full brightness", over, full)
		}
	}
}
