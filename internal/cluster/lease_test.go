package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var t0 = time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)

// TestLeaseStopsBeforeExpiry: a leader publishes until its renewal's send
// time plus the lease minus the margin, and not after — however late the
// commit's answer came.
func TestLeaseStopsBeforeExpiry(t *testing.T) {
	var l lease
	assert.False(t, l.leads(t0), "the zero lease leads nothing")
	sent := t0
	l.renewed(7, sent, 3*time.Second, time.Second)
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {1999 * time.Millisecond, true}, {2 * time.Second, false}, {3 * time.Second, false}} {
		assert.Equal(t, c.want, l.leads(sent.Add(c.at)), "leads at +%v: got … want", c.at)
	}
	// The database's expiry is at least sent + 3 s: a new leader can only
	// start after it, a full margin after this one stopped.
	dbExpiry := sent.Add(3 * time.Second)
	assert.Equal(t, time.Second, dbExpiry.Sub(l.until), "margin between the last publication and another leader")
	l.lost()
	assert.False(t, l.leads(sent), "a refused renewal stops at once")
	assert.Equal(t, uint64(7), l.term, "the term last held is kept")
}

// TestLeaseRenewalsExtend: each renewal counts from its own send time; a
// renewal that failed (none recorded) lets the lease run out on time.
func TestLeaseRenewalsExtend(t *testing.T) {
	var l lease
	for i := range 5 {
		sent := t0.Add(time.Duration(i) * time.Second)
		l.renewed(1, sent, 3*time.Second, time.Second)
		assert.True(t, l.leads(sent.Add(1500*time.Millisecond)), "tick %d", i)
	}
	last := t0.Add(4 * time.Second)
	assert.True(t, l.leads(last.Add(1900*time.Millisecond)), "one missed renewal: still leading")
	assert.False(t, l.leads(last.Add(2*time.Second)), "then it stops")
}

// TestAttemptAfterExpiry: a follower tries a little after the expiry the
// database gave, never before; an expired lease at once.
func TestAttemptAfterExpiry(t *testing.T) {
	assert.Equal(t, t0.Add(1200*time.Millisecond+attemptSlack), attemptAt(t0, 1200*time.Millisecond))
	assert.Equal(t, t0.Add(attemptSlack), attemptAt(t0, -time.Second))
}

// TestLeaseLength: the lease is DefaultLease, at least three ticks, its
// margin scaled along.
func TestLeaseLength(t *testing.T) {
	for _, c := range []struct {
		tick, lease, margin, wantLease, wantMargin time.Duration
	}{
		{time.Second, 0, 0, 3 * time.Second, time.Second},
		{100 * time.Millisecond, 0, 0, 3 * time.Second, time.Second},
		{2 * time.Second, 0, 0, 6 * time.Second, 2 * time.Second},
		{time.Second, 6 * time.Second, 0, 6 * time.Second, 2 * time.Second},
		{time.Second, 4 * time.Second, 500 * time.Millisecond, 4 * time.Second, 500 * time.Millisecond},
	} {
		l, m := leaseLength(c.tick, c.lease, c.margin)
		assert.Equal(t, [2]time.Duration{c.wantLease, c.wantMargin}, [2]time.Duration{l, m}, "tick %v lease %v margin %v: got … want", c.tick, c.lease, c.margin)
	}
	assert.Equal(t, t0.Add(2*time.Second), deadline(t0, 3*time.Second, time.Second))
}
